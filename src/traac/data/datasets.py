"""Every benchmark and training set as a list of `Item`s, from one spec string.

`load_items(spec)` is the single entry point shared by `traac eval` and the trainer:

- a local file (``.json``, ``.jsonl``, ``.parquet``) whose layout is detected from its rows
  (generic question/answer, OptimalThinkingBench's underthinking file, the BBEH file, and the
  hub layouts below saved to disk);
- ``testbed:easy|medium|hard|all[?n=&seed=]``: the offline testbed's problems;
- ``reasoning-gym:TASK[?size=&seed=&<config>=...]``: procedurally generated, verified by the
  task's own `score_answer`;
- ``otb-underthink[?n=&seed=]``: UnderthinkingBench regenerated with reasoning-gym (SPEC 5);
- ``otb-overthink`` and ``otb`` (both halves; the overthinking half needs the hub);
- named hub benchmarks (`HUB_DATASETS`: ``aime``, ``amc``, ``gpqa-diamond``, ``bbeh``,
  ``bbh``, ``supergpqa``, ``dapo-math-17k``), their hub ids, or any other hub id with a
  question/answer layout.

Adapters are plain functions `rows -> list[Item]` so the same code reads a hub split and a file
saved in its layout. A row that lacks what its layout needs is a `TraacError` naming the row and
the field; nothing is skipped silently.
"""

from __future__ import annotations

import json
import random
import re
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlparse

import datasets
import pyarrow.parquet as pq
import reasoning_gym
from huggingface_hub import constants
from reasoning_gym.factory import DATASETS

from traac.common.items import Item
from traac.data.testbed_problems import parse_spec
from traac.errors import TraacError

Row = Mapping[str, Any]
Adapter = Callable[..., list[Item]]

FILE_SUFFIXES = (".json", ".jsonl", ".parquet")
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")

# UnderthinkingBench (OptimalThinkingBench): 50 items from each of these reasoning-gym tasks,
# with the generator settings the benchmark's authors published (other settings: defaults).
OTB_UNDERTHINK_TASKS: dict[str, dict[str, Any]] = {
    "ab": {"length": 20},
    "advanced_geometry": {"min_coord": -20, "max_coord": 20},
    "knight_swap": {},
    "tsumego": {"min_board_size": 15, "max_board_size": 19, "max_stones": 20},
    "fraction_simplification": {},
    "propositional_logic": {},
    "bitwise_arithmetic": {"difficulty": 4},
    "letter_counting": {"min_words": 25, "max_words": 35},
    "maze": {"min_dist": 15, "max_dist": 25, "min_grid_size": 15, "max_grid_size": 25},
    "puzzle24": {"min_value": 8, "max_value": 10},
    "quantum_lock": {"difficulty": 25},
}
OTB_UNDERTHINK = "otb-underthink"
OTB_OVERTHINK = "otb-overthink"

# The 27 BIG-Bench Hard tasks (configs of lukaemon/bbh).
BBH_TASKS = (
    "boolean_expressions",
    "causal_judgement",
    "date_understanding",
    "disambiguation_qa",
    "dyck_languages",
    "formal_fallacies",
    "geometric_shapes",
    "hyperbaton",
    "logical_deduction_five_objects",
    "logical_deduction_seven_objects",
    "logical_deduction_three_objects",
    "movie_recommendation",
    "multistep_arithmetic_two",
    "navigate",
    "object_counting",
    "penguins_in_a_table",
    "reasoning_about_colored_objects",
    "ruin_names",
    "salient_translation_error_detection",
    "snarks",
    "sports_understanding",
    "temporal_sequences",
    "tracking_shuffled_objects_five_objects",
    "tracking_shuffled_objects_seven_objects",
    "tracking_shuffled_objects_three_objects",
    "web_of_lies",
    "word_sorting",
)


# --------------------------------------------------------------------------------------------
# Spec parsing and the entry point.


def split_spec(spec: str) -> tuple[str, dict[str, str]]:
    """``name?key=value&...`` -> (name, params). A spec without ``?`` has no params."""
    if "?" not in spec:
        return spec, {}
    name, query = spec.split("?", 1)
    try:
        params = dict(parse_qsl(query, keep_blank_values=True, strict_parsing=True))
    except ValueError:
        raise TraacError(
            f"dataset {spec!r}: cannot parse {query!r} as key=value&key=value"
        ) from None
    return name, params


