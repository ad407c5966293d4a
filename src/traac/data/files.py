"""Local files: JSON, JSONL and parquet records, their layout detected from the first record."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from traac.common.items import Item
from traac.data.adapters import (
    Adapter,
    Row,
    adapt_bbeh,
    adapt_dapo,
    adapt_generic,
    adapt_gpqa,
    adapt_gsm8k,
    adapt_math500,
    adapt_otb_hub,
    adapt_reasoning_gym,
    adapt_supergpqa,
    row_metadata,
)
from traac.errors import TraacError

FILE_SUFFIXES = (".json", ".jsonl", ".parquet")

# Detected file layouts, most specific first (keys the first record must have).
_LAYOUTS: list[tuple[Adapter, tuple[str, ...]]] = [
    (adapt_otb_hub, ("subset", "metadata", "question")),
    (adapt_reasoning_gym, ("question", "metadata.source_dataset")),
    (adapt_gpqa, ("Question", "Correct Answer")),
    (adapt_supergpqa, ("question", "options", "answer_letter")),
    (adapt_dapo, ("prompt:messages", "reward_model")),
    (adapt_bbeh, ("input", "target")),
    (adapt_math500, ("problem", "answer", "unique_id")),
    (adapt_gsm8k, ("question", "answer:####")),
]


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


def load_file(path: Path, prompt_column: str | None = None) -> list[Item]:
    """Items of a local file, its layout detected from the records (or read as question and
    answer, the question from `prompt_column`, when that is given)."""
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
    return adapt_detected(data, source=source, prompt_column=prompt_column)


def adapt_detected(
    rows: Sequence[Row], source: str = "dataset", prompt_column: str | None = None
) -> list[Item]:
    """Rows of any known layout, judged from the first record; with `prompt_column` (open-r1's
    `dataset_prompt_column`), the generic question/answer layout with that column's text as the
    question."""
    if prompt_column is None:
        return detect_adapter(rows[0], where=source)(rows, source=source)
    if not isinstance(rows[0], Mapping) or prompt_column not in rows[0]:
        columns = ", ".join(rows[0]) if isinstance(rows[0], Mapping) else "none"
        raise TraacError(f"dataset_prompt_column: {source} has no column {prompt_column!r} "
                         f"(its columns: {columns})")  # fmt: skip
    questions = [{**row, "question": row.get(prompt_column)} for row in rows]
    return adapt_generic(questions, source=source)


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
        meta = row_metadata(row)
        return isinstance(meta, Mapping) and "source_dataset" in meta
    if key == "prompt:messages":
        return isinstance(row.get("prompt"), list)
    if key == "answer:####":  # GSM8K: a worked solution ending in '#### N'
        return "\n####" in str(row.get("answer", ""))
    return key in row
