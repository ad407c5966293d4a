"""Kimi k1.5's length reward against the docs' worked example (weight 1, the default)."""

from __future__ import annotations

import pytest

from traac.errors import TraacError
from traac.training.methods.kimi import kimi_length_reward

# Group G of docs/peer_methods.md: four rollouts, the first and third right.
LENGTHS = [100, 200, 300, 500]
CORRECT = [True, False, True, False]
ALL_WRONG = [False] * 4
ALL_RIGHT = [True] * 4


def approx(values: list[float]):
    return pytest.approx(values, abs=1e-12)


def test_kimi_worked_example():
    assert kimi_length_reward(LENGTHS, CORRECT) == approx([0.5, 0.0, 0.0, -0.5])


@pytest.mark.parametrize(
    ("lengths", "correct", "expected"),
    [
        (LENGTHS, ALL_WRONG, [0.0, 0.0, 0.0, -0.5]),
        (LENGTHS, ALL_RIGHT, [0.5, 0.25, 0.0, -0.5]),
        ([300] * 4, CORRECT, [0.0] * 4),  # max_len = min_len: zero for all
        ([300], [True], [0.0]),
    ],
)
def test_kimi_edge_cases(lengths, correct, expected):
    assert kimi_length_reward(lengths, correct) == approx(expected)


def test_kimi_weight_scales():
    assert kimi_length_reward(LENGTHS, ALL_RIGHT, weight=0.1) == approx([0.05, 0.025, 0.0, -0.05])
    with pytest.raises(TraacError, match=r"kimi weight must be a number >= 0, got -1"):
        kimi_length_reward(LENGTHS, CORRECT, weight=-1)
