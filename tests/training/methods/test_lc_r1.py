"""LC-R1's length and compress terms on hand-built rollouts (the values worked below)."""

from __future__ import annotations

import pytest

from traac.training.methods.lc_r1 import lcr1_compress, lcr1_length_reward


def test_the_length_reward_is_against_the_longest_right_answer_for_every_rollout() -> None:
    assert lcr1_length_reward([50, 100, 200], [True, True, False]) == pytest.approx(
        [0.5, 0.0, -1.0], abs=1e-5
    )
    assert lcr1_length_reward([50, 100], [False, False]) == [0.0, 0.0]


def test_the_compress_term_charges_the_think_after_the_first_correct_step() -> None:
    assert lcr1_compress([False, (15, 31), (0, 5), None, (0, 0)]) == pytest.approx(
        [0.0, -15 / 31, 0.0, -1.0, -1.0]
    )


def test_both_terms_on_the_trainer_path(peer, call_texts) -> None:
    """Answer 4, one character per token, a right answer worth 4. Lengths 55, 29, 39 and 28;
    the longest right one is 55, so the length terms are 0, 26/55, 16/55 and 27/55 (the wrong
    rollout 2 too). Compress: rollout 0 wrote 15 of its 31 think tokens after its first correct
    step (-15/31), rollout 1 none (0), rollout 2 is wrong (0), rollout 3's think block states
    no answer (-1)."""
    texts = [
        "<think>Then 5. Then 4. Wait 4. Wait 4.</think>\\boxed{4}",
        "<think>So 4.</think>\\boxed{4}",
        "<think>Then 5. Then 4.</think>\\boxed{5}",
        "<think>Hmm.</think>\\boxed{4}",
    ]
    rewards = peer("lc_r1")
    assert rewards.func.__name__ == "lc_r1_reward" and rewards.scale == 4.0
    out = call_texts(rewards, texts, [True, True, False, True], answer=["4"] * 4)
    expected = [-15 / 31, 26 / 55, 16 / 55, 27 / 55 - 1]
    assert out == pytest.approx([4 * e for e in expected], abs=1e-4)
