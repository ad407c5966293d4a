"""TRAAC and its ablations as methods: TRAAC's own rewards (`TraacRewards`), with or without
compression and difficulty bins, and no settings of their own (their fields are
`TRAACConfig`'s: the compression settings, `difficulty`, the reward weights)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from traac.training.methods.base import TRAAC_REWARDS, MethodRun, RunContext


@dataclass(frozen=True)
class TraacMethod:
    """One of TRAAC's own methods: which of TRAAC's rewards it sums, whether the step
    compresses right rollouts and re-answers them (what it adds to the group), and whether
    prompts are binned by pass rate (else every prompt falls in the one bin `all`)."""

    name: str  # the `mode` that trains it
    help: str
    compresses: bool  # right rollouts are compressed and re-answered (docs/method.md#step, 4-6)
    bins: bool
    rewards: tuple[str, ...]  # the reward functions TRL sums, in this order
    settings: ClassVar[None] = None  # no settings of its own
    compare: ClassVar[tuple[tuple[str, dict[str, Any]], ...]] = ()  # its variants: variants.py

    def run_of(self, source: Any, run: RunContext) -> MethodRun | None:
        """No settings of its own to resolve."""
        return None


TRAAC = TraacMethod("traac", "difficulty-aware attentive compression", True, True, TRAAC_REWARDS)
CR = TraacMethod("cr", "correctness only", False, False, TRAAC_REWARDS[:1])
CR_LR = TraacMethod("cr_lr", "+format+length, one bin, no compression", False, False,
                    TRAAC_REWARDS)  # fmt: skip
# The control the paper never ran: TRAAC less compression, so that what attentive compression
# adds over difficulty calibration is one contrast (docs/method.md#modes).
NO_COMPRESSION = TraacMethod(
    "traac_no_compression",
    "TRAAC's bins, per-bin length scales and windows; no compression",
    False,
    True,
    TRAAC_REWARDS,
)
NO_DIFFICULTY = TraacMethod(
    "compression_no_difficulty", "one bin, difficulty.single_tau", True, False, TRAAC_REWARDS
)
