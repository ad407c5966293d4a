"""The peer modes' TRL reward functions: the worked examples of docs/peer_methods.md scaled to
traac's correctness weight, groups found in GRPO's layout across processes, TRL's own DAPO
function, and L1-Max's budgets in the training rows."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from trl.rewards import get_soft_overlong_punishment

from traac.common.items import Item
from traac.data.training import items_to_dataset
from traac.errors import TraacError
from traac.training.peer_rewards import (
    BUDGET_COLUMN,
    PeerRewards,
    PeerSettings,
    dapo_overlong_punishment,
    with_length_budgets,
)
from traac.training.rewards import TraacRewards

# Group G of docs/peer_methods.md: four rollouts, the first and third right.
LENGTHS = [100, 200, 300, 500]
CORRECT = [True, False, True, False]
SETTINGS = PeerSettings(
    method="alp", correctness_reward=4.0, max_completion_length=1000, alp_beta=1.0,
    alp_normalizer=1000.0, shorterbetter_beta=0.001, kimi_weight=1.0, dapo_cache_length=200,
    l1_alpha=0.0003, l1_delta=0.5, l1_budget_min=100, l1_budget_max=1000,
    l1_budget_in_prompt=True, dler_length=250, dler_easy_scale=0.5, easy_threshold=0.8,
    laser_bonus=0.5, laser_lower=100, laser_upper=500, laser_interval=100,
    laser_monitor_steps=20, laser_expected_correct=1,
)  # fmt: skip


def peer(mode: str, **kwargs: Any) -> PeerRewards:
    return PeerRewards(
        replace(SETTINGS, method=mode),
        verdicts=TraacRewards().verdicts,
        num_generations=4,
        **kwargs,
    )


def call(rewards: PeerRewards, lengths: list[int], correct: list[bool], **columns: Any) -> list:
    completions = ["x"] * len(lengths)
    ids = [[0] * n for n in lengths]
    return rewards.func(completions, completion_ids=ids, correct=correct, **columns)


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
    mode: str, scale: float, paper_length_part: list[float]
) -> None:
    rewards = peer(mode)
    assert rewards.func.__name__ == f"{mode}_length_reward"
    assert rewards.settings.scale == scale
    expected = [scale * r for r in paper_length_part]
    assert call(rewards, LENGTHS, CORRECT) == pytest.approx(expected, abs=1e-12)
    # Two prompts' groups in one batch are scored apart (GRPO's consecutive layout).
    both = call(rewards, LENGTHS + LENGTHS[::-1], CORRECT + CORRECT[::-1])
    assert both == pytest.approx(expected + expected[::-1], abs=1e-12)


def test_l1_max_reads_each_rows_budget() -> None:
    rewards = peer("l1_max")
    # n_gold 2000: clip(0.0003 (2000 - n) + 0.5, 0, 1) - 1 for right ones (docs), x4
    lengths, correct = [100, 1500, 2500, 4000], [True, True, False, True]
    got = call(rewards, lengths, correct, length_budget=[2000] * 4)
    assert got == pytest.approx([0.0, -1.4, 0.0, -4.0], abs=1e-12)
    with pytest.raises(TraacError, match="length_budget column"):
        call(rewards, LENGTHS, CORRECT)


def punish(lengths: list[int], max_len: int, cache: int | None = None) -> list[float]:
    return dapo_overlong_punishment(max_len, cache)([[0] * n for n in lengths])


def test_dapo_worked_example() -> None:
    # docs/peer_methods.md, paper values (L_max 20480, L_cache 4096, band after 16384), and a
    # short run (L_max 1000, default cache a fifth: 200).
    assert punish([16384, 17408, 20480, 20481], 20480) == pytest.approx([0.0, -0.25, -1.0, -1.0])
    assert punish([800, 900, 1000], 1000) == pytest.approx([0.0, -0.5, -1.0])


def test_dapo_boundaries_pin_cache_semantics() -> None:
    # L_cache is the band below L_max: 0 at L_max - L_cache, -1/L_cache one token later, -1 at
    # L_max and beyond. A copy reading the cache as the expected length, or with other ends, fails.
    got = punish([16384, 16385, 20480, 20481], 20480, 4096)
    assert got == [0.0, -0.000244140625, -1.0, -1.0]


def test_dapo_is_trls_function_scaled() -> None:
    ours = dapo_overlong_punishment(20480, 4096)
    theirs = get_soft_overlong_punishment(max_completion_len=20480, soft_punish_cache=4096)
    assert type(ours) is type(theirs)
    assert type(ours).__module__ == "trl.rewards.other_rewards"
    completions = [[7] * n for n in (0, 16000, 16384, 16385, 18000, 20480, 20481, 30000)]
    assert ours(completions) == theirs(completions)
    assert dapo_overlong_punishment(1000).soft_punish_cache == 200  # a fifth by default
    with pytest.raises(TraacError, match=r"cache_length \(2000\) must not exceed"):
        dapo_overlong_punishment(1000, 2000)
    # As a peer mode: TRL's values times 4 / 2 (right +1 against wrong -1 in the paper).
    rewards = peer("dapo_overlong")
    assert rewards.func.__name__ == "dapo_overlong_length_reward"
    trl = get_soft_overlong_punishment(max_completion_len=1000, soft_punish_cache=200)
    ids = [[0] * n for n in (700, 800, 900, 1000)]
    assert rewards.func(completion_ids=ids) == pytest.approx([0.0, 0.0, -1.0, -2.0])
    assert rewards.func(completion_ids=ids) == [2.0 * r for r in trl(ids)]


@pytest.mark.parametrize("mode", ["alp", "shorterbetter", "kimi"])
def test_groups_straddling_processes_match_one_process(mode: str) -> None:
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


def test_incomplete_groups_are_refused() -> None:
    with pytest.raises(TraacError, match="not whole groups of num_generations=4"):
        call(peer("kimi"), [1, 2, 3], [True, False, True])


def test_budgets_are_written_into_the_rows_and_prompts() -> None:
    items = [Item(id=str(k), question=f"What is {k} + 1?", answer=str(k + 1)) for k in range(6)]
    settings = replace(SETTINGS, method="l1_max", l1_budget_min=10, l1_budget_max=20)
    data = with_length_budgets(items_to_dataset(items), settings, seed=3)
    budgets = data[BUDGET_COLUMN]
    assert all(10 <= b <= 20 for b in budgets)
    assert budgets == with_length_budgets(items_to_dataset(items), settings, seed=3)[BUDGET_COLUMN]
    for row, b in zip(data, budgets, strict=True):
        (message,) = row["prompt"]
        assert message["content"] == f"What is {row['id']} + 1? Think for maximum {b} tokens."
    text = with_length_budgets(items_to_dataset(items, conversational=False), settings, seed=3)
    assert text[0]["prompt"] == f"What is 0 + 1? Think for maximum {budgets[0]} tokens."
    hidden = replace(settings, l1_budget_in_prompt=False)
    plain = with_length_budgets(items_to_dataset(items), hidden, seed=3)
    assert plain[0]["prompt"][0]["content"] == "What is 0 + 1?"
    assert with_length_budgets(data, settings, seed=9)[BUDGET_COLUMN] == budgets  # kept


def test_dler_and_its_difficulty_aware_variant_are_the_worked_examples_times_four() -> None:
    # L 250 (SETTINGS): the right 300-token rollout of G loses its correctness, x4 = 4 / 1.
    dler = peer("dler")
    assert dler.func.__name__ == "dler_length_reward" and dler.settings.scale == 4.0
    assert call(dler, LENGTHS, CORRECT) == pytest.approx([0.0, 0.0, -4.0, 0.0])
    # An all-right group is easy for the difficulty-aware variant: limit floor(250 x 0.5) = 125.
    easy, right = [100, 120, 150, 200], [True] * 4
    assert call(dler, easy, right) == pytest.approx([0.0] * 4)
    aware = peer("dler_difficulty")
    assert call(aware, easy, right) == pytest.approx([0.0, 0.0, -4.0, -4.0])
    assert call(aware, LENGTHS + easy, CORRECT + right) == pytest.approx(
        [0.0, 0.0, -4.0, 0.0, 0.0, 0.0, -4.0, -4.0]
    )


class State:
    def __init__(self, step: int) -> None:
        self.global_step = step


def test_laser_d_chooses_targets_on_its_schedule_and_pays_the_worked_example() -> None:
    """The docs' monitoring sample (K = 6, targets 100..500 step 100): high 200, medium 300,
    low 500; the bonus 0.5 x 4 / 1.5 for right answers within their band's target."""
    monitor = [
        ([80, 120, 150, 180, 260, 420], [True] * 6),
        ([150, 210, 260, 330, 380, 470], [True, True, False, True, False, False]),
        ([240, 300, 310, 390, 450, 500], [True] + [False] * 5),
    ]
    rewards = PeerRewards(
        replace(SETTINGS, method="laser_d", laser_monitor_steps=2),
        verdicts=TraacRewards().verdicts,
        num_generations=6,
    )
    assert rewards.func.__name__ == "laser_d_length_reward"
    logged: dict[str, float] = {}
    lengths = [n for g, _ in monitor for n in g]
    correct = [ok for _, g in monitor for ok in g]
    # Step 0: no targets yet, so this batch is the monitoring sample.
    call(rewards, lengths, correct, trainer_state=State(0), log_metric=logged.__setitem__)
    assert logged == {"laser/target_low": 500.0, "laser/target_medium": 300.0,
                      "laser/target_high": 200.0}  # fmt: skip
    group = [90, 190, 210, 320, 350, 480]
    high, medium = [True] * 4 + [False] * 2, [True, True, False, True, False, False]
    bonus = 0.5 * 4 / 1.5
    got = call(rewards, group + group, high + medium, trainer_state=State(1))
    assert got == pytest.approx([bonus, bonus, 0, 0, 0, 0, bonus, bonus, 0, 0, 0, 0])
    # Step 2 re-chooses from steps 1 and 2 alone (the step-0 sample is gone): the only group
    # above 2/3 is step 2's, all right at 100 tokens, so high moves to 100; no group is low,
    # so low takes the largest threshold.
    short = [100, 100, 100, 100, 100, 100]
    call(rewards, short, [True] * 6, trainer_state=State(2), log_metric=logged.__setitem__)
    assert rewards.laser is not None and rewards.laser.chosen_at == 2
    assert logged["laser/target_high"] == 100.0 and logged["laser/target_low"] == 500.0
