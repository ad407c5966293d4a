"""DLER (arXiv:2510.15110, NVlabs/DLER): the truncation penalty, a right answer over the limit
earns nothing; and its difficulty-aware variant, a shorter limit for easy prompts. Trained in
`experiment compare` with DLER's optimiser (`optimizer_profile: dler`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from traac.compression.difficulty import pass_rate
from traac.errors import TraacError
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


def dler_length_reward(
    lengths: Sequence[int], correct: Sequence[bool], *, limit: int | Sequence[int]
) -> list[float]:
    """DLER's truncation penalty as a length term: -1 for a right rollout longer than `limit`
    tokens (it loses its correctness reward), 0 otherwise.

    Liu et al., "DLER: Doing Length pEnalty Right", arXiv:2510.15110: a response over the
    target length earns no reward, so `1[correct] + term` is `1[correct and |y| <= limit]`, the
    paper's reward with correctness weight 1. The authors' code gets the same by capping
    generation at the limit (`max_response_length`; a cut response has no answer). `limit` is one
    length for the group, or one per rollout (`dler_limit`, the difficulty-aware variant).
    """
    lengths, correct = checked_group("dler", lengths, correct)
    limits = [limit] * len(lengths) if isinstance(limit, int) else list(limit)
    if len(limits) != len(lengths):
        raise TraacError(f"dler: {len(lengths)} lengths but {len(limits)} limits")
    limits = [checked_count("dler limit", b, minimum=1) for b in limits]
    rows = zip(lengths, correct, limits, strict=True)
    return [-1.0 if ok and n > b else 0.0 for n, ok, b in rows]


def dler_limit(
    correct: Sequence[bool], *, limit: int, easy_threshold: float, easy_scale: float
) -> int:
    """Difficulty-aware DLER's truncation length for one prompt's group: `floor(limit *
    easy_scale)` when the group's pass rate is at least `easy_threshold` (an easy prompt),
    `limit` otherwise. The paper tightens the truncation on easier questions; its exact
    schedule is not in the authors' released code, so the rule and its values are traac's
    (docs/peer_methods.md)."""
    checked_count("dler limit", limit, minimum=1)
    check_number("dler easy_scale", easy_scale, positive=True)
    if not correct:
        raise TraacError("dler: empty group; pass the verdicts of a prompt's rollouts")
    if pass_rate([bool(ok) for ok in correct]) >= easy_threshold:
        return max(1, math.floor(limit * easy_scale))
    return limit


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
