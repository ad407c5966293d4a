"""ShorterBetter (arXiv:2504.21370): the distance to the group's shortest right length."""

from __future__ import annotations

import statistics
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
from traac.training.methods.scale import PerPaperToken


def sample_optimal_length(lengths: Sequence[int], correct: Sequence[bool]) -> float:
    """ShorterBetter's SOL: the shortest right rollout's length, else the group's mean length."""
    lengths, correct = checked_group("shorterbetter", lengths, correct)
    right = [n for n, ok in zip(lengths, correct, strict=True) if ok]
    return float(min(right)) if right else statistics.fmean(lengths)


def shorterbetter_length_reward(
    lengths: Sequence[int], correct: Sequence[bool], *, beta: float = 0.001
) -> list[float]:
    """ShorterBetter's length term: `-beta * |l(y_j) - l_SOL(G(x_i))|` for every rollout.

    Yi, Wang and Li, "ShorterBetter: Guiding Reasoning Models to Find Optimal Inference Length
    for Efficient Reasoning", arXiv:2504.21370, method section (the SOL definition and the reward
    `r(y_j) = alpha * 1[y_j = y*_i] - beta * |l(y_j) - l_SOL(G(x_i))|`). The Sample Optimal
    Length is the shortest right rollout of the group; when none is right the paper takes the
    group's mean length (`sample_optimal_length`), so an unsolved prompt pulls lengths toward
    their mean instead of rewarding nothing. Defaults: beta = 0.001 and alpha = 2 (the trainer's
    correctness weight) are the authors' released setting (their models are "alpha_2"; the paper
    also trains alpha = 1).

    Both right and wrong rollouts are pulled toward the SOL, from above and from below, as the
    paper's absolute value reads: a wrong rollout shorter than the SOL is penalised too.
    """
    lengths, correct = checked_group("shorterbetter", lengths, correct)
    check_number("shorterbetter beta", beta, positive=True)
    sol = sample_optimal_length(lengths, correct)
    return [-beta * abs(n - sol) for n in lengths]


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
