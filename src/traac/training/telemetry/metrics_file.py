"""A run's `metrics.jsonl`: one JSON object a line, each with its `step`; the training steps'
lines (`traac.training.telemetry.step_stats`) and the held-out evaluations' (marked
`"split": "eval"`).

The one reader of its lines, for every report that reads the file back, and the one way to cut
it back to a step: a crash can leave the last line torn, and a resumed run must not count the
steps it redoes twice.
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from traac.errors import TraacError, first_line

METRICS_FILE = "metrics.jsonl"  # in a run's output_dir
EVAL_SPLIT = "eval"  # the `split` of a held-out evaluation's line


def metric_rows(path: str | Path) -> Iterator[dict[str, Any]]:
    """Each whole line of the file in order, as a dict (none if the file is missing); a line a
    crash cut short, or one that is not an object with a numeric `step`, is skipped. A `.gz`
    file (a kept run's, `traac.pipelines.records`) is read decompressed."""
    path = Path(path)
    if not path.is_file():
        return
    text = _gunzipped(path) if path.suffix == ".gz" else path.read_text()
    for line in text.splitlines():
        row = _row(line)
        if row is not None:
            yield row


def _gunzipped(path: Path) -> str:
    """A `.gz` file's text; one cut short (a killed copy) or damaged is named in one line."""
    try:
        return gzip.decompress(path.read_bytes()).decode()
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as err:
        raise TraacError(f"{path}: cut short or damaged ({first_line(err)}); copy it again "
                         "from the run") from None  # fmt: skip


def check_metrics_file(run_dir: Path) -> None:
    """A run directory whose metrics.jsonl a report can read: there, JSON lines, at least one of
    them a step's. Only the last line may be torn (a crash cut it short); any other line that is
    not JSON makes it no metrics.jsonl of `traac train`, which the reader (skipping such lines)
    would otherwise show as an empty table. JSON lines without a step are skipped, as ever."""
    path = Path(run_dir) / METRICS_FILE
    if not path.is_file():
        raise TraacError(f"no {METRICS_FILE} in {run_dir}: pass a `traac train` output directory")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise TraacError(f"{path}: cannot read it as text ({err})") from None
    numbered = [(n, line) for n, line in enumerate(lines, start=1) if line.strip()]
    for n, line in numbered[:-1]:
        try:
            json.loads(line)
        except json.JSONDecodeError:
            raise TraacError(f"{path} line {n}: not JSON, so not the metrics.jsonl of a `traac "
                             "train` run; pass a run's output directory") from None  # fmt: skip
    if not any(_row(line) is not None for _, line in numbered):
        raise TraacError(f"{path}: holds no training step yet; pass a run that has trained "
                         "at least one step")  # fmt: skip


def truncate_metrics(path: Path, last_step: int) -> None:
    """Drop the lines whose step is after `last_step` (atomic replace); a line a crash cut short
    is dropped too."""
    if not path.exists():
        return
    lines = path.read_text().splitlines()
    kept = [line for line in lines if (row := _row(line)) is not None and row["step"] <= last_step]
    if len(kept) == len(lines):
        return
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(f"{line}\n" for line in kept))
    os.replace(tmp, path)


def _row(line: str) -> dict[str, Any] | None:
    try:
        row = json.loads(line)
    except json.JSONDecodeError:
        return None
    step = row.get("step") if isinstance(row, dict) else None
    ok = isinstance(step, int | float) and not isinstance(step, bool)
    return row if ok else None
