"""Kimi k1.5 (arXiv:2501.12599 section 2.3.3): the group's min-max length reward."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from traac.compression.length_rewards import kimi_length_reward
from traac.training.methods.base import GroupReward, LengthMethod, MethodSettings


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
