"""GFPO, Group Filtered Policy Optimization (Shrivastava et al., "Sample More to Think Less",
arXiv:2508.09726): sample a group, train on the k of its rollouts that are shortest (or that earn
the most reward per token), so that length is controlled by what GRPO learns from rather than
by a length penalty in the reward.

The filtered-out rollouts leave the group before its normalisation: their rewards become NaN in
the trainer's reward call (`TRAACTrainer._calculate_rewards`), which TRL leaves out of the group
mean and standard deviation (advantage 0), and they are masked out of the loss, as the paper's
objective sums over the retained set only. The rewards are traac's correctness and format; GFPO
adds no term of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from traac.compression.settings import check_choice
from traac.errors import TraacError
from traac.training.methods.base import GroupReward, LengthMethod, MethodSettings, RunContext

GFPO_METRICS = ("length", "reward_per_token")
# Called `token_efficiency` before: that name is EvalScope's evaluation measure now
# (docs/evaluation.md), so a recipe that still says it is told the new name.
_RENAMED = {"token_efficiency": "reward_per_token"}


@dataclass(frozen=True)
class GFPOSettings(MethodSettings):
    BLOCK, FLAT_PREFIX = "gfpo", "gfpo_"
    COUNTS = ("keep",)

    keep: int | None = field(
        default=None,
        metadata={"help": "gfpo: rollouts of each group trained on, k (unset: half of "
                  "num_generations; the paper keeps 8 of 16 or 24)."},
    )  # fmt: skip
    metric: str = field(
        default="length",
        metadata={"help": "gfpo: which k are kept: length (the shortest) | reward_per_token "
                  "(the most reward per token; the paper's Token Efficiency filter)."},
    )  # fmt: skip

    def check(self, run: RunContext) -> None:
        super().check(run)
        if self.metric in _RENAMED:
            raise TraacError(
                f"gfpo.metric: {self.metric!r} is now called "
                f"{_RENAMED[self.metric]!r} (token efficiency names an evaluation measure); "
                "use that"
            )
        check_choice("gfpo.metric", self.metric, GFPO_METRICS)

    def resolved(self, run: RunContext) -> GFPOSettings:
        n = run.num_generations
        keep = self.keep or max(2, n // 2)
        if not 2 <= keep <= n:
            raise TraacError(
                f"gfpo.keep: {keep} must lie in [2, num_generations {n}] (a group's standard "
                "deviation needs two rollouts); lower gfpo.keep or raise num_generations"
            )
        return replace(self, keep=keep)


def retained(
    totals: Sequence[float], lengths: Sequence[int], n: int, keep: int, metric: str
) -> list[bool]:
    """Per rollout of consecutive groups of `n`: whether it is among its group's `keep` shortest
    (`length`) or highest in total reward per token (`reward_per_token`); ties go to the earlier
    rollout, and rollouts with no reward (NaN: dropped) are never kept."""
    out: list[bool] = []
    for start in range(0, len(totals), n):
        group = range(start, start + n)

        def rank(i: int) -> tuple[float, int]:
            if metric == "length":
                return (float(lengths[i]), i)
            return (-(totals[i] / max(lengths[i], 1)), i)

        scored = [i for i in group if totals[i] == totals[i]]  # not NaN
        chosen = set(sorted(scored, key=rank)[:keep])
        out += [i in chosen for i in group]
    return out


class GFPOFilter(GroupReward):
    """No reward term: `retain` is the filter the trainer's reward call applies."""

    filters = True

    def retain(self, totals: Sequence[float], lengths: Sequence[int]) -> list[bool]:
        n = self.num_generations
        if n is None or len(totals) % n:
            raise TraacError(f"mode gfpo: {len(totals)} rollouts are not whole groups of {n}")
        s = self.settings
        return retained(totals, lengths, n, s.keep, s.metric)


METHOD = LengthMethod(
    name="gfpo",
    paper="GFPO, arXiv:2508.09726",
    help="GFPO: train on the k shortest (or most reward per token) of each group",
    correctness=1.0,
    reward=None,
    settings=GFPOSettings,
    make=GFPOFilter,
    values=lambda s, run: (
        f"keep {s.keep} of {run.num_generations} per group by {s.metric}; no length term"
    ),
    compare=(("GFPO", {"mode": "gfpo", "gfpo": {"keep": 4}}),),
)
