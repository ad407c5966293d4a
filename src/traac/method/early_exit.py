"""The authors' two oracle compressions, as `CompressionResult`s: what a trace becomes once its
first correct step is known (`traac.method.first_correct`, which reads the label).

- `early_exit`: keep the think block up to and including the first step whose answer the
  verifier accepts; nothing is cut when no step's is. The ceiling for how much overthinking a
  compression can remove.
- `early_exit_attention_weights`: keep that prefix whole and compress only the rest with the
  attention probe at the bin's tau (`with_head` joins the prefix to the rest's compression).

The authors (their `get_first_correct_answer_chain`) split the think block on blank lines;
traac uses its own steps (`split_steps`), the units every other compression here evicts.
"""

from __future__ import annotations

import numpy as np

from traac.method.compression import CompressionResult, count_tokens
from traac.method.first_correct import FirstCorrect
from traac.method.segmentation import Step

EARLY_EXIT_MODES = ("early_exit", "early_exit_attention_weights")


def early_exit(split: FirstCorrect, tokenizer: object) -> CompressionResult:
    """The reasoning cut after its first correct step (unchanged when it has none, or when
    that step is its last). Steps are the reasoning's own; scores are not used (zeros)."""
    tokens = count_tokens(tokenizer, split.reasoning)
    if split.index is None or not split.tail.strip():
        return CompressionResult.unchanged(split.reasoning, tokens)
    steps = list(split.steps)
    kept = [k <= split.index for k in range(len(steps))]
    fraction = 1 - sum(kept) / len(steps)
    head = split.head
    return CompressionResult(
        split.reasoning, steps, np.zeros(len(steps)), kept, 1.0, fraction, head, tokens,
        count_tokens(tokenizer, head),
    )  # fmt: skip


def with_head(split: FirstCorrect, tail: CompressionResult, tokenizer: object) -> CompressionResult:
    """The whole reasoning from its kept prefix (`split.head`, every step kept) and the
    compression of the rest (`tail`, a result on `split.tail`); offsets shift by the cut. The
    uniformity and eviction fraction are the tail's (the prefix was never scored)."""
    cut = split.cut
    head_steps = list(split.steps[: split.index + 1]) if split.index is not None else []
    steps = head_steps + [Step(s.text, s.start + cut, s.end + cut) for s in tail.steps]
    kept = [True] * len(head_steps) + list(tail.kept)
    scores = np.concatenate([np.zeros(len(head_steps)), np.asarray(tail.scores, dtype=float)])
    text = split.head + tail.text
    tokens = count_tokens(tokenizer, split.reasoning)
    after = tokens if text == split.reasoning else count_tokens(tokenizer, text)
    return CompressionResult(
        split.reasoning, steps, scores, kept, tail.uniformity, tail.eviction_fraction, text,
        tokens, after, tail.rule_uniformity,
    )  # fmt: skip
