"""ShorterBetter (arXiv:2504.21370): the distance to the group's shortest right length."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from traac.compression.length_rewards import shorterbetter_length_reward
from traac.training.methods.base import GroupReward, LengthMethod, MethodSettings
from traac.training.methods.scale import PerPaperToken


@dataclass(frozen=True)
class ShorterBetterSettings(MethodSettings):
    BLOCK, FLAT_PREFIX = "shorterbetter", "shorterbetter_"
    POSITIVE = ("beta",)

    beta: float = field(
        default=0.001, metadata={"help": "shorterbetter: beta per token (authors' 0.001)."}
    )


class ShorterBetterReward(GroupReward):
    def shorterbetter_length_reward(
        self, completions: list[Any], completion_ids: list[Sequence[int]], **kwargs: Any
    ) -> list[float]:
        beta = self.settings.beta
        return self.per_group(
            completions,
            completion_ids,
            kwargs,
            lambda n, ok: shorterbetter_length_reward(n, ok, beta=beta),
        )


METHOD = LengthMethod(
    name="shorterbetter",
    paper="ShorterBetter, arXiv:2504.21370",
    help="distance to the group's shortest right length",
    correctness=2.0,  # alpha = 2, the authors' released setting
    reward="shorterbetter_length_reward",
    settings=ShorterBetterSettings,
    make=ShorterBetterReward,
    values=lambda s, run: f"-beta |l - l_SOL|, beta {s.beta:g}",
    compare=(
        (
            "ShorterBetter",
            {"mode": "shorterbetter", "shorterbetter": {"beta": PerPaperToken(0.001)}},
        ),
    ),
)
