"""DAPO's soft overlong punishment: TRL's own function, the docs' worked example, scaled."""

from __future__ import annotations

import pytest
from trl.rewards import get_soft_overlong_punishment

from traac.errors import TraacError
from traac.training.methods.dapo_overlong import dapo_cache_length, dapo_overlong_punishment


def punish(lengths: list[int], max_len: int, cache: int | None = None) -> list[float]:
    return dapo_overlong_punishment(max_len, cache)([[0] * n for n in lengths])


def test_dapo_worked_example() -> None:
    # docs/peer_methods.md, paper values (L_max 20480, L_cache 4096, band after 16384), and a
    # short run (L_max 1000, default cache a fifth: 200).
    assert punish([16384, 17408, 20480, 20481], 20480) == pytest.approx([0.0, -0.25, -1.0, -1.0])
    assert punish([800, 900, 1000], 1000) == pytest.approx([0.0, -0.5, -1.0])


def test_dapo_boundaries_pin_cache_semantics() -> None:
    # L_cache is the band below L_max: 0 at L_max - L_cache, -1/L_cache one token later, -1 at
    # L_max and beyond. A copy reading the cache as the expected length, or with other ends, fails.
    got = punish([16384, 16385, 20480, 20481], 20480, 4096)
    assert got == [0.0, -0.000244140625, -1.0, -1.0]


def test_dapo_is_trls_function_scaled(peer) -> None:
    ours = dapo_overlong_punishment(20480, 4096)
    theirs = get_soft_overlong_punishment(max_completion_len=20480, soft_punish_cache=4096)
    assert type(ours) is type(theirs)
    assert type(ours).__module__ == "trl.rewards.other_rewards"
    completions = [[7] * n for n in (0, 16000, 16384, 16385, 18000, 20480, 20481, 30000)]
    assert ours(completions) == theirs(completions)
    assert dapo_overlong_punishment(1000).soft_punish_cache == 200  # a fifth by default
    with pytest.raises(TraacError, match=r"cache_length \(2000\) must not exceed"):
        dapo_overlong_punishment(1000, 2000)
    # As a peer mode: TRL's values times 4 / 2 (right +1 against wrong -1 in the paper).
    rewards = peer("dapo_overlong")
    assert rewards.func.__name__ == "dapo_overlong_length_reward"
    trl = get_soft_overlong_punishment(max_completion_len=1000, soft_punish_cache=200)
    ids = [[0] * n for n in (700, 800, 900, 1000)]
    assert rewards.func(completion_ids=ids) == pytest.approx([0.0, 0.0, -1.0, -2.0])
    assert rewards.func(completion_ids=ids) == [2.0 * r for r in trl(ids)]


# The formulas on their own


def test_dapo_default_cache_is_a_fifth():
    assert dapo_cache_length(20480) == 4096  # the paper's 4096 of 20480
    assert dapo_cache_length(1000) == 200
    assert dapo_cache_length(1000, 50) == 50
    assert dapo_cache_length(1000, 0) == 0


def test_dapo_rejects_bad_values():
    with pytest.raises(TraacError, match=r"cache_length \(2000\) must not exceed .*\(1000\)"):
        dapo_cache_length(1000, 2000)
    with pytest.raises(TraacError, match=r"max_completion_length must be an integer >= 1, got 0"):
        dapo_cache_length(0)
    with pytest.raises(TraacError, match=r"cache_length must be an integer >= 0, got 0.5"):
        dapo_cache_length(1000, 0.5)  # type: ignore[arg-type]
