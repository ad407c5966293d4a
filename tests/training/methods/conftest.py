"""A method's reward function on hand-built groups: `peer(mode, **settings)`, `call` on lengths
and `call_texts` on texts (one token per character).

The values are those of docs/peer_methods.md's worked examples: a right answer worth 4, a
1000-token cap, the easy bin from a pass rate of 0.8."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from char_tokenizer import CharTokenizer, char_ids

from traac.compression.formats import ChatFormat
from traac.training.methods.base import GroupReward, RunContext
from traac.training.methods.registry import METHODS, parse_settings
from traac.training.methods.traac_rewards import TraacRewards

# The worked examples' values where they differ from the settings' defaults, by block (every
# other setting keeps its default, so a new method needs no line here).
VALUES: dict[str, dict[str, Any]] = {
    "alp": {"normalizer": 1000.0}, "dapo_overlong": {"cache_length": 200},
    "l1_max": {"budget_max": 1000}, "dler": {"length": 250},
    "laser_d": {"lower": 100, "upper": 500, "interval": 100},
}  # fmt: skip
RUN = RunContext(correctness_reward=4.0, max_completion_length=1000, easy_threshold=0.8)


class State:
    """TRL's `trainer_state`, as far as the rewards read it."""

    def __init__(self, step: int) -> None:
        self.global_step = step


@pytest.fixture
def peer() -> Callable[..., GroupReward]:
    def make(
        mode: str, *, num_generations: int = 4, gather: Any = None, rank: int = 0, **values: Any
    ) -> GroupReward:
        given = {**VALUES.get(METHODS[mode].settings.BLOCK, {}), **values}
        settings = parse_settings(mode, given, RUN)
        run = METHODS[mode].run_of(settings, RUN)
        return run.rewards(TraacRewards().verdicts, num_generations, gather, rank)

    return make


@pytest.fixture
def call() -> Callable[..., list[float]]:
    def score(rewards: GroupReward, lengths: list[int], correct: list[bool], **cols: Any) -> list:
        ids = [[0] * n for n in lengths]
        return rewards.func(completions=["x"] * len(lengths), completion_ids=ids, correct=correct,
                            **cols)  # fmt: skip

    return score


@pytest.fixture
def call_texts() -> Callable[..., list[float]]:
    def score(
        rewards: GroupReward,
        texts: list[str],
        correct: list[bool],
        chat_format: ChatFormat | None = None,
        **cols: Any,
    ) -> list[float]:
        """The reward of `texts` (one token per character) after binding the tokenizer."""
        rewards.bind(CharTokenizer(), chat_format or ChatFormat())
        ids = [char_ids(t) for t in texts]
        return rewards.func(completions=texts, completion_ids=ids, correct=correct, **cols)

    return score


@pytest.fixture
def state() -> type[State]:
    return State
