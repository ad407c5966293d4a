"""The per-request sampler draws what `torch.multinomial` draws from each request's stream."""

from __future__ import annotations

import pytest
import torch
from transformers import TopPLogitsWarper

from traac.evaluation.generation import RowSampler


@pytest.mark.parametrize(("vocab", "top_p"), [(525, 1.0), (49152, 1.0), (525, 0.9)])
def test_row_sampler_draws_the_per_row_multinomial_tokens(vocab, top_p):
    seeds = [11, 5, 42, 7]
    sampler = RowSampler(1.0, top_p, seeds, "cpu")
    streams = [torch.Generator().manual_seed(s) for s in seeds]
    history = torch.zeros((3, 1), dtype=torch.long)
    rows = [2, 0, 3]  # row r decodes request rows[r]; request 1 has ended
    torch.manual_seed(0)
    for _ in range(20):
        logits = torch.randn(3, vocab) * 4
        kept = TopPLogitsWarper(top_p)(history, logits.clone()) if top_p < 1 else logits
        probs = torch.softmax(kept, dim=-1)
        expected = [
            int(torch.multinomial(probs[r], 1, generator=streams[i])) for r, i in enumerate(rows)
        ]
        assert sampler(history, logits, rows).tolist() == expected
