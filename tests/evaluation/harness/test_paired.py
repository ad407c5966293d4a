"""Paired comparisons on crafted records: the mean difference over shared problems by hand, its
interval, and the mark where the interval excludes 0."""

from __future__ import annotations

import pytest

from traac.evaluation.harness.paired import compare, paired_table
from traac.evaluation.harness.results import SampleRecord


def record(pid: str, sample: int, correct: bool, length: int) -> SampleRecord:
    return SampleRecord(pid, sample, "", correct, length, length - 1, True)


def test_differences_over_shared_problems_by_hand() -> None:
    # A: p right twice (len 10, 20), q right once of two (len 30, 30), r only in A.
    a = [record("p", 0, True, 10), record("p", 1, True, 20), record("q", 0, True, 30),
         record("q", 1, False, 30), record("r", 0, True, 99)]  # fmt: skip
    # B: p right once of two (len 40, 40), q wrong twice (len 50, 70).
    b = [record("p", 0, True, 40), record("p", 1, False, 40), record("q", 0, False, 50),
         record("q", 1, False, 70)]  # fmt: skip
    c = compare(a, b)
    assert c is not None and c.accuracy.items == 2  # r is not shared
    # Accuracy: p 100 - 50 = +50, q 50 - 0 = +50 -> +50, every draw +50.
    assert (c.accuracy.delta, c.accuracy.low, c.accuracy.high) == (50.0, 50.0, 50.0)
    assert c.accuracy.significant and c.accuracy.cell(2) == "+50.00* [+50.00, +50.00]"
    # Length: p 15 - 40 = -25, q 30 - 60 = -30 -> -27.5 within [-30, -25].
    assert c.response_tokens.delta == pytest.approx(-27.5)
    assert -30.0 <= c.response_tokens.low <= c.response_tokens.high <= -25.0
    assert c.base_response_tokens == pytest.approx(50.0)
    table = paired_table([("A", "B", "set", c)], "tokens")
    assert table.rows[0][6] == "-55.0%"  # -27.5 of B's 50


def test_an_interval_that_holds_zero_is_not_marked() -> None:
    # A is right on one sample of two everywhere; B on both samples of odd problems, none of
    # even ones: +50 on half the problems, -50 on the other half, a mean of 0.
    a = [record(f"p{k}", s, s == 0, 10) for k in range(20) for s in range(2)]
    b = [record(f"p{k}", s, k % 2 == 1, 10) for k in range(20) for s in range(2)]
    c = compare(a, b)
    assert c is not None and c.accuracy.delta == 0.0
    assert c.accuracy.low < 0 < c.accuracy.high and not c.accuracy.significant
    assert "*" not in c.accuracy.cell()
    assert compare(a, [record("other", 0, True, 1)]) is None
