"""The first-correct-answer penalty on hand-built rollouts (the values worked by hand below)."""

from __future__ import annotations

import pytest
from char_tokenizer import char_ids

from traac.errors import TraacError
from traac.training.methods.base import RunContext
from traac.training.methods.first_correct_penalty import first_correct_penalty
from traac.training.methods.registry import METHODS, parse_settings


def test_the_formula_penalises_right_answers_only_by_the_share_after() -> None:
    assert first_correct_penalty([0.5, 0.5, 0.0], [True, False, True], 0.5) == [-0.25, 0.0, 0.0]


def test_each_right_rollout_pays_lambda_times_its_think_share_after_the_first_correct_step(
    peer, call_texts
) -> None:
    """Answer 4, lambda 0.5, a right answer worth 4 (x4). Rollout 0's think block is the steps
    "Then 5. " (8 characters, states 5), "Then 4. " (8, the first to state 4), "Wait 4. " (8)
    and "Wait 4." (7): 15 of its 31 think tokens follow the first correct step, so it earns
    -0.5 x 15/31 x 4 = -30/31. Rollout 1 is right at its only step (nothing after), rollout 2 is
    wrong, rollout 3 states no number in its think block: 0 each."""
    texts = [
        "<think>Then 5. Then 4. Wait 4. Wait 4.</think>\\boxed{4}",
        "<think>So 4.</think>\\boxed{4}",
        "<think>Then 5. Then 4.</think>\\boxed{5}",
        "<think>Hmm.</think>\\boxed{4}",
    ]
    rewards = peer("first_correct", coef=0.5)
    assert rewards.func.__name__ == "first_correct_length_reward" and rewards.scale == 4.0
    correct = [True, True, False, True]
    out = call_texts(rewards, texts, correct, answer=["4"] * 4)
    assert out == pytest.approx([-30 / 31, 0.0, 0.0, 0.0])
    assert rewards.shares_after(
        [char_ids(t) for t in texts], correct, {"answer": ["4"] * 4}
    ) == pytest.approx([15 / 31, 0.0, 0.0, 0.0])


def test_a_coefficient_out_of_range_is_one_line_naming_the_field() -> None:
    run = RunContext(correctness_reward=1.0, max_completion_length=160, easy_threshold=0.8)
    for bad in (0.0, float("nan")):
        with pytest.raises(
            TraacError, match=r"^first_correct\.coef: .* must be a finite number > 0$"
        ):
            METHODS["first_correct"].run_of(
                parse_settings("first_correct", dict(coef=bad), run),
                run,
            )
