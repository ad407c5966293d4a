"""Seed-level intervals and what they resolve, against values worked by hand (t quantiles from
printed tables; with two degrees of freedom t's tail has the closed form
P(T > t) = 1/2 - t / (2 sqrt(2 + t^2)))."""

from __future__ import annotations

import pytest

from traac.evaluation.harness.seeds import Bounds, SeedInterval, holm, t_quantile


def test_t_quantiles_are_the_tabled_ones() -> None:
    for df, tabled in ((1, 12.706), (2, 4.303), (4, 2.776), (9, 2.262), (1000, 1.962)):
        assert t_quantile(df) == pytest.approx(tabled, abs=1e-3)


def test_three_seeds_by_hand() -> None:
    """Effects 1, 2, 3: mean 2, sd 1, half-width 4.303 / sqrt(3) = 2.484."""
    interval = SeedInterval.of([1.0, 2.0, 3.0])
    assert interval.mean == 2.0
    assert interval.low == pytest.approx(2 - 2.4842, abs=1e-4)
    assert interval.high == pytest.approx(2 + 2.4842, abs=1e-4)
    assert not interval.significant and interval.cell() == "+2.0 [-0.5, +4.5]"
    assert interval.by_seed() == "+1.0, +2.0, +3.0"


def test_five_agreeing_seeds_exclude_zero() -> None:
    """Effects 4, 5, 6, 5, 5: mean 5, sd sqrt(0.5), half-width 2.776 x 0.7071 / sqrt(5) = 0.878."""
    interval = SeedInterval.of([4.0, 5.0, 6.0, 5.0, 5.0])
    assert (interval.low, interval.high) == (pytest.approx(4.122, abs=1e-3),
                                             pytest.approx(5.878, abs=1e-3))  # fmt: skip
    assert interval.significant and interval.cell(2) == "+5.00* [+4.12, +5.88]"


def test_two_disagreeing_seeds_say_little_and_one_seed_gives_no_interval() -> None:
    """The last wave's 30-step seeds, +1.46 and +7.08: t(1) = 12.706, sd 3.974, half 35.70."""
    interval = SeedInterval.of([1.46, 7.08])
    assert interval.cell(2) == "+4.27 [-31.43, +39.97]" and not interval.significant
    one = SeedInterval.of([3.5])
    assert (one.low, one.high, one.significant) == (None, None, False)
    assert one.cell() == "+3.5 (1 seed)"


def test_three_seeds_bounds_by_hand() -> None:
    """Effects 10, 20, 30: mean 20, se 10 / sqrt 3 = 5.7735. 90%: t(0.95, 2) = 2.9200, half
    16.859. p: t = 3.4641, tail 1/2 - 3.4641 / (2 sqrt 14) = 0.037088, two-sided 0.074175.
    MDE: (t(0.975, 2) 4.3027 + t(0.8, 2) 1.0607) x 5.7735 = 30.965. One left out: 25, 20, 15."""
    i = SeedInterval.of([10.0, 20.0, 30.0])
    ninety = i.at(0.90)
    assert ninety == (pytest.approx(3.141, abs=1e-3), pytest.approx(36.859, abs=1e-3))
    assert i.p == pytest.approx(0.074175, abs=1e-5)
    assert i.mde() == pytest.approx(30.965, abs=1e-3)
    assert i.leave_one_out() == (15.0, 25.0)
    bounds = Bounds(i, i.p, None)
    assert bounds.tost is None  # no margin stated: no equivalence tested
    assert bounds.verdict() == "not resolved after Holm: +3.1 to +36.9 points not excluded"
    assert Bounds(i, 0.01, None).verdict() == "better"


def test_equivalence_at_a_stated_margin_by_hand() -> None:
    """Effects 0, 1, 2: mean 1, se 0.57735, 90% [-0.686, +2.686]. TOST at 3: t = 4 / se = 6.928
    (tail 0.010102) and 2 / se = 3.4641 (tail 0.037088): p 0.037088, equivalent. At 2 the upper
    test's t is 1.7321 (tail 0.112702): not equivalent, and the 90% interval reaches 2.7."""
    i = SeedInterval.of([0.0, 1.0, 2.0])
    assert i.p == pytest.approx(0.225403, abs=1e-5)
    assert i.tost(3.0) == pytest.approx(0.037088, abs=1e-5)
    assert Bounds(i, i.p, 3.0).verdict() == "equivalent within ±3 points"
    assert i.tost(2.0) == pytest.approx(0.112702, abs=1e-5)
    assert Bounds(i, i.p, 2.0).verdict() == "not resolved: up to 2.7 points either way not excluded"


def test_a_collapsed_seed_carries_the_mean() -> None:
    """Seeds +1, +2 and a collapse at -10: mean -2.333; leaving one out gives -4.5 (without +2),
    -4.0 (without +1) and +1.5 (without the collapse): the sign hangs on one seed. With one seed
    nothing is resolved; seeds that agree exactly have no spread: p 0, TOST 0 inside the margin."""
    i = SeedInterval.of([1.0, 2.0, -10.0])
    assert i.leave_one_out() == (-4.5, 1.5)
    one = SeedInterval.of([3.5])
    assert (one.at(0.9), one.p, one.mde(), one.leave_one_out(), one.tost(3.0)) == (None,) * 5
    assert Bounds(one, None, 3.0).verdict() == "not resolved: one seed"
    same = SeedInterval.of([2.0, 2.0, 2.0])
    assert (same.p, same.tost(3.0), same.tost(1.0), same.mde()) == (0.0, 0.0, 1.0, 0.0)
    assert Bounds(same, 0.0, 3.0).verdict() == "better, within ±3 points"
    assert Bounds(SeedInterval.of([-2.0, -2.0]), 0.0, 1.0).verdict() == "worse"
    assert SeedInterval.of([0.0, 0.0]).p == 1.0


def test_holm_by_hand() -> None:
    """0.01, 0.04, 0.03 and an untested contrast: 0.01 x 3 = 0.03, 0.03 x 2 = 0.06, 0.04 x 1 =
    0.04 raised to the 0.06 before it; the untested one stays out of the family."""
    assert holm([0.01, 0.04, 0.03, None]) == [
        pytest.approx(0.03),
        pytest.approx(0.06),
        pytest.approx(0.06),
        None,
    ]
    assert holm([0.6, 0.9]) == [1.0, 1.0]
