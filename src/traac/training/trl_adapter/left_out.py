"""Rows of a step that GRPO neither normalises nor trains on: dynamic sampling's dropped groups
and the rollouts a filtering method (GFPO) does not keep. The step decides them
(`StepResult.left_out`); this module applies the decision to TRL's tensors.

They leave before the normalisation: their rewards become NaN in the reward call, which TRL
treats as unscorable (out of every group mean and of the batch's standard deviation, advantage
0), as DAPO filters groups and GFPO selects rollouts before their advantages. Then they leave the
loss: their completion mask is zeroed and TRL's token count recounted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from traac.training.step.copy_rules import TRL_ROLLOUT_MASK


def leave_out(
    rewards: torch.Tensor,
    dropped: Sequence[bool] | None,
    retain: Callable[[list[float], list[int]], list[bool]] | None,
    lengths: torch.Tensor | None,
    weights: torch.Tensor,
) -> list[bool] | None:
    """Every process's rewards (rows x functions) with the dropped rows (`dropped`, every
    process's) and then the rows `retain` does not keep (from each row's weighted total, NaN
    for a dropped row, and its length, gathered) set to NaN, in place. Returns the rows
    `retain` keeps (None without a filter)."""
    if dropped is not None:
        rewards[torch.tensor(dropped, dtype=torch.bool, device=rewards.device)] = torch.nan
    if retain is None or lengths is None:
        return None
    totals = (rewards * weights.to(rewards.device)).nansum(dim=1)
    totals[torch.isnan(rewards).all(dim=1)] = torch.nan
    kept = [bool(k) for k in retain(totals.tolist(), lengths.tolist())]
    rewards[~torch.tensor(kept, device=rewards.device)] = torch.nan
    return kept


def mask_rows(
    output: dict[str, Any], rows: Sequence[bool], gather: Callable[[torch.Tensor], torch.Tensor]
) -> dict[str, Any]:
    """Left-out rows contribute nothing to the loss (policy term and KL): their completion mask
    and advantages are zeroed and the token count TRL normalises by is recounted, over TRL's
    tool mask too (every process calls this, so the `gather` matches)."""
    mask = output["completion_mask"]
    keep = torch.tensor([not d for d in rows], device=mask.device)
    output["completion_mask"] = mask * keep.unsqueeze(1).to(mask.dtype)
    output["advantages"] = output["advantages"] * keep.to(output["advantages"].dtype)
    loss_mask = output["completion_mask"] * output.get(TRL_ROLLOUT_MASK[1], 1)  # copies' think
    output["num_items_in_batch"] = gather(loss_mask.sum()).sum()
    return output
