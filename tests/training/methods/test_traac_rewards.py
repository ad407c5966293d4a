import pytest

from traac.compression.difficulty import DifficultySettings
from traac.compression.rewards import RewardSettings
from traac.errors import TraacError
from traac.training.methods.hooks import MethodHooks
from traac.training.methods.registry import METHODS
from traac.training.methods.traac_rewards import EVALUATION_COLUMN, TraacRewards

PAPER = RewardSettings.preset("paper")
AUTHORS = RewardSettings.preset("authors")


def test_trl_reward_functions():
    rewards = TraacRewards(PAPER, num_generations=2)
    funcs = MethodHooks(METHODS["traac"], rewards, None, 2, None).reward_funcs
    assert [f.__name__ for f in funcs] == [
        "correctness_reward",
        "format_reward",
        "length_reward",
    ]
    completions = [
        "<think>r</think>\\boxed{B}",
        "<think>r</think>(A)",
        "<think>r</think>yes",
        "no closer",
    ]
    kwargs = {
        "prompts": ["p"] * 4,
        "answer": ["B", "B", "yes", "yes"],
        "verifier": ["choice", "choice", "text", "text"],
        "data_source": ["mc", "mc", "qa", "qa"],
        "completion_ids": [[0] * 10, [0] * 20, [0] * 30, [0] * 40],
        "trainer_state": None,
    }
    assert rewards.correctness_reward(completions, **kwargs) == [4.0, 0.0, 4.0, 0.0]
    assert rewards.format_reward(completions, **kwargs) == [1.0, 1.0, 1.0, 0.0]
    # each group of 2 has pass rate 0.5 -> medium (scale 0.75); windows hold one length each
    assert rewards.length_reward(completions, **kwargs) == pytest.approx(
        [2 * 0.75 * 0.5, 0, 0.75, 0]
    )
    assert rewards.windows.keys() == [("mc", "medium"), ("qa", "medium")]


def test_trl_conversational_completions_and_precomputed_columns():
    rewards = TraacRewards(AUTHORS, difficulty=DifficultySettings(enabled=False))
    completions = [[{"role": "assistant", "content": "<think>r</think>\\boxed{3}"}]]
    assert rewards.correctness_reward(completions, answer=["3"]) == [4.0]
    assert rewards.format_reward(completions) == [0.5]
    out = rewards.length_reward(completions, completion_ids=[[1, 2]], correct=[True], bin=["all"])
    assert out == [0.5]


def test_an_evaluation_batch_scores_against_the_windows_and_leaves_them_as_they_were():
    """Rows marked `evaluation` get the rewards a training step would, and push nothing."""
    rewards = TraacRewards(PAPER, num_generations=2)
    batch = {"completion_ids": [[0] * 10, [0] * 20], "correct": [True, True], "bin": ["easy"] * 2}
    rewards.length_reward(["a", "b"], **batch)  # one training step: the window is [10, 20]
    before = rewards.windows.state_dict()
    evaluation = {**batch, "completion_ids": [[0] * 30, [0] * 10], EVALUATION_COLUMN: [True] * 2}
    held_out = rewards.length_reward(["a", "b"], **evaluation)
    assert rewards.windows.state_dict() == before
    assert held_out == rewards.length_reward(["a", "b"], **{**evaluation, EVALUATION_COLUMN: None})
    assert rewards.windows.state_dict() != before  # that call was a training step


def test_trl_reward_errors():
    rewards = TraacRewards()
    with pytest.raises(TraacError, match="answer"):
        rewards.correctness_reward(["x"])
    with pytest.raises(TraacError, match="num_generations"):
        rewards.length_reward(["x"], completion_ids=[[1]], correct=[True])
    with pytest.raises(TraacError, match="completion_ids"):
        rewards.length_reward(["x"], correct=[True])
