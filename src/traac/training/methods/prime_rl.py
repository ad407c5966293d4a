"""prime-rl's linear length penalty (PrimeIntellect-ai/prime-rl, PR 2901): every rollout pays its
share of the group's longest response, scaled by the group's pass rate, so prompts the policy
solves reliably get the strongest pull toward brevity and prompts it never solves get none.

As `GRPOAlgorithm.score_group` (`src/prime_rl/orchestrator/algo/grpo.py`) computes it before the
group baseline: `reward_i - pass_rate x (w_out o_i / max o + w_in c_i / max c + w_turns t_i /
max t)`, `pass_rate` the group's mean reward, `o` output tokens, `c` input (context) tokens, `t`
turns, each maximum at least 1; weights 0.25, 0.1 and 0.1 (`LinearLengthPenaltyConfig`). In a
single-turn group every rollout shares the prompt and its one turn, so the input and turns terms
are one constant per group, which the group's mean removes from every advantage: traac keeps the
output term alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from traac.compression.difficulty import pass_rate
from traac.training.methods.base import (
    GroupReward,
    LengthMethod,
    MethodSettings,
    check_number,
    checked_group,
)


@dataclass(frozen=True)
class PrimeRLSettings(MethodSettings):
    BLOCK, FLAT_PREFIX = "prime_rl", "prime_rl_"
    NONNEGATIVE = ("weight",)

    weight: float = field(
        default=0.25,
        metadata={"help": "prime_rl: weight of the output-token term, pass rate x length / the "
                  "group's longest (the authors' num_output_tokens_weight 0.25)."},
    )  # fmt: skip


def prime_rl_length_reward(
    lengths: Sequence[int], correct: Sequence[bool], *, weight: float
) -> list[float]:
    """prime-rl's output-token penalty of one group: `-weight x pass rate x n / max(1, longest)`
    for every rollout, right or wrong."""
    lengths, correct = checked_group("prime_rl", lengths, correct)
    check_number("prime_rl weight", weight, positive=False)
    per_token = weight * pass_rate(correct) / max(1, max(lengths))
    return [-per_token * n for n in lengths]


class PrimeRLReward(GroupReward):
    def prime_rl_length_reward(
        self, completions: list[Any], completion_ids: list[Sequence[int]], **kwargs: Any
    ) -> list[float]:
        weight = self.settings.weight
        return self.per_group(
            completions,
            completion_ids,
            kwargs,
            lambda n, ok: prime_rl_length_reward(n, ok, weight=weight),
        )


METHOD = LengthMethod(
    name="prime_rl",
    paper="prime-rl linear length penalty (PrimeIntellect-ai/prime-rl, PR 2901)",
    help="prime-rl: a length penalty relative to the group's longest, scaled by its pass rate",
    correctness=1.0,  # a binary task reward: 1 right, 0 wrong
    reward="prime_rl_length_reward",
    settings=PrimeRLSettings,
    make=PrimeRLReward,
    values=lambda s, run: f"-weight x pass rate x |y| / max |y|, weight {s.weight:g}",
    # Their advantage is the shaped reward less the group's mean, not divided by its std.
    compare=(("prime-rl length penalty", {"mode": "prime_rl", "scale_rewards": "none"}),),
)
