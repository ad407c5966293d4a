"""DLER (arXiv:2510.15110, NVlabs/DLER): the truncation penalty, a right answer over the limit
earns nothing; and its difficulty-aware variant, a shorter limit for easy prompts. Trained in
`experiment compare` with DLER's optimiser (`optimizer_profile: dler`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from traac.compression.length_rewards import dler_length_reward, dler_limit
from traac.errors import TraacError
from traac.training.methods.base import GroupReward, LengthMethod, MethodSettings, RunContext
from traac.training.methods.scale import PaperTokens


@dataclass(frozen=True)
class DLERSettings(MethodSettings):
    BLOCK, FLAT_PREFIX = "dler", "dler_"
    POSITIVE = ("easy_scale",)
    COUNTS = ("length",)

    length: int = field(
        default=4000,
        metadata={"help": "dler, dler_difficulty: truncation length L in tokens; a right answer "
                  "longer earns no correctness reward (the authors' 4000)."},
    )  # fmt: skip
    easy_scale: float = field(
        default=0.5,
        metadata={"help": "dler_difficulty: a group whose pass rate reaches "
                  "difficulty.easy_threshold gets "
                  "the limit floor(L x this) (traac's choice; see docs)."},
    )  # fmt: skip

    def resolved(self, run: RunContext) -> DLERSettings:
        cap = run.max_completion_length
        if self.length > cap:
            raise TraacError(
                f"dler.length: {self.length} exceeds max_completion_length {cap}: the limit "
                "could never bind; lower dler.length or raise max_completion_length"
            )
        return self


class DLERReward(GroupReward):
    def dler_length_reward(
        self, completions: list[Any], completion_ids: list[Sequence[int]], **kwargs: Any
    ) -> list[float]:
        """The truncation penalty at `length`, or (`dler_difficulty`) at each group's
        limit from its pass rate."""
        s = self.settings
        if self.run.method is METHOD:  # one limit; DIFFICULTY's depends on the pass rate
            return self.per_group(
                completions,
                completion_ids,
                kwargs,
                lambda n, ok: dler_length_reward(n, ok, limit=s.length),
            )
        easy = self.run.run.easy_threshold

        def formula(n: list[int], ok: list[bool]) -> list[float]:
            limit = dler_limit(ok, limit=s.length, easy_threshold=easy, easy_scale=s.easy_scale)
            return dler_length_reward(n, ok, limit=limit)

        return self.per_group(completions, completion_ids, kwargs, formula)


# DLER is its truncation penalty trained with its optimiser; 4000 tokens is 64 of the testbed's.
METHOD = LengthMethod(
    name="dler",
    paper="DLER, arXiv:2510.15110 (NVlabs/DLER)",
    help="DLER truncation penalty: a right answer over the limit earns nothing",
    correctness=1.0,  # deepscaler's 1[correct] score
    reward="dler_length_reward",
    settings=DLERSettings,
    make=DLERReward,
    values=lambda s, run: f"-1[correct and |y| > L], L {s.length}",
    compare=(
        (
            "DLER",
            {"mode": "dler", "optimizer_profile": "dler", "dler": {"length": PaperTokens(4000)}},
        ),
    ),
)
DIFFICULTY = LengthMethod(
    name="dler_difficulty",
    paper="Difficulty-aware DLER, arXiv:2510.15110",
    help="DLER with a shorter limit for easy prompts",
    correctness=1.0,
    reward="dler_length_reward",
    settings=DLERSettings,
    make=DLERReward,
    values=lambda s, run: (
        f"-1[correct and |y| > L(q)], L {s.length}, floor(L x {s.easy_scale:g}) when "
        f"the group's pass rate >= {run.easy_threshold:g}"
    ),
    compare=(
        (
            "DLER, difficulty-aware",
            {
                "mode": "dler_difficulty",
                "optimizer_profile": "dler",
                "dler": {"length": PaperTokens(4000)},
            },
        ),
    ),
)
