"""DLER's truncation penalty and its difficulty-aware variant: the docs' worked examples."""

from __future__ import annotations

import pytest

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
