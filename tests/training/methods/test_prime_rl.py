"""prime-rl's pass-rate scaled length penalty: the docs' worked example, its edges and the
trainer's path."""

from __future__ import annotations

import pytest

from traac.errors import TraacError
from traac.training.methods.prime_rl import prime_rl_length_reward
from traac.training.planning.traac_config import TRAACConfig

# Group G of docs/peer_methods.md: four rollouts, the first and third right.
LENGTHS = [100, 200, 300, 500]
CORRECT = [True, False, True, False]


def test_prime_rl_worked_example() -> None:
    # Pass rate 0.5, longest 500: 0.25 x 0.5 x n / 500, right or wrong.
    got = prime_rl_length_reward(LENGTHS, CORRECT, weight=0.25)
    assert got == pytest.approx([-0.025, -0.05, -0.075, -0.125], abs=1e-12)
    # All right: twice that; none right: nothing (never-solved prompts keep their length).
    got = prime_rl_length_reward(LENGTHS, [True] * 4, weight=0.25)
    assert got == pytest.approx([-0.05, -0.1, -0.15, -0.25], abs=1e-12)
    assert prime_rl_length_reward(LENGTHS, [False] * 4, weight=0.25) == [0.0] * 4
    # The longest is at least 1 token (the authors' clamp); weight 0 switches it off.
    assert prime_rl_length_reward([0, 0], [True, True], weight=0.25) == [0.0, 0.0]
    assert prime_rl_length_reward(LENGTHS, CORRECT, weight=0.0) == [0.0] * 4


def test_inputs_are_checked_in_one_line() -> None:
    with pytest.raises(TraacError, match=r"prime_rl weight must be a number >= 0, got -1"):
        prime_rl_length_reward(LENGTHS, CORRECT, weight=-1)
    with pytest.raises(TraacError, match=r"prime_rl: 4 lengths but 3 verdicts"):
        prime_rl_length_reward(LENGTHS, CORRECT[:3], weight=0.25)


def test_the_trainer_pays_four_times_the_worked_example(peer, call) -> None:
    rewards = peer("prime_rl")
    assert rewards.func.__name__ == "prime_rl_length_reward" and rewards.scale == 4.0
    got = call(rewards, LENGTHS + LENGTHS, CORRECT + [True] * 4)
    assert got == pytest.approx([-0.1, -0.2, -0.3, -0.5, -0.2, -0.4, -0.6, -1.0])


def test_the_dry_run_line() -> None:
    config = TRAACConfig(
        output_dir="unused", use_cpu=True, bf16=False, mode="prime_rl", max_completion_length=4000
    )
    assert config.method_run().describe() == (
        "prime-rl linear length penalty (PrimeIntellect-ai/prime-rl, PR 2901): -weight x pass "
        "rate x |y| / max |y|, weight 0.25; length term x4 (right answer 4 here, 1 in the paper)"
    )
