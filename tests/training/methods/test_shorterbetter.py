"""ShorterBetter's length term against the docs' worked example (beta 0.001, the default)."""

from __future__ import annotations

import pytest

from traac.training.methods.shorterbetter import sample_optimal_length, shorterbetter_length_reward

# Group G of docs/peer_methods.md: four rollouts, the first and third right.
LENGTHS = [100, 200, 300, 500]
CORRECT = [True, False, True, False]
ALL_WRONG = [False] * 4
ALL_RIGHT = [True] * 4


def approx(values: list[float]):
    return pytest.approx(values, abs=1e-12)


def test_shorterbetter_worked_example():
    assert sample_optimal_length(LENGTHS, CORRECT) == 100
    assert shorterbetter_length_reward(LENGTHS, CORRECT) == approx([0.0, -0.1, -0.2, -0.4])


@pytest.mark.parametrize(
    ("lengths", "correct", "sol", "expected"),
    [
        (LENGTHS, ALL_WRONG, 275, [-0.175, -0.075, -0.025, -0.225]),  # SOL: the mean length
        (LENGTHS, ALL_RIGHT, 100, [0.0, -0.1, -0.2, -0.4]),
        ([300] * 4, [False, True, False, False], 300, [0.0] * 4),
        ([300] * 4, ALL_WRONG, 300, [0.0] * 4),
        ([700], [True], 700, [0.0]),
        ([700], [False], 700, [0.0]),
    ],
)
def test_shorterbetter_edge_cases(lengths, correct, sol, expected):
    assert sample_optimal_length(lengths, correct) == sol
    assert shorterbetter_length_reward(lengths, correct) == approx(expected)
