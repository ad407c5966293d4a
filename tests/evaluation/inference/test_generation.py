"""The per-request sampler: each request draws from its own stream, whatever rows it shares a
step with, and the draws follow the distribution."""

from __future__ import annotations

import pytest
import torch
from transformers import TopPLogitsWarper

from traac.evaluation.inference.generation import RowSampler


@pytest.mark.parametrize(("vocab", "top_p"), [(525, 1.0), (49152, 1.0), (525, 0.9)])
def test_a_request_draws_the_same_tokens_whichever_rows_share_its_step(vocab, top_p):
    seeds = [11, 5, 42, 7]
    together = RowSampler(1.0, top_p, seeds)
    alone = RowSampler(1.0, top_p, seeds)
    history = torch.zeros((3, 1), dtype=torch.long)
    rows = [2, 0, 3]  # row r decodes request rows[r]; request 1 has ended
    torch.manual_seed(0)
    for _ in range(20):
        logits = torch.randn(3, vocab) * 4
        drawn = together(history, logits, rows).tolist()
        assert drawn == [int(alone(history[r : r + 1], logits[r : r + 1], [i])) for r, i in
                         enumerate(rows)]  # fmt: skip
        if top_p < 1:  # never a token outside the nucleus
            kept = TopPLogitsWarper(top_p)(history, logits.clone())
            assert all(kept[r, t] > -torch.inf for r, t in enumerate(drawn))


def test_the_draws_follow_the_distribution_and_skip_zero_mass_tokens():
    probs = torch.tensor([0.0, 0.5, 0.0, 0.3, 0.2, 0.0])
    logits = probs.log()[None].expand(4000, -1)  # zero mass: -inf logits
    sampler = RowSampler(1.0, 1.0, range(4000))
    drawn = sampler(torch.zeros((4000, 1), dtype=torch.long), logits)
    counts = torch.bincount(drawn, minlength=6) / 4000
    assert counts[[0, 2, 5]].sum() == 0
    # binomial standard deviations at n=4000 are under 0.008; 4 of them
    torch.testing.assert_close(counts, probs, rtol=0, atol=0.032)


def test_greedy_takes_the_argmax_and_nan_logits_raise():
    logits = torch.tensor([[0.1, 2.0, -1.0], [3.0, 0.0, 0.0]])
    history = torch.zeros((2, 1), dtype=torch.long)
    assert RowSampler(0.0, 1.0, [1, 2])(history, logits).tolist() == [1, 0]
    with pytest.raises(RuntimeError, match="NaN"):
        RowSampler(1.0, 1.0, [1, 2])(history, torch.full((2, 3), float("nan")))
