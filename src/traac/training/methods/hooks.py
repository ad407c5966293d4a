"""The chosen method of one run on the step's phases: `MethodHooks`, which the trainer holds
whatever the method, so it has no branch per method.

The phases are the step's (`traac.training.step.phases`, `traac.training.step.driver`): the rewards
TRL sums (`reward_funcs`), what the method adds to each group (`compresses`: compressed,
re-answered copies), what a share of its rollouts start with (`prefill`: AdaptThink's empty
think block), which rows it keeps (`retain`: GFPO's filter), what it needs bound once
TRL holds the tokenizer (`bind`), and what it keeps across steps (`state_dict`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from traac.compression.formats import ChatFormat
from traac.compression.rewards import Gather
from traac.training.methods.base import TRAAC_REWARDS, GroupReward, MethodRun, Prefill, prefill_of
from traac.training.methods.registry import Method
from traac.training.methods.traac_rewards import TraacRewards

RewardFunc = Callable[..., list[float]]


class MethodHooks:
    """`method` for one run: TRAAC's reward functions bound to `traac` (length windows,
    memoised verdicts) and, for a method with settings (`run`), its reward object (`length`)
    built on the same verdicts."""

    def __init__(
        self,
        method: Method,
        traac: TraacRewards,
        run: MethodRun | None,
        num_generations: int | None,
        gather: Gather | None,
    ) -> None:
        self.method = method
        self.length: GroupReward | None = None
        funcs: dict[str, RewardFunc] = {name: getattr(traac, name) for name in TRAAC_REWARDS}
        if run is not None:
            self.length = run.rewards(traac.verdicts, num_generations, gather)
            if self.length.func is not None:
                funcs[self.length.func.__name__] = self.length.func
        self.reward_funcs: list[RewardFunc] = [funcs[name] for name in method.rewards]

    @property
    def compresses(self) -> bool:
        """Whether the step adds compressed, re-answered copies of right rollouts to a group."""
        return self.method.compresses

    def bind(
        self, tokenizer: Any, chat_format: ChatFormat, phrases: Sequence[str] | None, rank: int
    ) -> None:
        """What the run knows once TRL holds the tokenizer: the methods that read the text
        (DOT, the first-correct penalty) get it, and each its process's rank."""
        if self.length is not None:
            self.length.rank = rank
            self.length.bind(tokenizer, chat_format, phrases)

    @property
    def prefills(self) -> bool:
        """Whether a share of each group's rollouts starts with a forced prefix (AdaptThink)."""
        return self.length is not None and self.length.prefills

    def prefill(self, tokenizer: Any) -> Prefill | None:
        """The method's prefill in the run's tokens, after `bind`; None when it has none."""
        return prefill_of(self.length, tokenizer)

    @property
    def retain(self) -> Callable[[Sequence[float], Sequence[int]], list[bool] | None] | None:
        """Which rows of the gathered batch GRPO trains on, from each row's total reward and
        length (GFPO's filter); None: the method keeps every row."""
        if self.length is None or not self.length.filters:
            return None
        return self.length.retain

    def take_logged(self) -> dict[str, float]:
        """The method's own metrics of the step (AdaptThink's share of empty think blocks, ...),
        for the run's `metrics.jsonl`."""
        return {} if self.length is None else self.length.take_logged()

    def state_dict(self) -> dict[str, Any]:
        """What the method keeps across steps (Laser-D's targets), for the checkpoint."""
        return {} if self.length is None else self.length.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.length is not None:
            self.length.load_state_dict(state)
