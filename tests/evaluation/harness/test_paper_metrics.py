import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from traac.errors import TraacError
from traac.evaluation.harness.paper_metrics import (
    accuracy,
    auc_oaa,
    by_group,
    group_stats,
    mean_length,
    oaa,
    otb_f1,
    percent,
)


def test_accuracy_and_length():
    assert accuracy([True, False, True, True]) == 0.75
    assert accuracy([1.0, 0.5]) == 0.75
    assert mean_length([100, 200, 600]) == 300
    assert percent(0.45454) == 45.45 and percent(1 / 3, 1) == 33.3
    with pytest.raises(TraacError, match="no results"):
        accuracy([])


def test_oaa_and_auc_worked_example():
    correct = [True, True, False, True]
    think = [1000, 4000, 500, None]  # the last never closed its think block
    assert oaa(correct, think, 2000) == 0.25  # only the first: right and under 2000
    assert oaa(correct, think, 5000) == 0.5
    assert oaa(correct, think, 1000) == 0.0  # strictly fewer than t
    # closed form: (1/4) * ((10000 - 1000) + (10000 - 4000)) / 10000 = 0.375
    assert auc_oaa(correct, think, 10_000) == pytest.approx(0.375)
    # thinking past t_max earns nothing
    assert auc_oaa([True], [12_000], 10_000) == 0.0


def test_auc_oaa_is_the_integral_of_oaa():
    correct = [True, False, True, True, True]
    think = [120, 10, 999, 0, None]
    t_max = 1000
    ts = np.linspace(0, t_max, 20_001)
    integral = np.trapezoid([oaa(correct, think, t) for t in ts], ts) / t_max
    assert auc_oaa(correct, think, t_max) == pytest.approx(integral, abs=1e-3)


@pytest.mark.parametrize(
    ("auc", "acc_ut", "f1"),
    [(80.06, 34.33, 48.05), (85.06, 41.09, 55.41), (72.38, 12.69, 21.60), (1.11, 21.27, 2.10)],
)
def test_otb_f1_matches_the_paper(auc, acc_ut, f1):
    # the paper rounded its inputs to 2 decimals, so its F1 can differ in the last digit
    assert otb_f1(auc, acc_ut) == pytest.approx(f1, abs=0.011)
    assert otb_f1(auc / 100, acc_ut / 100) == pytest.approx(f1 / 100, abs=0.00011)


def test_otb_f1_edges():
    assert otb_f1(0, 0) == 0.0
    assert otb_f1(50, 50) == 50
    with pytest.raises(TraacError):
        otb_f1(-1, 3)


think_lengths = st.one_of(st.none(), st.integers(0, 20_000))


@given(st.lists(st.tuples(st.booleans(), think_lengths), min_size=1, max_size=40))
def test_auc_oaa_lies_within_zero_and_accuracy(rows):
    correct, think = zip(*rows, strict=True)
    auc = auc_oaa(correct, think, 10_000)
    assert 0.0 <= auc <= accuracy(correct) + 1e-12


@given(
    st.lists(st.tuples(st.booleans(), think_lengths), min_size=1, max_size=40),
    st.integers(0, 39),
    st.integers(1, 5_000),
)
def test_auc_oaa_never_increases_when_a_response_thinks_longer(rows, index, extra):
    correct, think = (list(x) for x in zip(*rows, strict=True))
    i = index % len(rows)
    before = auc_oaa(correct, think, 10_000)
    longer = list(think)
    longer[i] = None if longer[i] is None else longer[i] + extra
    assert auc_oaa(correct, longer, 10_000) <= before + 1e-12
    never_closed = list(think)
    never_closed[i] = None
    assert auc_oaa(correct, never_closed, 10_000) <= before + 1e-12


def test_group_stats_worked_numbers():
    """Two items, four samples; one never closed its think block (its whole response counts as
    thinking in the mean, and 0 towards AUC_OAA)."""
    s = group_stats(["a", "a", "b", "b"], [True, False, True, True], [10, 30, 20, 50],
                    [4, 30, None, 10], t_max=100)  # fmt: skip
    assert (s.n_items, s.n_samples) == (2, 4)
    assert s.accuracy == 75.0 and s.mean_response_tokens == 27.5
    assert s.mean_think_tokens == (4 + 30 + 20 + 10) / 4
    assert s.closed_rate == 75.0
    assert s.auc_oaa == pytest.approx(100 * (0.96 + 0 + 0 + 0.9) / 4)


def test_by_group():
    stats = by_group(
        ["easy", "hard", "easy", "hard"],
        ["1", "2", "3", "4"],
        [True, False, True, True],
        [10, 30, 20, 50],
        [5, 30, 10, 20],
        t_max=100,
    )
    assert list(stats) == ["easy", "hard"]
    assert stats["easy"].n_samples == 2 and stats["easy"].accuracy == 100.0
    assert stats["easy"].mean_response_tokens == 15
    assert stats["hard"].accuracy == 50.0 and stats["hard"].mean_response_tokens == 40
    with pytest.raises(TraacError, match="labels"):
        by_group(["a"], ["1", "2"], [True, False], [1, 2], [1, 1], 10)
