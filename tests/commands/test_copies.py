"""`traac copies`: the H1 table of training runs' directories, and its one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from traac.cli import main as cli_main
from traac.training.telemetry.copy_stats import PooledRecord
from traac.training.telemetry.step_stats import StepStats, append_metrics


def test_copies_prints_each_kind_and_the_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # the table whole on one screen
    records = [PooledRecord(0, "easy", True, 1, 1, True, 1.5, 1),
               PooledRecord(0, "easy", False, 0, 0, True, -0.5, 2)]  # fmt: skip
    append_metrics(tmp_path / "run", StepStats(1, {}, copy_groups=records))
    assert cli_main(["copies", str(tmp_path / "run"), "--names", "TRAAC"]) == 0
    out = capsys.readouterr().out
    assert "compute-evicted copies" in out and "their groups' originals" in out
    assert "TRAAC: H1 holds: compute-evicted copies right 100.0%" in " ".join(out.split())
    assert "Originals' pass rate" in out  # its rows: tests/training/telemetry/test_copy_stats.py


def test_copies_refuses_what_is_not_a_run(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert cli_main(["copies", str(tmp_path)]) == 2
    assert "no metrics.jsonl in" in capsys.readouterr().err
    (tmp_path / "metrics.jsonl").write_text("")
    assert cli_main(["copies", str(tmp_path), "--names", "a", "b"]) == 2
    assert "--names: 2 names for 1 run directories" in capsys.readouterr().err
    assert cli_main(["copies", str(tmp_path), "--every", "0"]) == 2