def load_items(spec: str) -> list[Item]:
    """The items a dataset spec names (see the module docstring for the forms)."""
    spec = spec.strip()
    if not spec:
        raise TraacError(
            "dataset: empty spec; pass a file, testbed:TIER, reasoning-gym:TASK or a name"
        )
    name, params = split_spec(spec)
    if name.startswith("testbed:") or name == "testbed":
        return list(parse_spec(spec))
    if name.startswith("reasoning-gym:"):
        task = name.split(":", 1)[1]
        return reasoning_gym_items(task, **_params(spec, params, default_size=50))
    if name == OTB_UNDERTHINK:
        return otb_underthink_items(**_params(spec, params, n=50))
    if name == "otb":
        try:
            over = _load_hub(spec, HUB_DATASETS[OTB_OVERTHINK], {}, OTB_OVERTHINK)
        except TraacError as err:
            raise TraacError(
                f"{err} (OverthinkingBench, the overthinking half of 'otb', exists only on the "
                f"hub; '{OTB_UNDERTHINK}' is regenerated offline)"
            ) from err
        return over + otb_underthink_items(**_params(spec, params, n=50))
    path = Path(name).expanduser()
    if path.exists() or name.endswith(FILE_SUFFIXES):
        if params:
            raise TraacError(f"dataset {spec!r}: a file takes no ?options")
        return load_file(path)
    name = _NAME_BY_REPO.get(name, name)
    if name in HUB_DATASETS:
        return _load_hub(spec, HUB_DATASETS[name], params, name)
    if name.count("/") == 1 and not name.startswith((".", "/", "~")):
        return _load_hub(spec, HubSource(name, adapt_detected), params, name.split("/")[1])
    known = ", ".join([*HUB_DATASETS, OTB_UNDERTHINK, "otb"])
    raise TraacError(
        f"dataset {spec!r}: no such file, and not a known name ({known}), testbed:TIER, "
        "reasoning-gym:TASK or hub id OWNER/NAME"
    )


def _params(
    spec: str, params: dict[str, str], default_size: int | None = None, n: int | None = None
):
    """Typed params: ints and floats parsed, the rest kept as text (reasoning-gym configs)."""
    out: dict[str, Any] = {}
    for key, raw in params.items():
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    for key in ("size", "seed", "n"):
        if key in out and not isinstance(out[key], int):
            raise TraacError(f"dataset {spec!r}: {key}={params[key]!r} is not an integer")
    if default_size is not None:
        out.setdefault("size", default_size)
    if n is not None:
        out.setdefault("n", n)
        unknown = set(out) - {"n", "seed"}
        if unknown:
            raise TraacError(f"dataset {spec!r}: unknown option(s) {sorted(unknown)}; use n, seed")
    return out


# --------------------------------------------------------------------------------------------
# reasoning-gym: procedural tasks, UnderthinkingBench.


def reasoning_gym_items(
    task: str, size: int = 50, seed: int = 0, data_source: str | None = None, **config: Any
) -> list[Item]:
    """`size` problems of a reasoning-gym task; each keeps its entry for the task's verifier."""
    if task not in DATASETS:
        raise TraacError(f"reasoning-gym:{task}: no such task (see reasoning_gym.factory.DATASETS)")
    try:
        dataset = reasoning_gym.create_dataset(task, size=size, seed=seed, **config)
    except (TypeError, ValueError, AssertionError) as err:
        raise TraacError(f"reasoning-gym:{task}: bad configuration {config}: {err}") from err
    source = data_source or task
    items = []
    for i, entry in enumerate(dataset):
        entry = dict(entry)
        entry.setdefault("metadata", {}).setdefault("source_dataset", task)
        items.append(
            Item(
                id=f"{source}-{task}-{seed}-{i}" if data_source else f"{task}-{seed}-{i}",
                question=entry["question"],
                answer="" if entry.get("answer") is None else str(entry["answer"]),
                verifier="task",
                data_source=source,
                entry=entry,
            )
        )
    return items


def otb_underthink_items(n: int = 50, seed: int = 0) -> list[Item]:
    """UnderthinkingBench regenerated: `n` problems of each of its 11 reasoning-gym tasks."""
    items: list[Item] = []
    for task, config in OTB_UNDERTHINK_TASKS.items():
        items += reasoning_gym_items(task, size=n, seed=seed, data_source=OTB_UNDERTHINK, **config)
    return items


