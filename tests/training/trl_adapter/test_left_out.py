"""Left-out rows: NaN rewards before GRPO's normalisation (dropped first, then a filter on the
others' totals, whose choice is returned for the step's result), and masked out of the loss."""

from __future__ import annotations

import math

import torch

from traac.training.trl_adapter.left_out import leave_out, mask_rows


def test_dropped_rows_then_the_filters_choice_become_nan() -> None:
    rewards = torch.tensor([[4.0, 1.0], [0.0, 1.0], [4.0, 0.5], [4.0, 1.0]])
    seen: list = []

    def retain(totals: list[float], lengths: list[int]) -> list[bool]:
        seen.append((totals, lengths))
        return [False, True, True, False]

    kept = leave_out(rewards, [True, False, False, False], retain, torch.tensor([5, 6, 7, 8]),
                     torch.tensor([1.0, 2.0]))  # fmt: skip
    ((totals, lengths),) = seen
    assert math.isnan(totals[0]) and totals[1:] == [2.0, 5.0, 6.0] and lengths == [5, 6, 7, 8]
    assert kept == [False, True, True, False]
    assert torch.isnan(rewards).all(dim=1).tolist() == [True, False, False, True]
    assert rewards[1].tolist() == [0.0, 1.0]


def test_nothing_left_out_leaves_the_rewards() -> None:
    rewards = torch.tensor([[4.0, 1.0], [0.0, 1.0]])
    out = rewards.clone()
    assert leave_out(out, None, None, None, torch.ones(2)) is None
    assert leave_out(out, [False, False], None, None, torch.ones(2)) is None
    assert torch.equal(out, rewards)


def test_masked_rows_leave_the_loss_and_the_token_count() -> None:
    output = {
        "completion_mask": torch.ones(3, 4, dtype=torch.long),
        "advantages": torch.tensor([1.0, 2.0, 3.0]),
        "num_items_in_batch": torch.tensor(12),
    }
    out = mask_rows(output, [False, True, False], lambda t: t)
    assert out["completion_mask"].sum(dim=1).tolist() == [4, 0, 4]
    assert out["advantages"].tolist() == [1.0, 0.0, 3.0] and out["num_items_in_batch"] == 8
