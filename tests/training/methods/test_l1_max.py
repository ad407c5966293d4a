"""L1-Max: each row's budget read from its column, and written into the rows and prompts."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from traac.common.items import Item
from traac.data.training import items_to_dataset
from traac.errors import TraacError
from traac.training.methods.base import RunContext
from traac.training.methods.l1_max import (
    BUDGET_COLUMN,
    L1MaxSettings,
    l1_max_length_reward,
    l1_max_prompt,
    sample_l1_budget,
    with_length_budgets,
)


def test_l1_max_reads_each_rows_budget(peer, call) -> None:
    rewards = peer("l1_max")
    # n_gold 2000: clip(0.0003 (2000 - n) + 0.5, 0, 1) - 1 for right ones (docs), x4
    lengths, correct = [100, 1500, 2500, 4000], [True, True, False, True]
    got = call(rewards, lengths, correct, length_budget=[2000] * 4)
    assert got == pytest.approx([0.0, -1.4, 0.0, -4.0], abs=1e-12)
    with pytest.raises(TraacError, match="length_budget column"):
        call(rewards, [100, 200, 300, 500], [True, False, True, False])


def test_budgets_are_written_into_the_rows_and_prompts() -> None:
    items = [Item(id=str(k), question=f"What is {k} + 1?", answer=str(k + 1)) for k in range(6)]
    settings = L1MaxSettings(budget_min=10, budget_max=20)
    data = with_length_budgets(items_to_dataset(items), settings, seed=3)
    budgets = data[BUDGET_COLUMN]
    assert all(10 <= b <= 20 for b in budgets)
    assert budgets == with_length_budgets(items_to_dataset(items), settings, seed=3)[BUDGET_COLUMN]
    for row, b in zip(data, budgets, strict=True):
        (message,) = row["prompt"]
        assert message["content"] == f"What is {row['id']} + 1? Think for maximum {b} tokens."
    text = with_length_budgets(items_to_dataset(items, conversational=False), settings, seed=3)
    assert text[0]["prompt"] == f"What is 0 + 1? Think for maximum {budgets[0]} tokens."
    hidden = replace(settings, budget_in_prompt=False)
    plain = with_length_budgets(items_to_dataset(items), hidden, seed=3)
    assert plain[0]["prompt"][0]["content"] == "What is 0 + 1?"
    assert with_length_budgets(data, settings, seed=9)[BUDGET_COLUMN] == budgets  # kept


def test_budget_range_is_checked() -> None:
    run = RunContext(correctness_reward=4.0, max_completion_length=160, easy_threshold=0.8)
    with pytest.raises(TraacError, match=r"^l1_max\.budget_max: 10 is below l1_max\.budget_min 20"):
        L1MaxSettings(budget_min=20, budget_max=10).check(run)
    with pytest.raises(
        TraacError, match=r"^l1_max\.budget_max: 4000 exceeds max_completion_length"
    ):
        L1MaxSettings().resolved(run)  # the paper's budgets cannot fit a 160-token cap


# The formulas on their own

ALL_WRONG = [False] * 4

ALL_RIGHT = [True] * 4


def approx(values: list[float]):
    return pytest.approx(values, abs=1e-12)


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