# --------------------------------------------------------------------------------------------
# Local files.


def read_rows(path: Path) -> list[Row] | dict[str, Any]:
    """The records of a JSON, JSONL or parquet file (a JSON object is returned as is)."""
    if not path.is_file():
        raise TraacError(f"dataset {str(path)!r}: no such file")
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        try:
            return pq.read_table(path).to_pylist()
        except Exception as err:  # pyarrow raises many types for a bad file
            raise TraacError(f"dataset {str(path)!r}: not a readable parquet file ({err})") from err
    where = f"dataset {str(path)!r}"
    text = read_text(path, where)
    if suffix == ".jsonl":
        return [
            json_value(line, f"{where}: line {n}")
            for n, line in enumerate(text.split("\n"), start=1)  # U+2028 may sit in a string
            if line.strip()
        ]
    return json_value(text, where, whole_file=True)


def read_text(path: Path, where: str) -> str:
    """A file's text; bytes that are not UTF-8 are one line naming where."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise TraacError(f"{where}: not UTF-8 text (byte {err.start}: {err.reason})") from None


def json_value(text: str, where: str, *, whole_file: bool = False) -> Any:
    """Parsed JSON that is also valid text: a lone surrogate escape such as "\\ud800" parses
    but cannot be written back as UTF-8, so it is refused here, before any work."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        if whole_file:
            raise TraacError(
                f"{where}: not JSON ({err.msg} at line {err.lineno}); "
                "use .jsonl for one record per line"
            ) from None
        raise TraacError(f"{where} is not JSON ({err.msg})") from None
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as err:
        raise TraacError(
            f"{where}: holds a lone surrogate ({err.object[err.start : err.end]!r}), "
            "which is not text"
        ) from None
    return value


def load_file(path: Path) -> list[Item]:
    """Items of a local file, its layout detected from the records."""
    data = read_rows(path)
    source = path.stem
    if isinstance(data, dict):
        if isinstance(data.get("examples"), list):
            return adapt_bbeh(data["examples"], source=source)
        raise TraacError(
            f"dataset {str(path)!r}: a JSON object needs an 'examples' list (the BBEH layout); "
            "otherwise give a list of records"
        )
    if not isinstance(data, list) or not data:
        raise TraacError(f"dataset {str(path)!r}: no records")
    return adapt_detected(data, source=source)


def adapt_detected(rows: Sequence[Row], source: str = "dataset") -> list[Item]:
    """Rows of any known layout, judged from the first record."""
    return detect_adapter(rows[0], where=source)(rows, source=source)


def detect_adapter(row: Any, where: str) -> Adapter:
    """The adapter for a layout, judged from its first record."""
    if not isinstance(row, Mapping):
        raise TraacError(f"dataset {where!r}: row 0 is not an object")
    for adapter, keys in _LAYOUTS:
        if all(_has(row, key) for key in keys):
            return adapter
    return adapt_generic


def _has(row: Row, key: str) -> bool:
    if key == "metadata.source_dataset":
        meta = _metadata(row)
        return isinstance(meta, Mapping) and "source_dataset" in meta
    if key == "prompt:messages":
        return isinstance(row.get("prompt"), list)
    return key in row


# --------------------------------------------------------------------------------------------
# Adapters: rows of one layout -> items. `source` names the set (data_source, id prefix).


def _field(row: Row, key: str, i: int, source: str, kind: type | tuple[type, ...] = str) -> Any:
    """A required field, of the right type, or an error naming the row and the field."""
    if not isinstance(row, Mapping):
        raise TraacError(f"{source}: row {i} is not an object")
    value = row.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise TraacError(f"{source}: row {i} has no {key!r} field (or it is empty)")
    if not isinstance(value, kind):
        raise TraacError(f"{source}: row {i}: field {key!r} is {type(value).__name__}, not text")
    return value


def _answer_text(value: Any) -> str:
    """Gold answers as text; integral floats lose their '.0' (AMC stores 142.0)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def format_choices(question: str, choices: Sequence[str]) -> str:
    """The question with its options listed as (A) ..., (B) ... on their own lines."""
    lines = [f"({LETTERS[k]}) {str(c).strip()}" for k, c in enumerate(choices)]
    return question.rstrip() + "\n\n" + "\n".join(lines)


def _choice_letter(answer: Any, choices: Sequence[str], i: int, source: str) -> str:
    """The gold letter from a letter, '(B)', an index or the option's text."""
    text = str(answer).strip()
    bare = text.strip("()").upper()
    if len(bare) == 1 and bare in LETTERS[: len(choices)]:
        return bare
    if isinstance(answer, int) and 0 <= answer < len(choices):
        return LETTERS[answer]
    for k, choice in enumerate(choices):
        if str(choice).strip() == text:
            return LETTERS[k]
    raise TraacError(
        f"{source}: row {i}: answer {text[:60]!r} is neither a letter nor one of the choices"
    )


