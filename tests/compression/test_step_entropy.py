"""Step entropy (arXiv:2508.03346) as a scorer: each token's score is the entropy of the full
next-token distribution that predicted it, read with the question in context; a step's score is
the sum over its tokens, and compression prunes the lowest."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from traac.compression.compression import Compressor, ScoreRequest, TokenScores, step_scores
from traac.compression.factory import build_compressor
from traac.compression.formats import ChatFormat
from traac.compression.segmentation import Step
from traac.compression.settings import CompressionSettings
from traac.compression.step_entropy import StepEntropyScorer
from traac.errors import TraacError


def entropy(logits: torch.Tensor) -> torch.Tensor:
    p = torch.softmax(logits.double(), dim=-1)
    return -(p * torch.log(p)).sum(dim=-1)


def test_token_scores_are_the_full_distributions_entropies(tiny_model, char_tokenizer) -> None:
    model, tok = tiny_model("llama"), char_tokenizer()
    scorer = StepEntropyScorer(model, tok, think_open="<think>")
    reasoning = "So 2+2 is 4. Wait, 4."
    probe = ChatFormat().probe_text(reasoning)
    (scores,) = scorer.score([ScoreRequest(reasoning, probe, "What is 2+2?<think>")])
    ids = tok("What is 2+2?<think>" + reasoning, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0]
    start = len(tok("What is 2+2?<think>", add_special_tokens=False)["input_ids"])
    inside = scores.offsets[:, 0] >= len("<think>")
    want = entropy(logits[start - 1 : -1]).numpy()
    np.testing.assert_allclose(scores.scores[inside], want, atol=1e-4)
    # A uniform distribution over the vocabulary has the largest entropy, log V.
    uniform = scorer.token_value(torch.zeros(2, 50))
    torch.testing.assert_close(uniform, torch.full((2,), float(np.log(50))))
    with pytest.raises(TraacError, match=r"step_entropy scorer: .*question in context"):
        scorer.score([ScoreRequest(reasoning, probe)])


def test_a_steps_entropy_is_the_sum_of_its_tokens() -> None:
    steps = [Step("ab", 0, 2), Step("cdef", 2, 6)]
    offsets = np.array([[k, k + 1] for k in range(6)])
    scores = TokenScores(offsets, np.array([1.0, 1.0, 0.5, 0.5, 0.5, 0.5]))
    assert step_scores(scores, steps, total=True).tolist() == [2.0, 2.0]
    assert step_scores(scores, steps).tolist() == [1.0, 0.5]  # the other scorers' mean


def test_the_factory_builds_it_and_compression_prunes_the_lowest_entropy_steps(
    tiny_model, char_tokenizer
) -> None:
    model, tok = tiny_model("qwen3"), char_tokenizer()
    settings = CompressionSettings(scorer="step_entropy")
    compressor = build_compressor(settings, model, tok)
    assert isinstance(compressor, Compressor)
    assert isinstance(compressor.scorer, StepEntropyScorer) and not compressor.scorer.gated
    reasoning = "First 2+2 is 4. Wait, check 2+2 again. So it is 4. Hmm, 4 indeed."
    (trace,) = compressor.score([reasoning], contexts=["What is 2+2?<think>"])
    assert len(trace.steps) >= 3
    result = compressor.compress(trace, tau=0.5)
    evicted = [k for k, kept in enumerate(result.kept) if not kept]
    assert evicted  # ungated: e = tau of the steps go
    order = [k for k in np.argsort(trace.scores, kind="stable") if trace.evictable[k]]
    assert evicted == sorted(order[: len(evicted)])  # the lowest-entropy steps
