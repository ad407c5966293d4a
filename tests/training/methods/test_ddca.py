"""DDCA on hand-built groups: its reward, centred on the group, is the authors' advantage."""

from __future__ import annotations

import numpy as np
import pytest

from traac.training.methods.ddca import ddca_length_advantage, ddca_reward

SIGMOID_1 = 0.7310585786300049  # 1 / (1 + e^-1)


def test_the_length_advantage_is_among_right_answers_only_and_scaled_by_the_pass_rate() -> None:
    """Right answers of 10 and 30 tokens: mean 20, std 10, z = -1 and +1, s = 0.269 and 0.731
    around their mean 0.5; 2 right of 4, so the pass rate 0.5 halves -(s - 0.5)."""
    d = (SIGMOID_1 - 0.5) * 0.5
    assert ddca_length_advantage([10, 20, 30, 40], [True, False, True, False]) == pytest.approx(
        [d, 0.0, -d, 0.0]
    )
    # All right: pass rate 1. None right: nothing.
    assert ddca_length_advantage([10, 30], [True, True]) == pytest.approx(
        [SIGMOID_1 - 0.5, 0.5 - SIGMOID_1]
    )
    assert ddca_length_advantage([10, 30], [False, False]) == [0.0, 0.0]


def test_the_reward_times_four_on_the_trainer_path(peer, call) -> None:
    """r = [1, 0, 1, 0]: std 0.5, so a right answer gains 1 x (1/0.5 - 1) = 1 and the length
    term 0.2 x +-0.1155; a right answer is worth 4 here."""
    rewards = peer("ddca", beta=0.2)
    assert rewards.func.__name__ == "ddca_reward" and rewards.scale == 4.0
    d = 0.2 * (SIGMOID_1 - 0.5) * 0.5
    out = call(rewards, [10, 20, 30, 40], [True, False, True, False])
    assert out == pytest.approx([4 * (1 + d), 0.0, 4 * (1 - d), 0.0])
    # An all-right group: the length term alone (A_acc is 0).
    out = call(rewards, [10, 20, 30, 40], [True] * 4)
    assert sum(out) == pytest.approx(0.0) and out[0] > out[1] > 0 > out[2] > out[3]


@pytest.mark.parametrize(
    ("lengths", "correct"),
    [
        ([12, 40, 33, 7, 90, 21, 55, 18], [True, False, True, True, False, True, False, True]),
        ([5, 6, 7, 8], [False, False, True, False]),
        ([30, 30, 30, 30], [True, False, True, True]),
    ],
)
def test_centred_on_the_group_with_the_correctness_reward_it_is_the_authors_advantage(
    lengths: list[int], correct: list[bool]
) -> None:
    """`advantage_dca_grpo` as alphadl/DDCA writes it (A_acc + beta A_len) against what TRL
    computes under `scale_rewards: none` from 1[correct] + this reward."""
    r = np.asarray(correct, dtype=float)
    a_acc = (r - r.mean()) / (max(r.std(), 1e-8) + 1e-8)
    authors = a_acc + 0.3 * np.asarray(ddca_length_advantage(lengths, correct))
    total = r + np.asarray(ddca_reward(lengths, correct, 0.3))
    assert total - total.mean() == pytest.approx(authors)
