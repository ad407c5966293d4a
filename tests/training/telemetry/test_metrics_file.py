"""`metrics.jsonl`: the one reader of its lines (torn, foreign and step-less lines skipped) and
the cut back to a step that a resumed run makes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from traac.training.telemetry.metrics_file import METRICS_FILE, metric_rows, truncate_metrics


def test_rows_are_the_whole_records_with_a_step(tmp_path: Path) -> None:
    path = tmp_path / METRICS_FILE
    assert list(metric_rows(path)) == []  # no file yet
    good = [{"step": 1, "a": 0.5}, {"step": 2, "split": "eval", "acc": 0.7}, {"step": 2.0}]
    foreign = ["[1, 2]", '"text"', '{"no_step": 1}', '{"step": "3"}', '{"step": true}', ""]
    lines = [json.dumps(good[0]), *foreign[:3], json.dumps(good[1]), *foreign[3:]]
    path.write_text("\n".join([*lines, json.dumps(good[2])]) + '\n{"step": 4, "a": 0.')
    assert list(metric_rows(path)) == good  # the torn last line, and every foreign one, skipped
    assert list(metric_rows(str(path))) == good


def test_truncation_keeps_the_steps_up_to_the_start_and_drops_the_rest(tmp_path: Path) -> None:
    path = tmp_path / METRICS_FILE
    truncate_metrics(path, 3)  # no file yet: nothing to do
    assert not path.exists()
    lines = [json.dumps({"step": s}) for s in (1, 2, 3)]
    path.write_text("\n".join(lines) + "\n")
    before = path.stat().st_mtime_ns
    truncate_metrics(path, 3)  # nothing after step 3: the file is not rewritten
    assert path.stat().st_mtime_ns == before
    path.write_text("\n".join([*lines, "[3]"]) + '\n{"step": 4')  # the crash cut the last line
    truncate_metrics(path, 2)
    assert path.read_text() == "\n".join(lines[:2]) + "\n"
    truncate_metrics(path, 0)  # a fresh run into the same output_dir starts a new file
    assert path.read_text() == ""


def test_a_run_whose_last_line_is_torn_is_read_and_other_junk_is_refused(tmp_path: Path) -> None:
    """Only a crash's torn last line is tolerated; a file that is not JSON lines is no
    metrics.jsonl, refused in one line naming its first bad line (issue 60, kind 5)."""
    from traac.errors import TraacError
    from traac.training.telemetry.metrics_file import check_metrics_file

    path = tmp_path / METRICS_FILE
    path.write_text('{"step": 1, "loss": 0.5}\n{"step": 2, "lo')
    check_metrics_file(tmp_path)
    path.write_text('{"step": 1}\n\nnot json\n{"step": 3}\n')
    with pytest.raises(TraacError, match=f"{path} line 3: not JSON, so not the metrics.jsonl"):
        check_metrics_file(tmp_path)
    path.write_text('{"loss": 1}\n')
    with pytest.raises(TraacError, match="holds no training step yet"):
        check_metrics_file(tmp_path)
    path.unlink()
    with pytest.raises(TraacError, match=f"no {METRICS_FILE} in {tmp_path}"):
        check_metrics_file(tmp_path)
