"""AdaptThink (Zhang et al., "AdaptThink: Reasoning Models Can Learn When to Think", EMNLP 2025,
THU-KEG/AdaptThink: `src/adapt_think_reward_manager.py`, `src/adapt_think_vllm_rollout.py`,
`src/adapt_think_core_algos.py`, the 1.5B script's settings): the policy learns, per problem,
whether to think at all.

The authors' training: half of each group's rollouts (`nothinking_ratio` 0.5) are generated
with the think block already closed (`</think>` appended to the prompt, the "NoThinking" branch),
the rest with it open. The reward is

    r(x, y) = 1[correct] - R_ref(x) + delta 1[y is a NoThinking rollout]     (delta 0.05)

with R_ref(x) the reference model's mean accuracy on x (pre-sampled, 16 rollouts), used as the
advantage itself (verl's `naive` estimator); the first token's PPO ratio is taken against the
sampling share (0.5), not the old policy, so the choice of branch is learnt by importance
sampling.

traac's form: the branch is the method's `prefill` (`GroupReward.prefill`): the first
round(n x share) rollouts of each group start with an empty think block, generated after it and
trained on it as their own tokens. The reward term is delta on every rollout whose think block
is empty (whether prefilled or chosen); R_ref(x) is constant within a group, so GRPO's group
mean stands in for it (no pre-sampling). The compare variant sets `scale_rewards: none`, so the
advantage is the centred reward. Where and why this departs is in docs/peer_methods.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from traac.compression.formats import ChatFormat
from traac.compression.settings import check_positive
from traac.errors import TraacError
from traac.training.methods.base import (
    GroupReward,
    LengthMethod,
    MethodSettings,
    RunContext,
    RunRule,
)


@dataclass(frozen=True)
class AdaptThinkSettings(MethodSettings):
    BLOCK, FLAT_PREFIX = "adaptthink", "adaptthink_"
    POSITIVE = ("bonus",)

    bonus: float = field(
        default=0.05,
        metadata={"help": "adaptthink: delta, the reward of a rollout with an empty think block "
                  "(the authors' nothinking_bonus 0.05)."},
    )  # fmt: skip
    share: float = field(
        default=0.5,
        metadata={"help": "adaptthink: share of each group's training rollouts that start with "
                  "an empty think block, in (0, 1) (the authors' nothinking_ratio 0.5)."},
    )  # fmt: skip

    def check(self, run: RunContext) -> None:
        super().check(run)
        check_positive("adaptthink.share", self.share)
        if self.share >= 1:
            raise TraacError(
                f"adaptthink.share: {self.share:g} must be below 1 (some rollouts "
                "must think); lower it"
            )

    def resolved(self, run: RunContext) -> AdaptThinkSettings:
        """The share in whole rollouts: round(n x share) of each group of n start with an empty
        think block, so a share that rounds to none or to all leaves one branch untrained."""
        n, share = run.num_generations, self.share
        k = round(n * share)
        if not 0 < k < n:
            which = "every rollout starts" if k else "no rollout starts"
            raise TraacError(
                f"adaptthink.share: {share:g} of num_generations={n} rounds to {k}, so {which} "
                f"with an empty think block; choose a share that makes 1 to {n - 1} of {n} "
                f"(0.5: {round(n * 0.5)})"
            )
        return self


def thinks(text: str, chat_format: ChatFormat) -> bool:
    """Whether a completion thinks: False where it opens with an empty think block, as the
    authors test (`response.strip().startswith('</think>')`)."""
    return not text.strip().startswith(chat_format.answer_prefix(""))


def adaptthink_bonus(thinking: Sequence[bool], delta: float) -> list[float]:
    """delta for each rollout that does not think."""
    return [0.0 if t else delta for t in thinking]


class AdaptThinkReward(GroupReward):
    prefills = True

    def prefill(self) -> tuple[str, float]:
        """An empty think block for `share` of each group (the NoThinking branch)."""
        return self.chat_format.answer_prefix(""), self.settings.share

    def adaptthink_reward(
        self, completions: list[Any], completion_ids: list[Sequence[int]], **kwargs: Any
    ) -> list[float]:
        texts = self.decoded(completion_ids, "find empty think blocks")
        thinking = [thinks(t, self.chat_format) for t in texts]
        if thinking:
            self.log(kwargs, "adaptthink/no_think_share", thinking.count(False) / len(thinking))
        bonus = adaptthink_bonus(thinking, self.settings.bonus)
        return [self.scale * r for r in bonus]


METHOD = LengthMethod(
    name="adaptthink",
    paper="AdaptThink, EMNLP 2025 (THU-KEG/AdaptThink)",
    help="AdaptThink: half the rollouts start with an empty think block, which earns a bonus",
    correctness=1.0,  # acc in {0, 1}
    reward="adaptthink_reward",
    settings=AdaptThinkSettings,
    make=AdaptThinkReward,
    values=lambda s, run: (
        f"+delta on a rollout with an empty think block, delta {s.bonus:g}; "
        f"{s.share:g} of each group's rollouts start with one"
    ),
    compare=(("AdaptThink", {"mode": "adaptthink", "scale_rewards": "none"}),),
    rules=(
        RunRule(
            "use_vllm",
            "TRL's vLLM generation samples a group from one prompt, so no rollout can be "
            "prefilled with an empty think block",
            "set use_vllm false",
            cancels=(True,),
        ),
    ),
)
