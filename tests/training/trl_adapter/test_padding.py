"""Forwards cut to the columns a chunk uses give TRL's own log-probs and entropies, at the
widths the chunk needs."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from accelerate import Accelerator
from trl import GRPOTrainer
from trl.trainer import add_fused_lm_head

from traac.training.trl_adapter.padding import trimmed_forward, used_columns


def test_used_columns_keep_one_prompt_and_one_completion_column() -> None:
    mask = torch.tensor([[0, 0, 1, 1, 1, 0, 0], [0, 1, 1, 1, 1, 1, 0]])
    assert used_columns(mask, completion_width=3) == (1, 6)  # prompt 4 wide, completion 3
    assert used_columns(mask[:1], completion_width=3) == (2, 5)
    assert used_columns(torch.tensor([[1, 1, 0, 0]]), completion_width=2) == (0, 3)


def batch(lengths: list[tuple[int, int]], prompt_width: int, completion_width: int):
    """Rows of (prompt, completion) lengths, left- and right-padded as TRL pads them."""
    torch.manual_seed(0)
    ids = torch.randint(3, 60, (len(lengths), prompt_width + completion_width))
    mask = torch.zeros_like(ids)
    for row, (p, c) in enumerate(lengths):
        mask[row, prompt_width - p : prompt_width + c] = 1
    return ids.masked_fill(mask == 0, 0), mask


@pytest.mark.parametrize("chunk", [1, 2, 4])
def test_trimmed_forward_equals_trls_forward(tiny_model, chunk: int) -> None:
    model = tiny_model(vocab_size=64)
    add_fused_lm_head(model, temperature=1.0, outputs=("log_probs", "entropy"))  # as TRL does
    trl = SimpleNamespace(accelerator=Accelerator(cpu=True))
    # Rows 0 and 1 are short: a chunk of the two runs 4 + 3 columns, not 9 + 12.
    lengths = [(3, 2), (4, 3), (9, 12), (6, 7)]
    ids, mask = batch(lengths, prompt_width=9, completion_width=12)
    widths: list[int] = []

    def forward(i, m, keep):
        widths.append(i.size(1))
        return GRPOTrainer._get_per_token_logps_and_entropies(trl, model, i, m, keep, None, True)

    theirs, their_entropy, _ = GRPOTrainer._get_per_token_logps_and_entropies(
        trl, model, ids, mask, 12, chunk, True
    )
    ours, our_entropy, aux = trimmed_forward(forward, ids, mask, 12, chunk)
    completion = mask[:, 9:].bool()
    assert ours.shape == theirs.shape and aux is None
    torch.testing.assert_close(ours[completion], theirs[completion], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(our_entropy[completion], their_entropy[completion])
    assert (ours[~completion] == 0).all()
    if chunk == 2:
        assert widths == [4 + 3, 9 + 12]
    if chunk == 1:
        assert widths == [3 + 2, 4 + 3, 9 + 12, 6 + 7]


def test_length_sorted_chunks_give_each_row_its_own_values_and_gradient(tiny_model) -> None:
    """`length_rows`: the rows scored shortest first, in chunks of that many, each cut to its
    own longest row; every row's log-probs (and their gradient) come back in the row's place."""
    model = tiny_model(vocab_size=64)
    add_fused_lm_head(model, temperature=1.0, outputs=("log_probs", "entropy"))
    trl = SimpleNamespace(accelerator=Accelerator(cpu=True))
    # A long row between two short ones: batch order pairs each short row with a long one.
    lengths = [(3, 2), (9, 12), (4, 3), (6, 7)]
    ids, mask = batch(lengths, prompt_width=9, completion_width=12)
    widths: list[int] = []

    def forward(i, m, keep):
        widths.append(i.size(1))
        return GRPOTrainer._get_per_token_logps_and_entropies(trl, model, i, m, keep, None, True)

    plain, plain_entropy, _ = trimmed_forward(forward, ids, mask, 12, 1)
    widths.clear()
    ours, our_entropy, _ = trimmed_forward(forward, ids, mask, 12, None, length_rows=2)
    assert widths == [4 + 3, 9 + 12]  # (rows 0, 2), then (rows 3, 1)
    completion = mask[:, 9:].bool()
    torch.testing.assert_close(ours[completion], plain[completion], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(our_entropy[completion], plain_entropy[completion])
    assert (ours[~completion] == 0).all()
    # the loss's gradient reaches the weights through the reordering, as the plain one does
    weight = next(model.parameters())
    grads = []
    for rows in (None, 2):
        model.zero_grad()
        lp, _, _ = trimmed_forward(forward, ids, mask, 12, 1, length_rows=rows)
        lp[completion].sum().backward()
        grads.append(weight.grad.clone())
    torch.testing.assert_close(grads[0], grads[1], atol=1e-5, rtol=1e-4)