def _metadata(row: Row) -> Any:
    meta = row.get("metadata")
    if isinstance(meta, str):
        try:
            return json.loads(meta)
        except json.JSONDecodeError:
            return None
    return meta


def _difficulty(row: Row) -> str | None:
    value = row.get("difficulty")
    if value is None:
        return None
    text = str(value).strip().lower()
    return {"middle": "medium"}.get(text, text) or None


def adapt_generic(rows: Sequence[Row], source: str = "dataset") -> list[Item]:
    """question/problem/input + answer/target/solution, optional choices/options, id, verifier.

    Verifier: `choice` when the row lists choices (the answer becomes their letter), the
    row's own `verifier` field when given, else `math`.
    """
    items = []
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise TraacError(f"{source}: row {i} is not an object")
        qkey = next((k for k in ("question", "problem", "prompt", "input") if k in row), None)
        akey = next((k for k in ("answer", "target", "solution", "gold") if k in row), None)
        if qkey is None:
            raise TraacError(
                f"{source}: row {i} has no question field (question/problem/prompt/input)"
            )
        if akey is None:
            raise TraacError(f"{source}: row {i} has no answer field (answer/target/solution)")
        question = _field(row, qkey, i, source)
        raw_answer = row.get(akey)
        if raw_answer is None or not str(raw_answer).strip():
            raise TraacError(f"{source}: row {i} has no {akey!r} field (or it is empty)")
        choices = row.get("choices", row.get("options"))
        verifier = row.get("verifier")
        if choices is not None:
            if not isinstance(choices, list) or not choices:
                raise TraacError(f"{source}: row {i}: field 'choices' is not a non-empty list")
            question = format_choices(question, choices)
            answer, verifier = _choice_letter(raw_answer, choices, i, source), "choice"
        else:
            answer, verifier = _answer_text(raw_answer), verifier or "math"
        if verifier not in ("math", "choice", "text"):
            raise TraacError(
                f"{source}: row {i}: verifier {verifier!r} is not math, choice or text"
            )
        items.append(
            Item(
                id=str(row.get("id", f"{source}-{i}")),
                question=question,
                answer=answer,
                verifier=verifier,
                data_source=str(row.get("data_source", source)),
                difficulty=_difficulty(row),
            )
        )
    _check_unique(items, source)
    return items


def adapt_reasoning_gym(rows: Sequence[Row], source: str = OTB_UNDERTHINK) -> list[Item]:
    """Saved reasoning-gym entries (the UnderthinkingBench file): question, answer, metadata
    with `source_dataset` naming the task whose verifier scores them."""
    items = []
    for i, row in enumerate(rows):
        question = _field(row, "question", i, source)
        meta = _metadata(row)
        if not isinstance(meta, Mapping) or "source_dataset" not in meta:
            raise TraacError(f"{source}: row {i} has no 'metadata.source_dataset' field")
        task = meta["source_dataset"]
        if task not in DATASETS:
            raise TraacError(
                f"{source}: row {i}: metadata.source_dataset {task!r} is no reasoning-gym task"
            )
        entry = {"question": question, "answer": row.get("answer"), "metadata": dict(meta)}
        index = meta.get("source_index", i)
        items.append(
            Item(
                id=str(row.get("uuid") or row.get("id") or f"{source}-{task}-{index}"),
                question=question,
                answer="" if row.get("answer") is None else str(row["answer"]),
                verifier="task",
                data_source=source,
                entry=entry,
            )
        )
    _check_unique(items, source)
    return items


def adapt_bbeh(rows: Sequence[Row], source: str = "bbeh") -> list[Item]:
    """BIG-Bench Extra Hard rows, input + target (+ task): numeric targets are checked with
    math-verify (418.0 equals 418), the rest by normalised text match."""
    items = []
    for i, row in enumerate(rows):
        task = (
            str(row.get("task") or "").strip().replace(" ", "_") if isinstance(row, Mapping) else ""
        )
        item_id = f"{source}-{task}-{i}" if task else f"{source}-{i}"
        items.append(_input_target_item(row, i, source, item_id, data_source=source))
    return items


