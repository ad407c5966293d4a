"""ALP (arXiv:2506.05256): a per-token penalty scaled by the group's solve rate."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from traac.compression.difficulty import pass_rate
from traac.training.methods.base import (
    GroupReward,
    LengthMethod,
    MethodSettings,
    RunContext,
    check_number,
    checked_group,
)


def alp_length_reward(
    lengths: Sequence[int], correct: Sequence[bool], *, beta: float, normalizer: float
) -> list[float]:
    """ALP's length penalty: `-(beta / N) * max(p_solved(q), 1 / K) * |y|` for every rollout.

    Xiang et al., "Just Enough Thinking: Efficient Reasoning with Adaptive Length Penalties
    Reinforcement Learning", arXiv:2506.05256, section 3 (the ALP reward):
    `r(y, q) = 1[answer(y) = y*] - (beta / N) * max(p_solved(q), K^-1) * |y|`, with
    `p_solved(q) = (1/K) sum_k 1[answer(y_k) = y*]` the online solve rate of the prompt's K
    rollouts. Easy prompts (high solve rate) pay more per token; the `1/K` floor keeps a small
    penalty on prompts no rollout solved. The correctness term is the trainer's (weight 1).

    Choices: the solve rate is this group's pass rate (the paper's K rollouts are GRPO's group).
    The penalty hits every rollout, right or wrong, as the formula reads. `beta` (the global
    coefficient) and `normalizer` (N) have no defaults: the paper's values could not be read
    from the sources available to traac, so a run must state both (docs/peer_methods.md).
    """
    lengths, correct = checked_group("alp", lengths, correct)
    check_number("alp beta", beta, positive=True)
    check_number("alp normalizer (N)", normalizer, positive=True)
    per_token = beta / normalizer * max(pass_rate(correct), 1.0 / len(lengths))
    return [-per_token * n for n in lengths]


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
