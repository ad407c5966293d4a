"""Step entropy as a TRAAC scorer (`scorer: step_entropy`): Li et al., "Compressing
Chain-of-Thought in LLMs via Step Entropy", arXiv:2508.03346.

A step's entropy is the sum of the entropies of the next-token distributions that produced its
tokens, read from the policy with the question in context; the steps of lowest entropy carry the
least information and are pruned first. In TRAAC they take the attention probe's place: the
lowest-entropy e = tau of the steps are evicted (no uniformity gate, as for the other policy
scorers). One forward, no attention weights: cheaper than the probe, which needs eager
attention.
"""

from __future__ import annotations

import torch

from traac.compression.scoring import PolicyScorer


class StepEntropyScorer(PolicyScorer):
    """Each token's score is the entropy (nats) of the full next-token distribution that
    predicted it; a step's is the sum over its tokens (`sums_steps`)."""

    name = "step_entropy"
    sums_steps = True

    def token_value(self, logits: torch.Tensor) -> torch.Tensor:
        logp = torch.log_softmax(logits.float(), dim=-1)
        return -(logp.exp() * logp).sum(dim=-1)
