"""ALP's length penalty against the docs' worked example (beta 1, N 1000 in every example)."""

from __future__ import annotations

import pytest

from traac.errors import TraacError
from traac.training.methods.alp import alp_length_reward

# Group G of docs/peer_methods.md: four rollouts, the first and third right.
LENGTHS = [100, 200, 300, 500]
CORRECT = [True, False, True, False]
ALL_WRONG = [False] * 4
ALL_RIGHT = [True] * 4


def approx(values: list[float]):
    return pytest.approx(values, abs=1e-12)


def test_alp_worked_example():
    assert alp_length_reward(LENGTHS, CORRECT, beta=1, normalizer=1000) == approx(
        [-0.05, -0.1, -0.15, -0.25]
    )


@pytest.mark.parametrize(
    ("lengths", "correct", "expected"),
    [
        (LENGTHS, ALL_WRONG, [-0.025, -0.05, -0.075, -0.125]),  # floor 1/K = 0.25
        (LENGTHS, ALL_RIGHT, [-0.1, -0.2, -0.3, -0.5]),
        ([200] * 4, [True, False, False, False], [-0.05] * 4),
        ([400], [False], [-0.4]),  # K = 1: the floor is 1
        ([400], [True], [-0.4]),
    ],
)
def test_alp_edge_cases(lengths, correct, expected):
    assert alp_length_reward(lengths, correct, beta=1, normalizer=1000) == approx(expected)


def test_alp_has_no_invented_defaults():
    with pytest.raises(TypeError, match="beta"):
        alp_length_reward(LENGTHS, CORRECT, normalizer=1000)  # type: ignore[call-arg]
    with pytest.raises(TraacError, match=r"alp beta must be a number > 0, got 0"):
        alp_length_reward(LENGTHS, CORRECT, beta=0, normalizer=1000)
    with pytest.raises(TraacError, match=r"alp normalizer \(N\).*got -1"):
        alp_length_reward(LENGTHS, CORRECT, beta=1, normalizer=-1)
