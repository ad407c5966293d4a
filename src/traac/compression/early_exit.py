"""The compressions that know a trace's first correct step (`traac.compression.first_correct`, which
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
`COMPRESSION_KINDS` is the table of every `compression`, the scorer's alone (`scorer`) included.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from traac.compression.compression import CompressionResult, count_tokens
from traac.compression.first_correct import FirstCorrect
from traac.compression.segmentation import Step


@dataclass(frozen=True)
class CompressionKind:
    """One value of the compressing modes' `compression`, by what it does: everything outside
    this module asks this, never the kind's name (a recipe's value stays the name)."""

    name: str
    prefix: bool  # it finds each trace's first correct step and keeps it (the verifier reads it)
    scores: bool  # the scorer runs on what follows (early_exit cuts with no forward)
    needs_attention: bool  # that scorer must be the attention probe's
    keeps_unanswered: bool  # a trace with no accepted step is kept whole, not scored from start


# Every compression: the one table (`TraacSettings.compression_kind` looks a recipe's up).
COMPRESSION_KINDS: dict[str, CompressionKind] = {
    kind.name: kind
    for kind in (
        CompressionKind("scorer", False, True, False, False),
        CompressionKind("early_exit", True, False, False, False),
        CompressionKind("early_exit_attention_weights", True, True, True, False),
        CompressionKind("after_answer", True, True, False, True),
    )
}
COMPRESSIONS = tuple(COMPRESSION_KINDS)


def kept_whole(split: FirstCorrect, tokenizer: object) -> CompressionResult:
    """The reasoning with nothing evicted."""
    return CompressionResult.unchanged(split.reasoning, count_tokens(tokenizer, split.reasoning))


def scored_part(split: FirstCorrect, kind: CompressionKind) -> str:
    """What the scorer may evict under compression `kind`: the text after the first correct
    step; with no such step, the whole reasoning (`early_exit_attention_weights`) or nothing
    (`after_answer`)."""
    if kind.keeps_unanswered and split.index is None:
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
