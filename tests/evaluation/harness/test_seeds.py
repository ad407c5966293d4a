"""Seed-level intervals against values worked by hand (t quantiles from printed tables)."""

from __future__ import annotations

import pytest

from traac.evaluation.harness.seeds import SeedInterval, t_quantile


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