def adapt_bbh(rows: Sequence[Row], source: str = "bbh") -> list[Item]:
    """BIG-Bench Hard rows (input, target, task): as BBEH, with one data source per task so
    the report can rank tasks by difficulty."""
    items = []
    for i, row in enumerate(rows):
        task = str(row.get("task") or "").strip() if isinstance(row, Mapping) else ""
        item_id = f"{source}-{task}-{i}" if task else f"{source}-{i}"
        data_source = f"{source}/{task}" if task else source
        items.append(_input_target_item(row, i, source, item_id, data_source=data_source))
    return items


def _input_target_item(row: Row, i: int, source: str, item_id: str, data_source: str) -> Item:
    question = _field(row, "input", i, source)
    target = _answer_text(_field(row, "target", i, source, (str, int, float)))
    verifier = "math" if _NUMBER.match(target) else "text"
    return Item(
        id=item_id, question=question, answer=target, verifier=verifier, data_source=data_source
    )


def adapt_aime(rows: Sequence[Row], source: str = "aime") -> list[Item]:
    """AIME/AMC-style rows (AI-MO/aimo-validation-*): problem + answer (+ id)."""
    items = []
    for i, row in enumerate(rows):
        question = _field(row, "problem", i, source)
        answer = _answer_text(_field(row, "answer", i, source, (str, int, float)))
        items.append(
            Item(
                id=f"{source}-{row.get('id', i)}",
                question=question,
                answer=answer,
                data_source=source,
            )
        )
    _check_unique(items, source)
    return items


def adapt_amc(rows: Sequence[Row], source: str = "amc") -> list[Item]:
    return adapt_aime(rows, source=source)


def adapt_gpqa(rows: Sequence[Row], source: str = "gpqa-diamond", seed: int = 0) -> list[Item]:
    """GPQA rows (Question, Correct Answer, Incorrect Answer 1-3): the four options are shuffled
    with a per-item seed (stable whatever the row order) and the answer is the letter."""
    items = []
    for i, row in enumerate(rows):
        question = _field(row, "Question", i, source)
        correct = _field(row, "Correct Answer", i, source).strip()
        wrong = [_field(row, f"Incorrect Answer {k}", i, source).strip() for k in (1, 2, 3)]
        item_id = str(row.get("Record ID") or f"{source}-{i}")
        options = [correct, *wrong]
        random.Random(f"{seed}:{item_id}").shuffle(options)
        items.append(
            Item(
                id=item_id,
                question=format_choices(question.strip(), options),
                answer=LETTERS[options.index(correct)],
                verifier="choice",
                data_source=source,
            )
        )
    _check_unique(items, source)
    return items


def adapt_supergpqa(
    rows: Sequence[Row], source: str = "supergpqa", per_difficulty: int | None = None, seed: int = 0
) -> list[Item]:
    """SuperGPQA rows (question, options, answer_letter, difficulty easy/middle/hard). With
    `per_difficulty`, a seeded sample of that many per tier (the paper: 540 each)."""
    items = []
    for i, row in enumerate(rows):
        question = _field(row, "question", i, source)
        options = _field(row, "options", i, source, list)
        letter = row.get("answer_letter") or _field(row, "answer", i, source)
        items.append(
            Item(
                id=str(row.get("uuid") or f"{source}-{i}"),
                question=format_choices(question, options),
                answer=_choice_letter(letter, options, i, source),
                verifier="choice",
                data_source=source,
                difficulty=_difficulty(row),
            )
        )
    _check_unique(items, source)
    if per_difficulty is None:
        return items
    rng = random.Random(seed)
    picked: list[Item] = []
    for tier in ("easy", "medium", "hard"):
        pool = [it for it in items if it.difficulty == tier]
        picked += rng.sample(pool, min(per_difficulty, len(pool)))
    return picked


_DAPO_PROMPT = re.compile(
    r"^Solve the following math problem step by step\..*?\n\n(?P<problem>.*)\n\n"
    r"Remember to put your answer on its own line after \"Answer:\"\.?\s*$",
    re.DOTALL,
)


