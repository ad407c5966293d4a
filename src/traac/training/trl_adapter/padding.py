"""Forwards over the columns a micro-batch uses.

TRL pads every rollout of a generation batch to the batch's longest prompt (on the left) and
longest completion (on the right), then scores it in chunks of `per_device_train_batch_size`
rows: the reference's and the old policy's log-probs, and the loss's forward and backward, each
at the width of the longest of all rollouts. On a CPU, where a step's rollouts run 60 to 256
tokens, a chunk of four short ones still pays for the longest. Cutting each chunk to the
columns one of its rows attends to, and padding its log-probs back, leaves every unmasked
value as it was: the columns cut are masked out in every row, and rotary positions enter the
attention only as differences.

`length_rows` (`logprob_rows` in the config) goes further: the rows are sorted by the columns
they use and scored in chunks of that many, so that short rollouts share a chunk and no chunk
pays for a longer row than its own. Each row's values are the same computation at another
batch shape (float effects of the shape aside); they go back to the rows' own order, and the
loss's gradient flows through the reordering.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

# (input_ids, attention_mask, logits_to_keep) -> (log-probs, entropies or None, aux loss or None)
Forward = Callable[
    [torch.Tensor, torch.Tensor, int],
    tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None],
]


def used_columns(attention_mask: torch.Tensor, completion_width: int) -> tuple[int, int]:
    """The span `[first, end)` of columns some row attends to, keeping at least one prompt and
    one completion column (the last `completion_width` columns are the completion's)."""
    prompt_width = attention_mask.size(1) - completion_width
    used = attention_mask.any(dim=0).nonzero().flatten()
    first = min(int(used[0]), prompt_width - 1) if used.numel() else 0
    end = max(int(used[-1]) + 1, prompt_width + 1) if used.numel() else attention_mask.size(1)
    return first, end


def trimmed_forward(
    forward: Forward,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    logits_to_keep: int,
    batch_size: int | None,
    length_rows: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """`forward` on chunks of `batch_size` rows, each cut to its used columns; log-probs and
    entropies padded back to `logits_to_keep` with zeros (masked columns), aux losses averaged
    over the chunks (as TRL does). With `length_rows`, chunks of that many rows of similar
    length instead, in the rows' order afterwards."""
    if length_rows:
        return _by_length(forward, input_ids, attention_mask, logits_to_keep, length_rows)
    size = batch_size or input_ids.size(0)
    prompt_width = input_ids.size(1) - logits_to_keep
    logps, entropies, aux = [], [], []
    for start in range(0, input_ids.size(0), size):
        ids, mask = input_ids[start : start + size], attention_mask[start : start + size]
        first, end = used_columns(mask, logits_to_keep)
        keep = end - prompt_width
        lp, ent, loss = forward(ids[:, first:end], mask[:, first:end], keep)
        logps.append(F.pad(lp, (0, logits_to_keep - keep)))
        if ent is not None:
            entropies.append(F.pad(ent, (0, logits_to_keep - keep)))
        if loss is not None:
            aux.append(loss)
    return (
        torch.cat(logps, dim=0),
        torch.cat(entropies, dim=0) if entropies else None,
        torch.stack(aux).mean() if aux else None,
    )


def _by_length(
    forward: Forward,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    logits_to_keep: int,
    rows: int,
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """`trimmed_forward` over the rows sorted by their last used column, in chunks of `rows`."""
    columns = torch.arange(attention_mask.size(1), device=attention_mask.device)
    last = (attention_mask.bool() * (columns + 1)).amax(dim=1)  # 0: an empty row
    order = torch.sort(last, stable=True).indices
    logps, entropies, aux = trimmed_forward(
        forward, input_ids[order], attention_mask[order], logits_to_keep, rows
    )
    back = torch.argsort(order)
    return logps[back], None if entropies is None else entropies[back], aux
