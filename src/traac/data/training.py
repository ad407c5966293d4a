"""Training data: problems (`Item`s) as the `datasets.Dataset` TRL's GRPOTrainer reads.

One row per problem: the `prompt` TRL samples from, plus the columns the rewards and the TRAAC
step need to verify a response (`answer`, `verifier`, `entry`, `data_source`, `id`). The
reasoning-gym `entry` is stored as JSON text because entries of different tasks have different
shapes, which an Arrow column cannot hold. `training_rows` accepts the layout TRL's and
open-r1's datasets already have (`prompt` with `answer` or `solution`) and fills in the rest,
and reads any layout `traac train --dataset` reads from a file (`problem` and `solution`,
`question` and `answer`, ...: `traac.data.files`) as that command does.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlencode

from datasets import Dataset

from traac.common.items import Item, VerifierKind
from traac.data.datasets import load_items
from traac.data.files import adapt_detected
from traac.data.specs import split_spec
from traac.data.testbed_long import is_long_spec, parse_long_spec
from traac.data.testbed_problems import parse_spec
from traac.errors import TraacError

COLUMNS = ("prompt", "id", "answer", "verifier", "data_source", "difficulty", "entry")
ANSWER_COLUMNS = ("answer", "solution")  # traac's and open-r1's name of the gold answer
PROMPT_COLUMNS = ("prompt", "question", "problem", "input")  # TRL's, then the file layouts'
VERIFIER_NAMES: tuple[str, ...] = typing.get_args(VerifierKind)
ACCEPTED = (
    "prompt (text or chat messages) and answer or solution, or question, problem or input with "
    f"answer, target, solution or gold; optional: id (default: the row's index), verifier "
    f"({', '.join(VERIFIER_NAMES)}; default math), data_source"
)
# A recipe's open-r1 dataset fields, and the dataset spec option each becomes.
OPEN_R1_FIELDS = {
    "dataset_train_split": "split",
    "dataset_config": "config",
    "dataset_prompt_column": "prompt_column",
}


def items_to_dataset(
    items: Sequence[Item],
    *,
    prompt_suffix: str = "",
    conversational: bool = True,
    system_prompt: str = "",
) -> Any:
    """A `datasets.Dataset` of `items`; prompts are chat messages unless `conversational=False`.

    `prompt_suffix` is appended to every question (the paper's "Let's think step by step ...");
    `system_prompt` (open-r1's) opens every conversation.
    """
    if not items:
        raise TraacError("training data: no problems to train on")
    if system_prompt and not conversational:
        raise TraacError("system_prompt: the model's tokenizer has no chat template, so prompts "
                         "are plain text; unset system_prompt or use a chat model")  # fmt: skip
    system = [{"role": "system", "content": system_prompt}] if system_prompt else []

    def prompt(item: Item) -> Any:
        text = f"{item.question}{prompt_suffix}"
        return [*system, {"role": "user", "content": text}] if conversational else text

    rows = {
        "prompt": [prompt(i) for i in items],
        "id": [i.id for i in items],
        "answer": [i.answer for i in items],
        "verifier": [i.verifier for i in items],
        "data_source": [i.data_source for i in items],
        "difficulty": [i.tier or "" for i in items],
        "entry": [json.dumps(i.entry) if i.entry else "" for i in items],
    }
    return Dataset.from_dict(rows)


def training_rows(
    dataset: Any, name: str = "train_dataset", conversational: Callable[[], bool] = lambda: True
) -> Any:
    """`dataset` with the columns the trainer reads: `answer` copied from `solution` where only
    that is given (open-r1's name; the column itself stays for reward functions that read it),
    `id` the row's index and `verifier` `math` where absent. Rows without a `prompt` are read
    as `traac train --dataset` reads a file of them (`traac.data.files`), their prompt chat
    messages if `conversational()` (the model has a chat template); their own columns stay. A
    `datasets.Dataset` (or a dict of them, as `eval_dataset` may be); anything else is left to
    TRL. A layout without a prompt or an answer fails here in one line naming the columns
    accepted."""
    if isinstance(dataset, dict):
        return {
            key: training_rows(part, f"{name}[{key!r}]", conversational)
            for key, part in dataset.items()
        }
    if not isinstance(dataset, Dataset):
        return dataset
    columns = list(dataset.column_names)
    answer = next((c for c in ANSWER_COLUMNS if c in columns), None)
    if "prompt" not in columns and len(dataset) and _readable(columns):
        return training_rows(_as_prompts(dataset, name, conversational()), name)
    if "prompt" not in columns or answer is None:
        raise TraacError(f"{name}: columns {', '.join(columns) or '(none)'}; traac trains on "
                         f"{ACCEPTED}")  # fmt: skip
    if answer != "answer":
        dataset = dataset.add_column("answer", [str(a) for a in dataset[answer]])
    if "id" not in columns:
        dataset = dataset.add_column("id", [str(i) for i in range(len(dataset))])
    if "verifier" not in columns:
        dataset = dataset.add_column("verifier", ["math"] * len(dataset))
    unknown = sorted(set(dataset.unique("verifier")) - set(VERIFIER_NAMES))
    if unknown:
        raise TraacError(f"{name}: verifier {unknown[0]!r} is not one of "
                         f"{', '.join(VERIFIER_NAMES)}")  # fmt: skip
    return dataset


def check_rows(dataset: Any, name: str = "train_dataset") -> None:
    """What `traac train --dataset` refuses in a file, refused in a `datasets.Dataset` before
    any model loads: no rows at all (a filter that kept none), or a row whose question or gold
    answer is missing or empty (trained on, it earns loss 0 and teaches nothing)."""
    if not isinstance(dataset, Dataset):
        return
    if len(dataset) == 0:
        raise TraacError(f"{name}: no rows (did a filter keep none?); pass at least one problem")
    columns = dataset.column_names
    for names in (PROMPT_COLUMNS, (*ANSWER_COLUMNS, "target", "gold")):
        column = next((c for c in names if c in columns), None)
        if column is None:
            continue  # a layout without one: `training_rows` names the columns it takes
        for i, value in enumerate(dataset[column]):
            if value is None or not (value.strip() if isinstance(value, str) else value != []):
                raise TraacError(f"{name}: row {i} has no {column!r} field (or it is empty)")


def _readable(columns: Sequence[str]) -> bool:
    """Whether the file layouts' generic reader finds a question and an answer among `columns`
    (the named layouts have these too)."""
    return any(c in columns for c in ("question", "problem", "input", "Question")) and any(
        c in columns for c in ("answer", "target", "solution", "gold", "Correct Answer")
    )


def _as_prompts(dataset: Any, name: str, conversational: bool) -> Any:
    """Rows of a file layout as prompt rows, read by the same adapters as `--dataset`; the
    original columns are kept beside them for reward functions (TRL passes every column)."""
    items = adapt_detected(dataset.to_list(), source=name)
    rows = items_to_dataset(items, conversational=conversational)
    if len(rows) != len(dataset):
        return rows
    for column in dataset.column_names:
        if column not in rows.column_names:
            rows = rows.add_column(column, dataset[column])
    return rows


def with_dataset_fields(spec: str, fields: Mapping[str, str | None]) -> str:
    """A dataset spec with a recipe's open-r1 dataset fields (`OPEN_R1_FIELDS`: the train split,
    the hub config, the prompt column) as its options; set in both places is one line."""
    options = {OPEN_R1_FIELDS[k]: v for k, v in fields.items() if v}
    if not options:
        return spec
    name, params = split_spec(spec)
    for field_name, option in OPEN_R1_FIELDS.items():
        if option in options and option in params:
            raise TraacError(f"{field_name}: the dataset spec {spec!r} already sets ?{option}; "
                             "set it in one place")  # fmt: skip
    return f"{name}?{urlencode({**params, **options})}"


def item_from_row(row: Mapping[str, Any]) -> Item:
    """The `Item` a dataset row (or a reward function's per-sample kwargs) describes."""
    missing = [c for c in ("id", "answer", "verifier") if c not in row]
    if missing:
        raise TraacError(f"training data: a row lacks the column(s) {', '.join(missing)}")
    entry = row.get("entry") or None
    if isinstance(entry, str):
        entry = json.loads(entry)
    return Item(
        id=str(row["id"]),
        question="",
        answer=str(row["answer"]),
        verifier=row["verifier"],
        data_source=row.get("data_source") or "default",
        tier=row.get("difficulty") or None,
        entry=entry,
    )


def load_training_items(spec: str) -> list[Item]:
    """Training problems named by `spec`: `testbed[:TIER][?n=N&seed=S]` or `testbed-long[...]`
    (RL pool by default), or any name the evaluation loader knows."""
    if spec.split(":")[0].split("?")[0] == "testbed":
        return parse_spec(spec, split="rl")
    if is_long_spec(spec):
        return parse_long_spec(spec, split="rl")
    return load_items(spec)
