"""L1-Max: each row's budget read from its column, and written into the rows and prompts."""

from __future__ import annotations

from dataclasses import replace

import pytest

from traac.common.items import Item
from traac.data.training import items_to_dataset
from traac.errors import TraacError
from traac.training.methods.base import RunContext
from traac.training.methods.l1_max import BUDGET_COLUMN, L1MaxSettings, with_length_budgets


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
