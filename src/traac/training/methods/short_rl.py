"""Short-RL (arXiv:2505.12284, lblankl/Short-RL): Kimi's min-max length reward made lazy. It pays
right answers only, spares those within a tolerance of the group's shortest right answer, and
is applied only on steps whose accuracy is near the best seen so far.

As the authors' `LengthRScorer` (`deepscaler/deepscaler/rewards/ShortRL.py`) computes it per
training batch: the batch's accuracy `acc` (right rollouts over all of them) raises the run's
running maximum `MaxACC` (from 0), and the length reward is added only when
`acc >= MaxACC - acc_tolerance`. Per group, over its right rollouts only, `min` and `max` are
their shortest and longest lengths; a right rollout of length `n` earns 0.5 when
`n <= min + length_tolerance`, else `0.5 - (n - min) / (max - min + 1e-5)`; a wrong one 0.
traac's batch is what one call of the reward function scores (TRL's generation batch, every
process's); the running maximum is the method's state, saved in the checkpoint.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from traac.compression.settings import check_positive
from traac.training.methods.base import (
    GroupReward,
    LengthMethod,
    MethodSettings,
    RunContext,
    check_number,
    checked_count,
    checked_group,
)
from traac.training.methods.scale import PaperTokens

EPS = 1e-5  # the authors' `max_len - min_len + 1e-5`


@dataclass(frozen=True)
class ShortRLSettings(MethodSettings):
    BLOCK, FLAT_PREFIX = "short_rl", "short_rl_"
    NONNEGATIVE = ("acc_tolerance",)

    length_tolerance: int = field(
        default=100,
        metadata={"help": "short_rl: a right answer at most this many tokens longer than its "
                  "group's shortest right answer keeps the full 0.5 (the authors' math 100)."},
    )  # fmt: skip
    acc_tolerance: float = field(
        default=0.05,
        metadata={"help": "short_rl: the length reward applies on a batch whose accuracy is at "
                  "least the best so far minus this (the authors' 0.05)."},
    )  # fmt: skip

    def check(self, run: RunContext) -> None:
        super().check(run)
        check_positive(
            f"{self.BLOCK}.length_tolerance", self.length_tolerance, integer=True, zero=True
        )


def short_rl_length_reward(
    lengths: Sequence[int], correct: Sequence[bool], *, tolerance: int
) -> list[float]:
    """Short-RL's length reward of one group: Kimi's `0.5 - (n - min) / (max - min + 1e-5)`
    over the right rollouts' lengths, 0.5 within `tolerance` tokens of their shortest, 0 for a
    wrong rollout."""
    lengths, correct = checked_group("short_rl", lengths, correct)
    tolerance = checked_count("short_rl tolerance", tolerance, minimum=0)
    right = [n for n, ok in zip(lengths, correct, strict=True) if ok]
    if not right:
        return [0.0] * len(lengths)
    low, high = min(right), max(right)
    return [
        (0.5 if n <= low + tolerance else 0.5 - (n - low) / (high - low + EPS)) if ok else 0.0
        for n, ok in zip(lengths, correct, strict=True)
    ]


def short_rl_applies(accuracy: float, best: float, tolerance: float) -> bool:
    """Whether a batch of `accuracy` gets the length reward, `best` the running maximum with
    this batch's accuracy included."""
    check_number("short_rl acc_tolerance", tolerance, positive=False)
    return accuracy >= best - tolerance


class ShortRLReward(GroupReward):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.best_accuracy = 0.0  # the authors' MaxACC

    def state_dict(self) -> dict[str, Any]:
        return {"short_rl_best_accuracy": self.best_accuracy}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best_accuracy = state.get("short_rl_best_accuracy", self.best_accuracy)

    def short_rl_length_reward(
        self, completions: list[Any], completion_ids: list[Sequence[int]], **kwargs: Any
    ) -> list[float]:
        """The batch's accuracy against the best so far, then each group's lazy reward."""
        s = self.settings
        groups, offset, count = self.groups(completions, completion_ids, kwargs)
        verdicts = [ok for _, correct in groups for ok in correct]
        accuracy = sum(verdicts) / len(verdicts)
        self.best_accuracy = max(self.best_accuracy, accuracy)
        applies = short_rl_applies(accuracy, self.best_accuracy, s.acc_tolerance)
        self.log(kwargs, "short_rl/accuracy", accuracy)
        self.log(kwargs, "short_rl/best_accuracy", self.best_accuracy)
        self.log(kwargs, "short_rl/applied", float(applies))
        out: list[float] = []
        for lengths, correct in groups:
            if applies:
                out += short_rl_length_reward(lengths, correct, tolerance=s.length_tolerance)
            else:
                out += [0.0] * len(lengths)
        return [self.scale * r for r in out[offset : offset + count]]


METHOD = LengthMethod(
    name="short_rl",
    paper="Short-RL, arXiv:2505.12284 (lblankl/Short-RL)",
    help="Short-RL: Kimi's length reward on right answers, beyond a tolerance, once accuracy "
    "is stable",
    correctness=3.5,  # the authors' math answer score: +2 right, -1.5 wrong
    reward="short_rl_length_reward",
    settings=ShortRLSettings,
    make=ShortRLReward,
    values=lambda s, run: (
        f"right answers: 0.5 within {s.length_tolerance} tokens of the shortest right, "
        f"else 0.5 - (l - min) / (max - min); on batches within {s.acc_tolerance:g} of "
        "the best accuracy so far"
    ),
    compare=(
        (
            "Short-RL",
            {"mode": "short_rl", "short_rl": {"length_tolerance": PaperTokens(100)}},
        ),
    ),
)
