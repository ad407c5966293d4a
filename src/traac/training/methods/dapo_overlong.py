"""DAPO's soft overlong punishment (Eq. 13, arXiv:2503.14476): TRL's own function, composed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from trl.rewards import get_soft_overlong_punishment

from traac.errors import TraacError
from traac.training.methods.base import (
    GroupReward,
    LengthMethod,
    MethodSettings,
    RunContext,
    checked_count,
)

DAPO_MAX_COMPLETION_LENGTH = 20480  # L_max, DAPO section 4.1: 16,384 expected + 4,096 cache
DAPO_CACHE_LENGTH = 4096  # L_cache, DAPO section 4.1


def dapo_cache_length(max_completion_length: int, cache_length: int | None = None) -> int:
    """L_cache of DAPO's soft overlong punishment for a run whose responses stop at `L_max =
    max_completion_length` tokens: `cache_length` if given, else the paper's ratio.

    Yu et al., "DAPO: An Open-Source LLM Reinforcement Learning System at Scale",
    arXiv:2503.14476, Eq. 13: 0 up to `L_max - L_cache` tokens, then linear from 0 down to -1 at
    `L_max`, and -1 beyond. The paper uses L_max = 20480 and L_cache = 4096 (section 4.1: 16,384
    expected tokens plus a 4,096-token cache); the default keeps that ratio, `floor(L_max * 4096
    / 20480)`, one fifth, so a short run gets a band scaled to its budget. The formula itself is
    TRL's (`dapo_overlong_punishment` below), not copied here.
    """
    max_len = checked_count("dapo max_completion_length", max_completion_length, minimum=1)
    if cache_length is None:
        return max_len * DAPO_CACHE_LENGTH // DAPO_MAX_COMPLETION_LENGTH
    cache = checked_count("dapo cache_length", cache_length, minimum=0)
    if cache > max_len:
        raise TraacError(
            f"dapo cache_length ({cache}) must not exceed max_completion_length ({max_len})"
        )
    return cache


@dataclass(frozen=True)
class DAPOOverlongSettings(MethodSettings):
    BLOCK, FLAT_PREFIX = "dapo_overlong", "dapo_"
    cache_length: int | None = field(
        default=None,
        metadata={"help": "dapo_overlong: soft-punish band L_cache in tokens (unset: a fifth of "
                  "max_completion_length, the paper's 4096 of 20480)."},
    )  # fmt: skip

    def check(self, run: RunContext) -> None:
        cache, cap = self.cache_length, run.max_completion_length
        if cache is not None and not 0 <= cache <= cap:
            raise TraacError(
                f"dapo_overlong.cache_length: {cache} must lie in [0, max_completion_length {cap}]"
            )

    def resolved(self, run: RunContext) -> DAPOOverlongSettings:
        cap = run.max_completion_length
        return replace(self, cache_length=dapo_cache_length(cap, self.cache_length))


def dapo_overlong_punishment(
    max_completion_length: int, cache_length: int | None = None
) -> Callable[..., list[float]]:
    """DAPO's soft overlong punishment (Eq. 13) for a run: TRL's own
    `trl.rewards.get_soft_overlong_punishment`, composed rather than copied, with L_max the run's
    `max_completion_length` and L_cache `dapo_cache_length` (a fifth of L_max unless given). The
    result is TRL's callable, a `GRPOTrainer` reward function that reads `completion_ids`; GRPO
    stops generating at L_max, so a truncated completion gets -1."""
    cache = dapo_cache_length(max_completion_length, cache_length)
    return get_soft_overlong_punishment(
        max_completion_len=max_completion_length, soft_punish_cache=cache
    )


class DAPOOverlongReward(GroupReward):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._punish = dapo_overlong_punishment(
            self.run.run.max_completion_length, self.settings.cache_length
        )

    def dapo_overlong_length_reward(
        self, completion_ids: list[Sequence[int]], **kwargs: Any
    ) -> list[float]:
        """TRL's soft overlong punishment, scaled; it reads each completion's length only."""
        return [self.scale * r for r in self._punish(completion_ids)]


METHOD = LengthMethod(
    name="dapo_overlong",
    paper="DAPO Eq. 13, arXiv:2503.14476 (TRL's get_soft_overlong_punishment)",
    help="DAPO soft overlong punishment, TRL's",
    correctness=2.0,  # +1 right, -1 wrong
    reward="dapo_overlong_length_reward",
    settings=DAPOOverlongSettings,
    make=DAPOOverlongReward,
    values=lambda s, run: (
        f"0 up to {run.max_completion_length - s.cache_length}, linear to -1 at "
        f"{run.max_completion_length} tokens (L_cache {s.cache_length})"
    ),
    compare=(("DAPO overlong", {"mode": "dapo_overlong"}),),
)
