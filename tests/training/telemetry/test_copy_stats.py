"""The copies' records read back from `metrics.jsonl`, their aggregate by kind, H1's verdict and
the table `traac copies` prints."""

from __future__ import annotations

from pathlib import Path

from traac.training.telemetry.copy_stats import (
    KINDS,
    PooledRecord,
    advantage_ranks,
    by_kind,
    copies_table,
    h1_verdict,
    pass_rate_table,
    read_records,
)
from traac.training.telemetry.step_stats import (
    METRICS_FILE,
    ScopeStats,
    StepStats,
    append_metrics,
    read_metrics,
)


def record(copy: bool, compute: int | None, correct: bool, advantage: float, rank: int):
    return PooledRecord(0, "easy", copy, 2 if copy else 0, compute, correct, advantage, rank)


def test_ranks_count_the_strictly_higher() -> None:
    assert advantage_ranks([0.5, 1.5, 0.5, -1.0]) == [2, 1, 2, 4]


def write_run(directory: Path, steps: list[list[PooledRecord]]) -> Path:
    for k, records in enumerate(steps, 1):
        append_metrics(directory, StepStats(k, {}, copy_groups=records))
    return directory


def test_records_round_trip_through_metrics_jsonl(tmp_path: Path) -> None:
    steps = [[record(True, 1, True, 1.2, 1), record(False, 0, True, -0.4, 2)], []]
    write_run(tmp_path, steps)
    assert read_records(tmp_path / METRICS_FILE) == ([(1, r) for r in steps[0]], 2)
    assert [s.copy_groups for s in read_metrics(tmp_path / METRICS_FILE)] == steps


def test_h1_verdict_needs_both_the_accuracy_and_the_advantage() -> None:
    right_top = [record(True, 1, True, 1.5, 1)] * 4 + [record(True, 2, False, -1.0, 4)]
    stats = by_kind(right_top)[KINDS[0]]
    assert (stats.count, stats.correct, stats.advantage) == (5, 0.8, 1.0)
    assert h1_verdict(stats).startswith("H1 does not hold")  # +1.00 is not above +1
    stats = by_kind([*right_top, record(True, 1, True, 2.0, 1)])[KINDS[0]]
    assert h1_verdict(stats).startswith("H1 holds: compute-evicted copies right 83.3%")
    assert h1_verdict(by_kind([record(True, 0, True, 1.5, 1)])[KINDS[0]]).endswith("untested")


def test_the_table_per_run_kind_and_span(tmp_path: Path) -> None:
    first = [record(True, 1, True, 1.5, 1), record(False, 0, False, -1.5, 2)]
    second = [record(True, 0, True, 0.5, 1), record(False, 0, True, -0.5, 2)]
    a = write_run(tmp_path / "a", [first, second])
    (tmp_path / "empty").mkdir()
    table, verdicts = copies_table({"a": a, "b": tmp_path / "empty"})
    assert [row[:4] for row in table.rows] == [
        ("a", "1-2", KINDS[0], "1"), ("a", "1-2", KINDS[1], "1"), ("a", "1-2", KINDS[2], "2"),
    ]  # fmt: skip
    assert table.rows[0][4:] == ("100.0%", "+1.50", "1.00", "100.0%")
    assert table.rows[2][4:] == ("50.0%", "-1.00", "2.00", "0.0%")
    assert verdicts[0].startswith("a: H1 holds") and verdicts[1].startswith("b: no step")
    by_step, _ = copies_table({"a": a}, every=1)
    assert [row[1] for row in by_step.rows] == ["1-1"] * 3 + ["2-2"] * 3
    assert by_step.rows[1][3:5] == ("0", "–")  # no other copy in step 1


def scope(pass_rate: float) -> ScopeStats:
    return ScopeStats(4, 32, pass_rate, *[None] * 9, 0, 0, None, None, None, None)


def test_the_originals_pass_rate_per_span(tmp_path: Path) -> None:
    for k, rate in enumerate([0.75, 0.25, 0.5], 1):
        append_metrics(tmp_path / "a", StepStats(k, {"all": scope(rate)}))
    with (tmp_path / "a" / METRICS_FILE).open("a") as f:
        f.write('{"step": 4, "traac/all/pa')  # a crash cut the last line short
    rows = pass_rate_table({"a": tmp_path / "a"}, every=2).rows
    assert rows == [("a", "1-2", "50.0%"), ("a", "3-3", "50.0%")]
    assert pass_rate_table({"a": tmp_path / "a"}).rows == [("a", "1-3", "50.0%")]
