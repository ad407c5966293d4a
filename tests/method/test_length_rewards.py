"""The peer length rewards against the hand-computed worked examples of docs/peer_methods.md."""

import os
import random
import subprocess
import sys

import pytest
from trl.rewards import get_soft_overlong_punishment

from traac.errors import TraacError
from traac.method.length_rewards import (
    alp_length_reward,
    dapo_overlong_punishment,
    dapo_overlong_reward,
    kimi_length_reward,
    l1_max_length_reward,
    l1_max_prompt,
    sample_l1_budget,
    sample_optimal_length,
    shorterbetter_length_reward,
)

# Group G of the docs: four rollouts, the first and third right.
LENGTHS = [100, 200, 300, 500]
CORRECT = [True, False, True, False]
ALL_WRONG = [False] * 4
ALL_RIGHT = [True] * 4


def approx(values: list[float]):
    return pytest.approx(values, abs=1e-12)


# ALP (beta 1, N 1000 in every example)


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


# ShorterBetter (beta 0.001, the default)


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


# Kimi k1.5 (weight 1, the default)


def test_kimi_worked_example():
    assert kimi_length_reward(LENGTHS, CORRECT) == approx([0.5, 0.0, 0.0, -0.5])


@pytest.mark.parametrize(
    ("lengths", "correct", "expected"),
    [
        (LENGTHS, ALL_WRONG, [0.0, 0.0, 0.0, -0.5]),
        (LENGTHS, ALL_RIGHT, [0.5, 0.25, 0.0, -0.5]),
        ([300] * 4, CORRECT, [0.0] * 4),  # max_len = min_len: zero for all
        ([300], [True], [0.0]),
    ],
)
def test_kimi_edge_cases(lengths, correct, expected):
    assert kimi_length_reward(lengths, correct) == approx(expected)


def test_kimi_weight_scales():
    assert kimi_length_reward(LENGTHS, ALL_RIGHT, weight=0.1) == approx([0.05, 0.025, 0.0, -0.05])
    with pytest.raises(TraacError, match=r"kimi weight must be a number >= 0, got -1"):
        kimi_length_reward(LENGTHS, CORRECT, weight=-1)


# DAPO (TRL's function; paper values L_max 20480, L_cache 4096)


def test_dapo_worked_example():
    lengths = [16384, 17408, 20480, 20481]
    assert dapo_overlong_reward(lengths, max_completion_length=20480) == approx(
        [0.0, -0.25, -1.0, -1.0]
    )
    assert dapo_overlong_reward([800, 900, 1000], max_completion_length=1000) == approx(
        [0.0, -0.5, -1.0]
    )


def test_dapo_is_trls_function():
    ours = dapo_overlong_punishment(20480, 4096)
    theirs = get_soft_overlong_punishment(max_completion_len=20480, soft_punish_cache=4096)
    assert type(ours) is type(theirs)
    assert type(ours).__module__ == "trl.rewards.other_rewards"
    completions = [[7] * n for n in (0, 16000, 16384, 16385, 18000, 20480, 20481, 30000)]
    assert ours(completions) == theirs(completions)
    assert dapo_overlong_reward([len(c) for c in completions], max_completion_length=20480) == (
        theirs(completions)
    )


def test_dapo_boundaries_pin_cache_semantics():
    # L_cache is the band below L_max: 0 at L_max - L_cache, -1/L_cache one token later, -1 at
    # L_max and beyond. A copy reading the cache as the expected length, or with other ends, fails.
    lengths = [16384, 16385, 20480, 20481]
    assert dapo_overlong_reward(lengths, max_completion_length=20480, cache_length=4096) == [
        0.0,
        -0.000244140625,
        -1.0,
        -1.0,
    ]


def test_dapo_default_cache_is_a_fifth():
    assert dapo_overlong_punishment(20480).soft_punish_cache == 4096
    assert dapo_overlong_punishment(1000).soft_punish_cache == 200
    assert dapo_overlong_punishment(1000, 50).soft_punish_cache == 50


def test_dapo_rejects_bad_values():
    with pytest.raises(TraacError, match=r"cache_length \(2000\) must not exceed .*\(1000\)"):
        dapo_overlong_punishment(1000, 2000)
    with pytest.raises(TraacError, match=r"max_completion_length must be an integer >= 1, got 0"):
        dapo_overlong_punishment(0)
    with pytest.raises(TraacError, match=r"cache_length must be an integer >= 0, got 0.5"):
        dapo_overlong_punishment(1000, 0.5)  # type: ignore[arg-type]


# L1-Max (alpha 0.0003, delta 0.5, the defaults)


def test_l1_max_worked_example():
    lengths = [100, 1500, 2500, 4000]
    correct = [True, True, False, True]
    assert l1_max_length_reward(lengths, correct, [2000] * 4) == approx([0.0, -0.35, 0.0, -1.0])


@pytest.mark.parametrize(
    ("lengths", "correct", "budgets", "expected"),
    [
        ([100, 1500, 2500, 4000], ALL_WRONG, [2000] * 4, [0.0] * 4),
        ([100, 1500, 2500, 4000], ALL_RIGHT, [2000] * 4, [0.0, -0.35, -0.65, -1.0]),
        ([2000] * 4, ALL_RIGHT, [2000] * 4, [-0.5] * 4),
        ([2000], [True], [2000], [-0.5]),
    ],
)
def test_l1_max_edge_cases(lengths, correct, budgets, expected):
    assert l1_max_length_reward(lengths, correct, budgets) == approx(expected)


def test_l1_budget_sampling_and_prompt():
    draws = [sample_l1_budget(random.Random(seed)) for seed in range(2000)]
    assert all(isinstance(b, int) and 100 <= b <= 4000 for b in draws)
    assert min(draws) < 200 and max(draws) > 3900
    assert sample_l1_budget(random.Random(3)) == sample_l1_budget(random.Random(3))
    assert sample_l1_budget(random.Random(3), low=512, high=512) == 512
    assert l1_max_prompt("Solve x + 1 = 2.", 1024) == (
        "Solve x + 1 = 2. Think for maximum 1024 tokens."
    )
    with pytest.raises(TraacError, match=r"low \(10\) must not exceed high \(5\)"):
        sample_l1_budget(random.Random(0), low=10, high=5)
    with pytest.raises(TraacError, match=r"l1-max budget must be an integer >= 1, got 0"):
        l1_max_prompt("x", 0)


def test_l1_max_rejects_bad_budgets():
    with pytest.raises(TraacError, match=r"2 lengths but 1 budgets"):
        l1_max_length_reward([1, 2], [True, True], [100])
    with pytest.raises(TraacError, match=r"l1-max budget must be an integer >= 1, got 0"):
        l1_max_length_reward([1], [True], [0])


# Shared input checks


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


def test_group_only_rewards_need_no_trl():
    code = "import sys, traac.method.length_rewards; assert 'trl' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, env=os.environ.copy())
