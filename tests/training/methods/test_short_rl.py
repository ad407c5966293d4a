"""Short-RL: the docs' worked example, the tolerance band, the accuracy gate across calls and its
state across a checkpoint."""

from __future__ import annotations

import pytest

from traac.errors import TraacError
from traac.training.methods.base import RunContext
from traac.training.methods.registry import METHODS, parse_settings
from traac.training.methods.short_rl import short_rl_applies, short_rl_length_reward
from traac.training.planning.traac_config import TRAACConfig

# Group G of docs/peer_methods.md: four rollouts, the first and third right.
LENGTHS = [100, 200, 300, 500]
CORRECT = [True, False, True, False]
ALL_WRONG = [False] * 4
RUN = RunContext(correctness_reward=4.0, max_completion_length=1000, easy_threshold=0.8)
NEAR_HALF = 0.5 - 200 / (200 + 1e-5)  # the authors' 1e-5 keeps it just above -0.5


def test_short_rl_worked_example() -> None:
    # Right lengths 100 and 300: the first within 100 tokens of the shortest keeps 0.5, the
    # second pays Kimi's min-max term over the right ones; wrong rollouts get nothing.
    got = short_rl_length_reward(LENGTHS, CORRECT, tolerance=100)
    assert got == pytest.approx([0.5, 0.0, NEAR_HALF, 0.0], abs=1e-12)
    assert abs(NEAR_HALF + 0.5) < 1e-7
    # All right: min 100, max 500; 200 is inside the band, 300 pays 0.5 - 200/400.
    got = short_rl_length_reward(LENGTHS, [True] * 4, tolerance=100)
    assert got == pytest.approx([0.5, 0.5, 0.0, -0.5], abs=1e-7)
    # No band: Kimi's term on the right ones; no right rollout: nothing.
    got = short_rl_length_reward(LENGTHS, CORRECT, tolerance=0)
    assert got == pytest.approx([0.5, 0.0, NEAR_HALF, 0.0], abs=1e-12)
    assert short_rl_length_reward(LENGTHS, ALL_WRONG, tolerance=100) == [0.0] * 4
    assert short_rl_length_reward([300], [True], tolerance=0) == [0.5]


def test_the_gate_is_the_best_accuracy_less_the_tolerance() -> None:
    assert short_rl_applies(0.5, 0.5, 0.05)
    assert short_rl_applies(0.46, 0.5, 0.05)
    assert not short_rl_applies(0.44, 0.5, 0.05)
    with pytest.raises(TraacError, match="acc_tolerance must be a number >= 0"):
        short_rl_applies(0.5, 0.5, -0.1)


def test_applied_only_on_batches_near_the_best_accuracy(peer, call) -> None:
    """A right answer is worth 4 here and 3.5 (+2 / -1.5) to the authors: x 8/7."""
    rewards = peer("short_rl")
    assert rewards.func.__name__ == "short_rl_length_reward"
    assert rewards.scale == pytest.approx(8 / 7)
    logged: dict[str, float] = {}
    first = call(rewards, LENGTHS, CORRECT, log_metric=logged.__setitem__)
    assert first == pytest.approx([4 / 7, 0.0, 8 / 7 * NEAR_HALF, 0.0])
    assert logged == {"short_rl/accuracy": 0.5, "short_rl/best_accuracy": 0.5,
                      "short_rl/applied": 1.0}  # fmt: skip
    # A batch a quarter right is more than 0.05 below the best: no length reward.
    assert call(rewards, LENGTHS, [True, False, False, False]) == [0.0] * 4
    # Two groups, 5 of 8 right: the best rises to 0.625 and the reward applies to both.
    out = call(rewards, LENGTHS + LENGTHS, CORRECT + [True] * 3 + [False])
    assert out[:4] == pytest.approx(first) and out[4] == pytest.approx(4 / 7)
    # Back at 0.5, 0.125 below the best: none.
    assert call(rewards, LENGTHS, CORRECT) == [0.0] * 4
    assert rewards.state_dict() == {"short_rl_best_accuracy": 0.625}


def test_the_best_accuracy_survives_a_checkpoint(peer, call) -> None:
    resumed = peer("short_rl")
    resumed.load_state_dict({"short_rl_best_accuracy": 1.0})
    assert call(resumed, LENGTHS, CORRECT) == [0.0] * 4
    assert peer("short_rl").state_dict() == {"short_rl_best_accuracy": 0.0}


def test_settings_are_checked_in_one_line() -> None:
    with pytest.raises(
        TraacError, match=r"^short_rl\.length_tolerance: -1 must be an integer >= 0"
    ):
        parse_settings("short_rl", {"length_tolerance": -1}, RUN)
    with pytest.raises(TraacError, match=r"^short_rl\.acc_tolerance: -0.1 must be a finite number"):
        parse_settings("short_rl", {"acc_tolerance": -0.1}, RUN)
    assert METHODS["short_rl"].compare[0][0] == "Short-RL"


def test_the_dry_run_line() -> None:
    config = TRAACConfig(
        output_dir="unused", use_cpu=True, bf16=False, mode="short_rl", max_completion_length=4000
    )
    assert config.method_run().describe() == (
        "Short-RL, arXiv:2505.12284 (lblankl/Short-RL): right answers: 0.5 within 100 tokens of "
        "the shortest right, else 0.5 - (l - min) / (max - min); on batches within 0.05 of the "
        "best accuracy so far; length term x1.14286 (right answer 4 here, 3.5 in the paper)"
    )
