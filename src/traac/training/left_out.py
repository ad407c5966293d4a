"""Rows of a step that GRPO neither normalises nor trains on: dynamic sampling's dropped groups
and the rollouts a filtering method (GFPO) does not keep.

They leave before the normalisation: their rewards become NaN in the reward call, which TRL
treats as unscorable (out of every group mean and of the batch's standard deviation, advantage
0), as DAPO filters groups and GFPO selects rollouts before their advantages. Then they leave the
loss: their completion mask is zeroed and TRL's token count recounted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from traac.training.trl_api import TRL_ROLLOUT_MASK


def leave_out(
    rewards: torch.Tensor,
    dropped: torch.Tensor | None,
    retain: Callable[[list[float], list[int]], list[bool]] | None,
    lengths: torch.Tensor | None,
    weights: torch.Tensor,
) -> torch.Tensor:
    """Every process's rewards (rows x functions) with the dropped rows (`dropped`, gathered)
    and then the rows `retain` does not keep (from each row's weighted total, NaN for a dropped
    row, and its length, gathered) set to NaN, in place."""
    if dropped is not None:
        rewards[dropped.bool()] = torch.nan
    if retain is not None and lengths is not None:
        totals = (rewards * weights.to(rewards.device)).nansum(dim=1)
        totals[torch.isnan(rewards).all(dim=1)] = torch.nan
        keep = torch.tensor(retain(totals.tolist(), lengths.tolist()), device=rewards.device)
        rewards[~keep] = torch.nan
    return rewards


def unscored(logged: Sequence[Sequence[float]], count: int, rank: int) -> list[bool]:
    """Which of one process's `count` rows were left out: NaN in every reward function of the
    call's log (`logged`: one row of every process's rewards per function)."""
    rows = np.asarray(logged, dtype=float)
    return np.isnan(rows).all(axis=0)[rank * count : (rank + 1) * count].tolist()


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
