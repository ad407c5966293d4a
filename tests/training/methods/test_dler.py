"""DLER's truncation penalty and its difficulty-aware variant: the docs' worked examples."""

from __future__ import annotations

import pytest

from traac.errors import TraacError
from traac.training.methods.dler import dler_length_reward, dler_limit

# Group G of docs/peer_methods.md: four rollouts, the first and third right.
LENGTHS = [100, 200, 300, 500]
CORRECT = [True, False, True, False]


def test_dler_and_its_difficulty_aware_variant_are_the_worked_examples_times_four(
    peer, call
) -> None:
    # L 250: the right 300-token rollout of G loses its correctness, x4 = 4 / 1.
    dler = peer("dler")
    assert dler.func.__name__ == "dler_length_reward" and dler.scale == 4.0
    assert call(dler, LENGTHS, CORRECT) == pytest.approx([0.0, 0.0, -4.0, 0.0])
    # An all-right group is easy for the difficulty-aware variant: limit floor(250 x 0.5) = 125.
    easy, right = [100, 120, 150, 200], [True] * 4
    assert call(dler, easy, right) == pytest.approx([0.0] * 4)
    aware = peer("dler_difficulty")
    assert call(aware, easy, right) == pytest.approx([0.0, 0.0, -4.0, -4.0])
    assert call(aware, LENGTHS + easy, CORRECT + right) == pytest.approx(
        [0.0, 0.0, -4.0, 0.0, 0.0, 0.0, -4.0, -4.0]
    )


# The formulas on their own

ALL_WRONG = [False] * 4

ALL_RIGHT = [True] * 4


def approx(values: list[float]):
    return pytest.approx(values, abs=1e-12)


def test_dler_worked_example():
    # Only the right rollout over 250 tokens (the third, 300) loses its correctness.
    assert dler_length_reward(LENGTHS, CORRECT, limit=250) == approx([0.0, 0.0, -1.0, 0.0])
    assert dler_length_reward(LENGTHS, ALL_WRONG, limit=250) == approx([0.0] * 4)
    assert dler_length_reward(LENGTHS, ALL_RIGHT, limit=250) == approx([0.0, 0.0, -1.0, -1.0])
    assert dler_length_reward([250], [True], limit=250) == approx([0.0])  # at the limit: kept


def test_difficulty_aware_dler_worked_example():
    easy = [100, 120, 150, 200]
    kw = {"limit": 250, "easy_threshold": 0.8, "easy_scale": 0.5}
    # Group G (pass rate 0.5) keeps L = 250; an all-right group is easy: floor(250 x 0.5) = 125.
    assert dler_limit(CORRECT, **kw) == 250
    assert dler_limit(ALL_RIGHT, **kw) == 125
    assert dler_length_reward(easy, ALL_RIGHT, limit=125) == approx([0.0, 0.0, -1.0, -1.0])
    assert dler_length_reward(easy, ALL_RIGHT, limit=250) == approx([0.0] * 4)  # plain DLER
    with pytest.raises(TraacError, match="limits"):
        dler_length_reward(LENGTHS, CORRECT, limit=[250, 250])
