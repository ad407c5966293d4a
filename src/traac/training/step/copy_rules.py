"""The compressed copies (docs/method.md#copies): which are made, what their think block holds,
and what they are trained on, one recipe field each, validated once.

A compressed copy is a think block the policy did not write in that context (the kept steps of
an original) plus an answer it sampled after it (docs/method.md#step, 5).

- `copy_pool`: `evicted` (the paper's text: a rollout that lost a step) or `all_correct` (the
  authors' code: every right, well-formed rollout is re-answered, a step evicted or not).
- `copy_tags`: `single`, or `double`, the authors' accident: their kept text still holds the
  probe's opener (where the response opens the block) and closer, and is wrapped in tags again.
- `copy_loss`: `full` (the paper: the policy learns to write the pruned reasoning itself) or
  `answer_only` (beyond the paper: only the re-answer is trained on). The think block's tokens
  get TRL's tool mask 0 (`env_mask` from `rollout_func`), which keeps them in the forward's
  attention and takes them out of everything TRL aggregates a loss over: the clipped policy
  term, the KL term (added per token before the mask), the normaliser (`loss_type: grpo`
  divides each row by its own unmasked tokens, `dapo` the batch by their count) and the
  entropy metrics.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from traac.compression.compression import CompressionResult
from traac.compression.formats import ChatFormat
from traac.compression.settings import check_choice

COPY_LOSSES = ("full", "answer_only")
COPY_LOSS_WORDS = {"full": "in full", "answer_only": "their re-answers only, think blocks masked"}
COPY_POOLS = ("evicted", "all_correct")
COPY_POOL_WORDS = {"evicted": "the candidates that lost a step",
                   "all_correct": "every right, well-formed rollout"}  # fmt: skip
COPY_TAGS = ("single", "double")
# The key of `rollout_func`'s output TRL reads as its tool mask (`copy_loss: answer_only`): a
# token under 0 is attended to but left out of the loss; the batch then carries `tool_mask`.
TRL_ROLLOUT_MASK = ("env_mask", "tool_mask")


@dataclass
class CopySettings:
    """Which copies are made, their tags, and how they enter the loss; the settings of the
    modes that compress declare these fields (`traac.training.methods.traac.TraacSettings`)."""

    copy_loss: str | None = field(
        default=None,
        metadata={"help": "full (the paper and the authors' code: a compressed copy is trained "
                  "on in full, its think block included) | answer_only (beyond the paper: its "
                  "think block is masked from the loss, policy and KL terms and the token count "
                  "alike, and only the re-answer is trained on). Unset: the preset's (full). A "
                  "mode that makes no copies leaves it alone.", "choices": COPY_LOSSES},
    )  # fmt: skip
    copy_pool: str | None = field(
        default=None,
        metadata={"help": "Which right, well-formed rollouts are re-answered and pooled: evicted "
                  "(those that lost a step: the paper's text) | all_correct (every one, a step "
                  "evicted or not: the authors' code). Unset: the preset's (paper: evicted, "
                  "authors: all_correct).", "choices": COPY_POOLS},
    )  # fmt: skip
    copy_tags: str = field(
        default="single",
        metadata={"help": "single | double (the authors' code's accident: a copy's think block "
                  "carries two openers and two closers, which costs it format reward).",
                  "choices": COPY_TAGS},
    )  # fmt: skip

    def __post_init__(self) -> None:
        if self.copy_loss is not None:
            check_choice("copy_loss", self.copy_loss, COPY_LOSSES)
        if self.copy_pool is not None:
            check_choice("copy_pool", self.copy_pool, COPY_POOLS)
        check_choice("copy_tags", self.copy_tags, COPY_TAGS)

    @property
    def masks_think(self) -> bool:
        """A copy's think block is masked from the loss (`answer_only`)."""
        return self.copy_loss == "answer_only"

    @property
    def copies_whole(self) -> bool:
        """A candidate nothing was evicted from is re-answered too (`all_correct`)."""
        return self.copy_pool == "all_correct"

    @property
    def double_tags(self) -> bool:
        """A copy's think block keeps the probe's tags inside its own (`double`)."""
        return self.copy_tags == "double"


def copy_think(
    result: CompressionResult, chat_format: ChatFormat, copies: CopySettings
) -> str | None:
    """What a candidate's copy re-answers from: the text after the prompt, up to and with the
    closer (its think block), or None when `copies` makes no copy of it (`copy_pool: evicted`:
    nothing was evicted). With `copy_tags: double` the kept text keeps the probe's opener (where
    the response opens the block) and closer inside the block, as the authors' copies do."""
    if not result.compressed and not copies.copies_whole:
        return None
    text = result.text
    if copies.double_tags:
        opener = "" if chat_format.opener_in_prompt else chat_format.think_open
        text = f"{opener}{text}{chat_format.think_close}"
    return chat_format.answer_prefix(text)


def loss_masks(lengths: Sequence[int], think_prefixes: Sequence[int]) -> list[list[int]]:
    """Per completion of `lengths[i]` tokens, 0 over its first `think_prefixes[i]` (a copy's
    think block, not sampled in its context) and 1 after: TRL's tool mask."""
    return [
        [0] * min(think, length) + [1] * max(length - think, 0)
        for length, think in zip(lengths, think_prefixes, strict=True)
    ]
