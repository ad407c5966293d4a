"""The compressions that know a trace's first correct step (`traac.method.first_correct`, which
reads the label), as `CompressionResult`s: the authors' two oracles and one of traac's.

- `early_exit`: keep the think block up to and including the first step whose answer the
  verifier accepts; nothing is cut when no step's is. The ceiling for how much overthinking a
  compression can remove.
- `early_exit_attention_weights`: keep that prefix whole and compress only the rest with the
  attention probe at the bin's tau (`with_head` joins the prefix to the rest's compression).
- `after_answer` (beyond the paper): the same, except that a trace with no accepted step is kept
  whole (`kept_whole`) rather than compressed from its start, so no step before the answer is
  ever evicted: a copy loses only re-checks after the answer and can train its think block.

The authors (their `get_first_correct_answer_chain`) split the think block on blank lines;
traac uses its own steps (`split_steps`), the units every other compression here evicts.
"""

from __future__ import annotations

import numpy as np

from traac.method.compression import CompressionResult, count_tokens
from traac.method.first_correct import FirstCorrect
from traac.method.segmentation import Step

EARLY_EXIT_MODES = ("early_exit", "early_exit_attention_weights")
AFTER_ANSWER = "after_answer"
PREFIX_COMPRESSIONS = (*EARLY_EXIT_MODES, AFTER_ANSWER)  # those that find the first correct step


def kept_whole(split: FirstCorrect, tokenizer: object) -> CompressionResult:
    """The reasoning with nothing evicted."""
    return CompressionResult.unchanged(split.reasoning, count_tokens(tokenizer, split.reasoning))


def scored_part(split: FirstCorrect, compression: str) -> str:
    """What the scorer may evict from under `compression`: the text after the first correct
    step; with no such step, the whole reasoning (`early_exit_attention_weights`) or nothing
    (`after_answer`)."""
    if compression == AFTER_ANSWER and split.index is None:
        return ""
    return split.tail


def early_exit(split: FirstCorrect, tokenizer: object) -> CompressionResult:
    """The reasoning cut after its first correct step (unchanged when it has none, or when
    that step is its last). Steps are the reasoning's own; scores are not used (zeros)."""
    if split.index is None or not split.tail.strip():
        return kept_whole(split, tokenizer)
    tokens = count_tokens(tokenizer, split.reasoning)
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
