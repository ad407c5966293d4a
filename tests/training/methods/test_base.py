"""What every group method shares: the paper's length term times traac's correctness over the
paper's, groups in GRPO's layout, groups split over processes, whole groups only."""

from __future__ import annotations

import pytest

from traac.errors import TraacError
from traac.training.methods.alp import alp_length_reward
from traac.training.methods.kimi import kimi_length_reward
from traac.training.methods.l1_max import l1_max_length_reward
from traac.training.methods.shorterbetter import shorterbetter_length_reward

# Group G of docs/peer_methods.md: four rollouts, the first and third right.
LENGTHS = [100, 200, 300, 500]
CORRECT = [True, False, True, False]


@pytest.mark.parametrize(
    ("mode", "scale", "paper_length_part"),
    [
        # beta 1, N 1000: every token costs 0.5 / 1000 (docs' table); x4 = 4 / 1
        ("alp", 4.0, [-0.05, -0.1, -0.15, -0.25]),
        # SOL = 100, beta 0.001; x2 = 4 / alpha 2
        ("shorterbetter", 2.0, [0.0, -0.1, -0.2, -0.4]),
        # lambda = 0.5, 0.25, 0, -0.5; wrong ones capped at 0; x4
        ("kimi", 4.0, [0.5, 0.0, 0.0, -0.5]),
    ],
)
def test_group_rewards_are_the_worked_examples_times_the_correctness_ratio(
    peer, call, mode: str, scale: float, paper_length_part: list[float]
) -> None:
    rewards = peer(mode)
    assert rewards.func.__name__ == f"{mode}_length_reward"
    assert rewards.scale == scale
    expected = [scale * r for r in paper_length_part]
    assert call(rewards, LENGTHS, CORRECT) == pytest.approx(expected, abs=1e-12)
    # Two prompts' groups in one batch are scored apart (GRPO's consecutive layout).
    both = call(rewards, LENGTHS + LENGTHS[::-1], CORRECT + CORRECT[::-1])
    assert both == pytest.approx(expected + expected[::-1], abs=1e-12)


@pytest.mark.parametrize("mode", ["alp", "shorterbetter", "kimi"])
def test_groups_straddling_processes_match_one_process(peer, call, mode: str) -> None:
    """Three groups of 4 over two processes holding 6 rollouts each: the middle group is split.
    Each process gathers every process's rollouts and keeps its own slice."""
    lengths = [100, 200, 300, 500, 40, 60, 80, 10, 5, 50, 500, 5000]
    correct = [True, False, True, False, True, True, False, True, False, False, False, False]
    whole = call(peer(mode), lengths, correct)
    pairs = list(zip(lengths, correct, strict=True))
    halves = [pairs[:6], pairs[6:]]

    def gather(_: list) -> list:
        return halves  # what accelerate's gather_object([local]) returns on every process

    first = call(peer(mode, gather=gather, rank=0), lengths[:6], correct[:6])
    second = call(peer(mode, gather=gather, rank=1), lengths[6:], correct[6:])
    assert first + second == pytest.approx(whole, abs=1e-12)


def test_incomplete_groups_are_refused(peer, call) -> None:
    with pytest.raises(TraacError, match="not whole groups of num_generations=4"):
        call(peer("kimi"), [1, 2, 3], [True, False, True])


def test_stateless_methods_keep_nothing_across_steps(peer) -> None:
    for mode in ("alp", "shorterbetter", "kimi", "dapo_overlong", "l1_max", "dler"):
        assert peer(mode).state_dict() == {}


@pytest.mark.parametrize(
    ("mode", "why", "extra"),
    [
        ("arlcp", "count reflection keywords", {}),
        ("adaptthink", "find empty think blocks", {}),
        ("lc_r1", "count think tokens", {"answer": ["4"] * 4}),
        ("first_correct", "count think tokens", {"answer": ["4"] * 4}),
        ("dot", "decode the truncated rollouts", {"answer": ["4"] * 4}),
    ],
)
def test_a_method_that_reads_the_text_is_refused_before_a_tokenizer_is_bound(
    peer, call, mode: str, why: str, extra: dict
) -> None:
    """One line naming the mode and what the tokenizer is for, not an AttributeError on None
    (DOT only decodes the rollouts it truncates: 84 tokens against three of 25 are cut)."""
    message = rf"^mode {mode}: no tokenizer to {why} \(bind one\)$"
    with pytest.raises(TraacError, match=message):
        call(
            peer(mode, **{"dot": {"alpha": 1.0, "margin": 8}}.get(mode, {})),
            [25, 25, 84, 25],
            [True] * 4,
            **extra,
        )


@pytest.mark.parametrize(
    "reward",
    [
        lambda n, c: alp_length_reward(n, c, beta=1, normalizer=1),
        shorterbetter_length_reward,
        kimi_length_reward,
        lambda n, c: l1_max_length_reward(n, c, [100] * len(n)),
    ],
)
def test_group_checks(reward):
    with pytest.raises(TraacError, match="empty group"):
        reward([], [])
    with pytest.raises(TraacError, match=r"2 lengths but 1 verdicts"):
        reward([1, 2], [True])
    with pytest.raises(TraacError, match=r"length must be an integer >= 0, got -3"):
        reward([-3], [True])
    with pytest.raises(TraacError, match=r"length must be an integer >= 0, got 2.5"):
        reward([2.5], [True])
