"""Kimi k1.5 (arXiv:2501.12599 section 2.3.3): the group's min-max length reward."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from traac.training.methods.base import (
    GroupReward,
    LengthMethod,
    MethodSettings,
    check_number,
    checked_group,
)


def kimi_length_reward(
    lengths: Sequence[int], correct: Sequence[bool], *, weight: float = 1.0
) -> list[float]:
    """Kimi k1.5's length reward: `lambda` for a right rollout, `min(0, lambda)` for a wrong one.

    Kimi Team, "Kimi k1.5: Scaling Reinforcement Learning with LLMs", arXiv:2501.12599,
    section 2.3.3 (Length Penalty): `lambda = 0.5 - (len(i) - min_len) / (max_len - min_len)`
    over the k sampled responses of the problem, so the shortest gets +0.5 and the longest -0.5;
    wrong answers are never rewarded for being short, only penalised for being long. When
    `max_len = min_len` the paper sets the length reward to zero for all responses.

    The paper adds the length reward "to the original reward with a weighting parameter" and
    gives no value for it; `weight` defaults to 1.0, the unweighted `len_reward`. The paper also
    warms the penalty up (no length penalty first, then a constant one): that schedule belongs to
    the trainer, which sets `weight` per step.
    """
    lengths, correct = checked_group("kimi", lengths, correct)
    check_number("kimi weight", weight, positive=False)
    low, high = min(lengths), max(lengths)
    if high == low:
        return [0.0] * len(lengths)
    out: list[float] = []
    for n, ok in zip(lengths, correct, strict=True):
        lam = 0.5 - (n - low) / (high - low)
        out.append(weight * (lam if ok else min(0.0, lam)))
    return out


@dataclass(frozen=True)
class KimiSettings(MethodSettings):
    BLOCK, FLAT_PREFIX = "kimi", "kimi_"
    NONNEGATIVE = ("weight",)

    weight: float = field(
        default=1.0, metadata={"help": "kimi: weight of the length reward (paper gives none)."}
    )


class KimiReward(GroupReward):
    def kimi_length_reward(
        self, completions: list[Any], completion_ids: list[Sequence[int]], **kwargs: Any
    ) -> list[float]:
        weight = self.settings.weight
        return self.per_group(
            completions,
            completion_ids,
            kwargs,
            lambda n, ok: kimi_length_reward(n, ok, weight=weight),
        )


METHOD = LengthMethod(
    name="kimi",
    paper="Kimi k1.5, arXiv:2501.12599 section 2.3.3",
    help="Kimi k1.5 min-max length reward",
    correctness=1.0,  # binary correctness reward + weighted len_reward
    reward="kimi_length_reward",
    settings=KimiSettings,
    make=KimiReward,
    values=lambda s, run: (
        f"weight {s.weight:g} x (0.5 - (l - min) / (max - min)), wrong rollouts capped at 0"
    ),
    compare=(("Kimi k1.5", {"mode": "kimi"}),),
)
