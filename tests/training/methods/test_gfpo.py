"""GFPO: each group's k shortest (or most reward per token) rollouts are kept; the rest, and
dropped rows, are not."""

from __future__ import annotations

import math

import pytest

from traac.errors import TraacError
from traac.training.methods.base import RunContext
from traac.training.methods.gfpo import GFPOSettings, retained
from traac.training.methods.registry import METHODS, parse_settings

NAN = math.nan
RUN = RunContext(correctness_reward=4.0, max_completion_length=100, easy_threshold=0.8,
                 num_generations=4)  # fmt: skip


def test_the_k_shortest_of_each_group_are_kept_ties_to_the_earlier() -> None:
    totals = [4.0, 4.0, 0.0, 4.0, 1.0, 1.0, 1.0, 1.0]
    lengths = [50, 10, 30, 30, 9, 9, 9, 9]
    assert retained(totals, lengths, 4, 2, "length") == [
        False, True, True, False,  # 10 and the first 30
        True, True, False, False,  # all equal: the first two
    ]  # fmt: skip


def test_reward_per_token_keeps_the_most_reward_per_token() -> None:
    # reward / length: 0.08, 0.1, 0.0, 0.4 -> keep the last two
    totals, lengths = [4.0, 4.0, 0.0, 4.0], [50, 40, 5, 10]
    assert retained(totals, lengths, 4, 2, "reward_per_token") == [False, True, False, True]


def test_rows_without_a_reward_are_never_kept() -> None:
    totals, lengths = [NAN, NAN, NAN, NAN, 4.0, NAN, 4.0, 4.0], [1, 2, 3, 4, 9, 1, 8, 7]
    assert retained(totals, lengths, 4, 2, "length") == [False] * 4 + [False, False, True, True]


def test_settings_default_to_half_the_group_and_are_checked() -> None:
    assert GFPOSettings().resolved(RUN).keep == 2
    with pytest.raises(TraacError, match=r"^gfpo\.keep: 5 must lie in \[2, num_generations 4\]"):
        GFPOSettings(keep=5).resolved(RUN)
    with pytest.raises(TraacError, match=r"gfpo\.metric"):
        GFPOSettings(metric="fast").check(RUN)
    # the filter's old name now means EvalScope's evaluation measure: the recipe is told
    with pytest.raises(TraacError, match="'token_efficiency' is now called 'reward_per_token'"):
        GFPOSettings(metric="token_efficiency").check(RUN)


def test_the_filter_has_no_reward_term_and_filters_whole_groups() -> None:
    run = METHODS["gfpo"].run_of(parse_settings("gfpo", dict(keep=2, metric="length"), RUN), RUN)
    assert "keep 2 of 4 per group by length" in run.describe()
    rewards = run.rewards(lambda completions, **kw: [], 4)
    assert rewards.func is None and rewards.filters
    assert rewards.retain([1.0] * 4, [4, 3, 2, 1]) == [False, False, True, True]
    with pytest.raises(TraacError, match="not whole groups"):
        rewards.retain([1.0] * 3, [1, 2, 3])
