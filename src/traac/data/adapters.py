"""Adapters: rows of one layout -> items, one plain function per layout, so the same code reads a
hub split and a file saved in its layout. `source` names the set (data_source, id prefix).

A row that lacks what its layout needs is a `TraacError` naming the row and the field; nothing
is skipped silently.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from traac.common.items import Item
from traac.common.reasoning_gym_extra import reasoning_gym_tasks
from traac.data.chain_sum import TASK as CHAIN_SUM
from traac.errors import TraacError

Row = Mapping[str, Any]
Adapter = Callable[..., list[Item]]

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")

OTB_UNDERTHINK = "otb-underthink"
OTB_OVERTHINK = "otb-overthink"
# The math rows the official prepare.py adds to each half (a source holding "math" is a math row)
OTB_OVERTHINK_MATH = "otb-overthink-math"
OTB_UNDERTHINK_MATH = "otb-underthink-math"


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


def row_metadata(row: Row) -> Any:
    meta = row.get("metadata")
    if isinstance(meta, str):
        try:
            return json.loads(meta)
        except json.JSONDecodeError:
            return None
    return meta


def _tier(row: Row) -> str | None:
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
                tier=_tier(row),
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
        meta = row_metadata(row)
        if not isinstance(meta, Mapping) or "source_dataset" not in meta:
            raise TraacError(f"{source}: row {i} has no 'metadata.source_dataset' field")
        task = meta["source_dataset"]
        if task != CHAIN_SUM and task not in reasoning_gym_tasks(
            f"{source}: row {i}: reasoning-gym task {task!r}"
        ):
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


def adapt_aime2025(rows: Sequence[Row], source: str = "aime2025") -> list[Item]:
    """opencompass/AIME2025 rows (question, answer), one config per exam (AIME2025-I and -II,
    the config kept as `task`): ids name the exam and the problem's place in it."""
    items: list[Item] = []
    counts: dict[str, int] = {}
    for i, row in enumerate(rows):
        question = _field(row, "question", i, source)
        answer = _answer_text(_field(row, "answer", i, source, (str, int, float)))
        exam = str(row.get("task") or "").removeprefix("AIME2025-")
        counts[exam] = counts.get(exam, 0) + 1
        item_id = "-".join([source, *([exam] if exam else []), str(counts[exam])])
        items.append(Item(id=item_id, question=question, answer=answer, data_source=source))
    _check_unique(items, source)
    return items


def adapt_math500(rows: Sequence[Row], source: str = "math-500") -> list[Item]:
    """HuggingFaceH4/MATH-500 rows (problem, solution, answer, subject, level, unique_id): the
    short `answer` is the gold (LaTeX, checked by math-verify), never the worked solution."""
    items = []
    for i, row in enumerate(rows):
        question = _field(row, "problem", i, source)
        answer = _answer_text(_field(row, "answer", i, source, (str, int, float)))
        items.append(
            Item(
                id=str(row.get("unique_id") or f"{source}-{i}"),
                question=question,
                answer=answer,
                data_source=source,
            )
        )
    _check_unique(items, source)
    return items


_GSM8K_FINAL = re.compile(r"####\s*(?P<answer>[^\n]+?)\s*$")


def adapt_gsm8k(rows: Sequence[Row], source: str = "gsm8k") -> list[Item]:
    """openai/gsm8k rows (question, answer): the answer is a worked solution whose last line is
    '#### N'; N, without thousands separators, is the gold."""
    items = []
    for i, row in enumerate(rows):
        question = _field(row, "question", i, source)
        solution = _field(row, "answer", i, source)
        match = _GSM8K_FINAL.search(solution)
        if match is None:
            raise TraacError(f"{source}: row {i}: field 'answer' has no final '#### N' line")
        answer = match.group("answer").replace(",", "")
        items.append(Item(id=f"{source}-{i}", question=question, answer=answer, data_source=source))
    _check_unique(items, source)
    return items


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
                tier=_tier(row),
            )
        )
    _check_unique(items, source)
    if per_difficulty is None:
        return items
    rng = random.Random(seed)
    picked: list[Item] = []
    for tier in ("easy", "medium", "hard"):
        pool = [it for it in items if it.tier == tier]
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
    """OptimalThinkingBench rows (question, answer, subset, metadata JSON): the hub's, or the
    official prepare.py's `otb_full` saved as a file. Each half keeps its benchmark name as its
    data source, whatever the file is called, so the OTB scores find it (`source` names rows in
    errors).

    - `*thinking-math` rows (MATH-500 levels 1-2, AIME 2025, HMMT): math items of
      `otb-overthink-math` / `otb-underthink-math`, ids from their metadata's source and id;
    - underthinking rows: reasoning-gym entries (`adapt_reasoning_gym`) of `otb-underthink`;
    - overthinking rows: as in the paper, only automatically verifiable items are kept: numeric
      answers (math-verify) and 4-option multiple choice (letter); short-phrase and open-ended
      items need an LLM judge and are left out by design."""
    items, under = [], []
    for i, row in enumerate(rows):
        subset = str(row.get("subset", "")) if isinstance(row, Mapping) else ""
        if "math" in subset and "thinking" in subset:
            items.append(_otb_math_item(row, i, subset))
            continue
        if "underthink" in subset:
            under.append(row)
            continue
        if "overthink" not in subset:
            continue
        question = _field(row, "question", i, source)
        answer = row.get("answer")
        if answer is None or not str(answer).strip():
            raise TraacError(f"{source}: row {i} has no 'answer' field (or it is empty)")
        meta = row_metadata(row)
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
                data_source=OTB_OVERTHINK,
            )
        )
    items += adapt_reasoning_gym(under, OTB_UNDERTHINK) if under else []
    _check_unique(items, source)
    return items


def _otb_math_item(row: Row, i: int, subset: str) -> Item:
    """One of prepare.py's math rows, checked with math-verify (its answers are LaTeX)."""
    source = OTB_OVERTHINK_MATH if "overthink" in subset else OTB_UNDERTHINK_MATH
    question = _field(row, "question", i, source)
    answer = _answer_text(_field(row, "answer", i, source, (str, int, float)))
    meta = row_metadata(row)
    meta = meta if isinstance(meta, Mapping) else {}
    tag = "-".join(str(meta[k]) for k in ("source", "id") if meta.get(k) is not None) or str(i)
    return Item(id=f"{source}-{tag}", question=question, answer=answer, data_source=source)


def _check_unique(items: list[Item], source: str) -> None:
    seen: set[str] = set()
    for item in items:
        if item.id in seen:
            raise TraacError(f"{source}: id {item.id!r} appears twice; ids must be unique")
        seen.add(item.id)
