"""What the compressed copies are trained on (docs/method.md#copies): one recipe field each,
validated once, and the loss mask that follows from it.

A compressed copy is a think block the policy did not write in that context (the kept steps of
an original) plus an answer it sampled after it (docs/method.md#step, 5). The paper trains on
the copy in full, so the policy learns to write the pruned reasoning itself. `copy_loss:
answer_only` (beyond the paper) trains on the re-answer alone: the think block's tokens get
TRL's tool mask 0 (`env_mask` from `rollout_func`), which keeps them in the forward's attention
and takes them out of everything TRL aggregates a loss over: the clipped policy term, the KL
term (added per token before the mask), the normaliser (`loss_type: grpo` divides each row by
its own unmasked tokens, `dapo` the batch by their count) and the entropy metrics.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from traac.errors import TraacError
from traac.method.settings import check_choice

COPY_LOSSES = ("full", "answer_only")
COPY_LOSS_WORDS = {"full": "in full", "answer_only": "their re-answers only, think blocks masked"}


@dataclass
class CopySettings:
    """How the compressed copies enter the loss; `TRAACConfig` inherits it."""

    copy_loss: str = field(
        default="full",
        metadata={"help": "full (the paper: a compressed copy is trained on in full, its think "
                  "block included) | answer_only (beyond the paper: its think block is masked "
                  "from the loss, policy and KL terms and the token count alike, and only the "
                  "re-answer is trained on).", "choices": COPY_LOSSES},
    )  # fmt: skip

    def __post_init__(self) -> None:
        check_choice("copy_loss", self.copy_loss, COPY_LOSSES)

    def check_copies(self, compresses: bool, mode: str) -> None:
        """The copy settings against the mode: a mode that makes no copies takes none."""
        if self.copy_loss != "full" and not compresses:
            raise TraacError(
                f"copy_loss: {self.copy_loss} acts on compressed copies, which mode {mode} does "
                "not make; set copy_loss full or a mode that compresses (traac, "
                "compression_no_difficulty)"
            )


def loss_masks(lengths: Sequence[int], think_prefixes: Sequence[int]) -> list[list[int]]:
    """Per completion of `lengths[i]` tokens, 0 over its first `think_prefixes[i]` (a copy's
    think block, not sampled in its context) and 1 after: TRL's tool mask."""
    return [
        [0] * min(think, length) + [1] * max(length - think, 0)
        for length, think in zip(lengths, think_prefixes, strict=True)
    ]