def adapt_dapo(rows: Sequence[Row], source: str = "dapo-math-17k") -> list[Item]:
    """DAPO-Math-17k: the original layout (prompt as chat messages wrapping the problem in an
    'Answer:' instruction, reward_model.ground_truth) or the processed one (prompt text,
    solution). The instruction is stripped so the problem takes our prompt style; duplicate
    problems (the original repeats each ~100 times) are kept once."""
    items, seen = [], set()
    for i, row in enumerate(rows):
        prompt = row.get("prompt") if isinstance(row, Mapping) else None
        if isinstance(prompt, list):
            if not prompt or not isinstance(prompt[-1], Mapping) or "content" not in prompt[-1]:
                raise TraacError(f"{source}: row {i}: field 'prompt' has no message content")
            text = str(prompt[-1]["content"])
            match = _DAPO_PROMPT.match(text)
            question = match.group("problem").strip() if match else text.strip()
            reward = row.get("reward_model")
            if not isinstance(reward, Mapping) or reward.get("ground_truth") in (None, ""):
                raise TraacError(f"{source}: row {i} has no 'reward_model.ground_truth' field")
            answer = _answer_text(reward["ground_truth"])
            index = (row.get("extra_info") or {}).get("index", i)
        else:
            question = _field(row, "prompt", i, source).strip()
            answer = _answer_text(_field(row, "solution", i, source, (str, int, float)))
            index = (row.get("extra_info") or {}).get("index", i)
        if question in seen:
            continue
        seen.add(question)
        items.append(
            Item(id=f"{source}-{index}", question=question, answer=answer, data_source=source)
        )
    _check_unique(items, source)
    return items


def adapt_otb_hub(rows: Sequence[Row], source: str = OTB_OVERTHINK) -> list[Item]:
    """OverthinkingBench rows of facebook/optimal_thinking_bench (question, answer, subset,
    metadata JSON). As in the paper, only automatically verifiable items are kept: numeric
    answers (math-verify) and 4-option multiple choice (letter); short-phrase and open-ended
    items need an LLM judge and are left out by design."""
    items = []
    for i, row in enumerate(rows):
        subset = str(row.get("subset", "")) if isinstance(row, Mapping) else ""
        if "overthink" not in subset:
            continue
        question = _field(row, "question", i, source)
        answer = row.get("answer")
        if answer is None or not str(answer).strip():
            raise TraacError(f"{source}: row {i} has no 'answer' field (or it is empty)")
        meta = _metadata(row)
        if not isinstance(meta, Mapping):
            raise TraacError(f"{source}: row {i}: field 'metadata' is not a JSON object")
        mode = str(meta.get("mode", meta.get("answer_type", ""))).lower()
        options = meta.get("options")
        if mode == "mcq" and isinstance(options, list) and len(options) == 4:
            item_question = question if "(A)" in question else format_choices(question, options)
            gold, verifier = _choice_letter(answer, options, i, source), "choice"
        elif mode == "numeric" or (mode != "mcq" and _NUMBER.match(_answer_text(answer))):
            item_question, gold, verifier = question, _answer_text(answer), "math"
        else:
            continue
        items.append(
            Item(
                id=str(meta.get("id", f"{source}-{i}")),
                question=item_question,
                answer=gold,
                verifier=verifier,
                data_source=source,
            )
        )
    _check_unique(items, source)
    return items


def _check_unique(items: list[Item], source: str) -> None:
    seen: set[str] = set()
    for item in items:
        if item.id in seen:
            raise TraacError(f"{source}: id {item.id!r} appears twice; ids must be unique")
        seen.add(item.id)


# Detected file layouts, most specific first (keys the first record must have).
_LAYOUTS: list[tuple[Adapter, tuple[str, ...]]] = [
    (adapt_otb_hub, ("subset", "metadata", "question")),
    (adapt_reasoning_gym, ("question", "metadata.source_dataset")),
    (adapt_gpqa, ("Question", "Correct Answer")),
    (adapt_supergpqa, ("question", "options", "answer_letter")),
    (adapt_dapo, ("prompt:messages", "reward_model")),
    (adapt_bbeh, ("input", "target")),
]


# --------------------------------------------------------------------------------------------
# The hub.


