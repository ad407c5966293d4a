"""ALP (arXiv:2506.05256): a per-token penalty scaled by the group's solve rate."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from traac.compression.length_rewards import alp_length_reward
from traac.training.methods.base import GroupReward, LengthMethod, MethodSettings, RunContext


@dataclass(frozen=True)
class ALPSettings(MethodSettings):
    BLOCK, FLAT_PREFIX = "alp", "alp_"
    POSITIVE = ("beta", "normalizer")

    beta: float = field(
        default=1.0, metadata={"help": "alp: global coefficient beta (traac's choice, see docs)."}
    )
    normalizer: float | None = field(
        default=None,
        metadata={"help": "alp: normalisation constant N in tokens (unset: "
                  "max_completion_length, traac's choice)."},
    )  # fmt: skip

    def resolved(self, run: RunContext) -> ALPSettings:
        return replace(self, normalizer=self.normalizer or float(run.max_completion_length))


class ALPReward(GroupReward):
    def alp_length_reward(
        self, completions: list[Any], completion_ids: list[Sequence[int]], **kwargs: Any
    ) -> list[float]:
        s = self.settings
        return self.per_group(
            completions,
            completion_ids,
            kwargs,
            lambda n, ok: alp_length_reward(n, ok, beta=s.beta, normalizer=s.normalizer),
        )


METHOD = LengthMethod(
    name="alp",
    paper="ALP, arXiv:2506.05256",
    help="ALP, solve-rate scaled per-token penalty",
    correctness=1.0,  # r = 1[correct] - penalty
    reward="alp_length_reward",
    settings=ALPSettings,
    make=ALPReward,
    values=lambda s, run: f"-(beta/N) max(p_solved, 1/K) |y|, beta {s.beta:g}, N {s.normalizer:g}",
    compare=(("ALP", {"mode": "alp"}),),
)
