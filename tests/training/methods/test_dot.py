"""DOT's cutoffs and its length term on hand-built groups (the values worked by hand below)."""

from __future__ import annotations

import math

import pytest

from traac.errors import TraacError
from traac.training.methods.base import RunContext
from traac.training.methods.dot import dot_cutoffs, largest_z
from traac.training.methods.registry import METHODS, parse_settings
from traac.training.planning.traac_config import TRAACConfig

# Seven rollouts of 10 tokens and one of 50: mean 15, sample variance (7 x 25 + 35^2) / 7 = 200.
SEVEN_AND_ONE = [10] * 7 + [50]


def test_the_cutoff_is_floor_mean_plus_alpha_std_and_only_the_tail_past_the_margin_is_cut() -> None:
    # alpha 1.35: T = floor(15 + 1.35 x sqrt(200)) = floor(34.09) = 34; 50 - 34 = 16.
    right = [True] * 8
    assert dot_cutoffs(SEVEN_AND_ONE, right, alpha=1.35, margin=16) == [None] * 7 + [34]
    assert dot_cutoffs(SEVEN_AND_ONE, right, alpha=1.35, margin=17) == [None] * 8
    # alpha 2.47, just under the largest possible z of 8 (7 / sqrt(8) = 2.4749): T = 49.
    assert dot_cutoffs(SEVEN_AND_ONE, right, alpha=2.47, margin=1) == [None] * 7 + [49]
    # One wrong rollout: the group is not all right, nothing is cut.
    mixed = [True] * 7 + [False]
    assert dot_cutoffs(SEVEN_AND_ONE, mixed, alpha=1.35, margin=1) == [None] * 8
    assert largest_z(8) == pytest.approx(7 / math.sqrt(8))


def test_a_truncated_rollout_is_re_verified_and_loses_its_reward_only_where_the_answer_is_cut(
    peer, call, call_texts
) -> None:
    """Four right rollouts: three of 25 characters, one of 84. Mean 39.75, sample std 29.5
    (3 x 14.75^2 + 44.25^2 = 2610.75, / 3 = 870.25), so alpha 1: T = floor(69.25) = 69 and
    84 - 69 = 15 >= m 8. The long one keeps 69 characters."""
    short = "<think>a</think>\\boxed{4}"
    cut_answer = "<think>" + "a" * 60 + "</think>\\boxed{4}"  # 69 keeps "<think>a...a</"
    early_answer = short + " " * 59  # 69 keeps the whole answer
    assert (len(short), len(cut_answer), len(early_answer)) == (25, 84, 84)
    for long, expected in ((cut_answer, -4.0), (early_answer, 0.0)):
        dot = peer("dot", alpha=1.0, margin=8)
        texts = [short, short, long, short]
        # The trainer's verdicts say all four are right; only the truncated prefix is verified
        # again (x4: a right answer is worth 4 here, 1 in the paper).
        out = call_texts(dot, texts, [True] * 4, answer=["4"] * 4)
        assert out == [0.0, 0.0, expected, 0.0]
    # Lengths alone: a group with a wrong rollout is never cut, so no tokenizer is needed.
    assert (
        call(peer("dot", alpha=1.0, margin=8), [25, 25, 84, 25], [True] * 3 + [False]) == [0.0] * 4
    )


def test_unset_alpha_is_the_authors_3_at_their_32_rollouts_and_the_same_share_at_8() -> None:
    """3 x (7 / sqrt(8)) / (31 / sqrt(32)) = 3 x 2.4749 / 5.4801 = 1.3549."""
    unset = {"alpha": None, "margin": 32}
    for n, alpha in ((32, 3.0), (8, 1.3549)):
        run = RunContext(1.0, 160, 0.8, num_generations=n)
        assert METHODS["dot"].run_of(
            parse_settings("dot", unset, run), run
        ).settings.alpha == pytest.approx(alpha, abs=1e-4)


def test_an_alpha_no_group_can_reach_or_a_margin_over_the_cap_is_one_line_naming_the_field() -> (
    None
):
    run = RunContext(correctness_reward=1.0, max_completion_length=160, easy_threshold=0.8)
    with pytest.raises(
        TraacError,
        match=r"^dot\.alpha: 3 never truncates.*lower dot\.alpha below 2.47 or raise num_gen",
    ) as err:
        METHODS["dot"].run_of(parse_settings("dot", dict(alpha=3.0, margin=32), run), run)
    assert "\n" not in str(err.value)
    with pytest.raises(
        TraacError,
        match=r"^dot\.margin: 160 tokens is not below max_completion_length 160.*lower dot\.margin",
    ):
        METHODS["dot"].run_of(parse_settings("dot", dict(alpha=1.0, margin=160), run), run)
    with pytest.raises(TraacError, match=r"^dot\.alpha: -1.0 must be a finite number > 0"):
        METHODS["dot"].run_of(parse_settings("dot", dict(alpha=-1.0, margin=32), run), run)
    # The config refuses the paper's alpha with 8 rollouts before any model loads.
    with pytest.raises(TraacError, match=r"dot\.alpha: 3 never truncates"):
        TRAACConfig(
            output_dir="unused",
            mode="dot",
            method_args={"alpha": 3.0},
            num_generations=8,
            use_cpu=True,
        )
