"""The peer length rewards against the hand-computed worked examples of docs/peer_methods.md."""

import os
import random
import subprocess
import sys

import pytest

from traac.compression.length_rewards import (
    alp_length_reward,
    dapo_cache_length,
    dler_length_reward,
    dler_limit,
    kimi_length_reward,
    l1_max_length_reward,
    l1_max_prompt,
    laser_band,
    laser_length_reward,
    laser_target_lengths,
    laser_thresholds,
    sample_l1_budget,
    sample_optimal_length,
    shorterbetter_length_reward,
)
from traac.errors import TraacError

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


# DAPO's band (the formula is TRL's; the worked example: tests/training/methods/)


def test_dapo_default_cache_is_a_fifth():
    assert dapo_cache_length(20480) == 4096  # the paper's 4096 of 20480
    assert dapo_cache_length(1000) == 200
    assert dapo_cache_length(1000, 50) == 50
    assert dapo_cache_length(1000, 0) == 0


def test_dapo_rejects_bad_values():
    with pytest.raises(TraacError, match=r"cache_length \(2000\) must not exceed .*\(1000\)"):
        dapo_cache_length(1000, 2000)
    with pytest.raises(TraacError, match=r"max_completion_length must be an integer >= 1, got 0"):
        dapo_cache_length(0)
    with pytest.raises(TraacError, match=r"cache_length must be an integer >= 0, got 0.5"):
        dapo_cache_length(1000, 0.5)  # type: ignore[arg-type]


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


# DLER (L 250) and its difficulty-aware variant (easy threshold 0.8, scale 0.5)


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


# Laser-D: the monitoring sample of the docs, K = 6 rollouts, thresholds 100..500 step 100
LASER_MONITOR = [
    ([80, 120, 150, 180, 260, 420], [True] * 6),  # high (6/6)
    ([150, 210, 260, 330, 380, 470], [True, True, False, True, False, False]),  # medium (3/6)
    ([240, 300, 310, 390, 450, 500], [True] + [False] * 5),  # low (1/6)
]
LASER_GROUP = [90, 190, 210, 320, 350, 480]


def test_laser_d_worked_example():
    thresholds = laser_thresholds(100, 500, 100)
    assert thresholds == [100, 200, 300, 400, 500]
    targets = laser_target_lengths(LASER_MONITOR, thresholds)
    assert targets == {"low": 500, "medium": 300, "high": 200}
    high = [True, True, True, True, False, False]  # 4/6 >= 2/3: high, target 200
    medium = [True, True, False, True, False, False]  # 3/6: medium, target 300
    assert (laser_band(4 / 6), laser_band(3 / 6), laser_band(1 / 6)) == ("high", "medium", "low")
    assert laser_length_reward(LASER_GROUP, high, target=200) == approx([0.5, 0.5] + [0.0] * 4)
    assert laser_length_reward(LASER_GROUP, medium, target=300) == approx([0.5, 0.5] + [0.0] * 4)
    assert laser_length_reward(LASER_GROUP, [True] * 6, target=300) == approx(
        [0.5, 0.5, 0.5, 0.0, 0.0, 0.0]
    )
    # Expecting 3 right rollouts within the target: floor(4/6 x 4) = 2 at 200 falls short,
    # floor(5/6 x 4) = 3 at 300 does not.
    assert laser_target_lengths(LASER_MONITOR, thresholds, expected_correct=3)["high"] == 300
    # An unaligned range ends at its upper bound; an empty band gets the largest threshold.
    assert laser_thresholds(40, 165, 25) == [40, 65, 90, 115, 140, 165]
    assert laser_target_lengths(LASER_MONITOR[:1], thresholds)["low"] == 500


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


def test_the_method_package_needs_no_trl():
    """traac.compression is the pure algorithm (numpy/torch): DAPO's TRL function is composed in
    traac.training, so importing every method module must not load TRL."""
    code = (
        "import importlib, pkgutil, sys, traac.compression as m\n"
        "for info in pkgutil.iter_modules(m.__path__):\n"
        "    importlib.import_module(f'traac.compression.{info.name}')\n"
        "assert 'trl' not in sys.modules, 'trl imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=os.environ.copy())