@dataclass(frozen=True)
class HubSource:
    """Where a benchmark lives on the hub and how its rows become items.

    `options`: the adapter's keyword arguments with their defaults; a spec may override them
    (``supergpqa?per_difficulty=100``), and may pick another ``split``.
    """

    repo: str
    adapter: Adapter
    split: str | None = None  # None: 'test' if the repo has it, else its first split
    configs: tuple[str | None, ...] = (None,)
    row_filter: Callable[[Row], bool] | None = None
    options: dict[str, Any] = field(default_factory=dict)


def _bbeh_mini(row: Row) -> bool:
    return bool(row.get("mini"))


HUB_DATASETS: dict[str, HubSource] = {
    "aime": HubSource("AI-MO/aimo-validation-aime", adapt_aime, "train"),
    "amc": HubSource("AI-MO/aimo-validation-amc", adapt_amc, "train"),
    "gpqa-diamond": HubSource(
        "Idavidrein/gpqa", adapt_gpqa, "train", ("gpqa_diamond",), options={"seed": 0}
    ),
    "bbeh": HubSource("BBEH/bbeh", adapt_bbeh, "train", row_filter=_bbeh_mini),
    "bbeh-full": HubSource("BBEH/bbeh", adapt_bbeh, "train"),
    OTB_OVERTHINK: HubSource("facebook/optimal_thinking_bench", adapt_otb_hub, "train"),
    "bbh": HubSource("lukaemon/bbh", adapt_bbh, "test", BBH_TASKS),
    "supergpqa": HubSource(
        "m-a-p/SuperGPQA", adapt_supergpqa, "train", options={"per_difficulty": 540, "seed": 0}
    ),
    "dapo-math-17k": HubSource("BytedTsinghua-SIA/DAPO-Math-17k", adapt_dapo, "train"),
}
# Hub ids lead to the same adapters (BBEH/bbeh: the mini split, as in the paper).
_NAME_BY_REPO = {src.repo: name for name, src in reversed(HUB_DATASETS.items())}


def _load_hub(spec: str, source: HubSource, params: dict[str, str], name: str) -> list[Item]:
    """Rows from the hub (or its local cache) through the source's adapter."""
    typed = _params(spec, params)
    split = typed.pop("split", source.split)
    unknown = set(typed) - set(source.options)
    if unknown:
        allowed = ", ".join(["split", *source.options])
        raise TraacError(f"dataset {spec!r}: unknown option(s) {sorted(unknown)}; use {allowed}")
    rows: list[dict[str, Any]] = []
    for config in source.configs:
        for row in _hub_rows(spec, source.repo, config, split):
            if source.row_filter is None or source.row_filter(row):
                rows.append({**row, "task": config} if config and len(source.configs) > 1 else row)
    if not rows:
        raise TraacError(f"dataset {spec!r}: the hub split has no rows")
    return source.adapter(rows, source=name, **{**source.options, **typed})


class HubUnavailable(TraacError):
    """A hub dataset that is neither reachable nor in the hub cache (a dry run defers it)."""


def _hub_rows(spec: str, repo: str, config: str | None, split: str | None) -> list[dict[str, Any]]:
    """One split of a hub dataset as rows. With HF_HUB_OFFLINE=1 (the hub's own switch) the
    cache only; an unreachable hub is said at once rather than after datasets' retries."""
    where = f"{repo}" + (f" ({config})" if config else "")
    if not constants.HF_HUB_OFFLINE and not hub_reachable():
        raise HubUnavailable(
            f"dataset {spec!r}: the hub is unreachable for {where}; set HF_HUB_OFFLINE=1 to "
            "read it from the hub cache (HF_HOME), or pass a local file in its layout"
        )
    try:
        loaded = datasets.load_dataset(repo, config, split=split)
        if isinstance(loaded, datasets.DatasetDict):
            key = "test" if "test" in loaded else next(iter(loaded))
            loaded = loaded[key]
        return list(loaded)
    except (ConnectionError, OSError, FileNotFoundError, ValueError) as err:
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise HubUnavailable(
            f"dataset {spec!r} needs the network or the hub cache: {where}: {reason}; "
            "run once with network access (or set HF_HOME to a cache that has it), "
            "or pass a local file in its layout"
        ) from err


def hub_reachable(timeout: float = 3.0) -> bool:
    """Can we open a connection to the hub? (Saves datasets' minute of retries when offline.)"""
    if constants.HF_HUB_OFFLINE:
        return False
    host = urlparse(constants.ENDPOINT).hostname or "huggingface.co"
    try:
        with socket.create_connection((host, 443), timeout=timeout):
            return True
    except OSError:
        return False
