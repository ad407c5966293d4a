"""`extra_reward_funcs`: loading and checking `module:function` paths, their weights, the
`reward_funcs` a Python caller adds, and a TRAAC step on the quick testbed that sums both after
the mode's own."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from traac.common.models import load_tokenizer
from traac.data.testbed_problems import make_items
from traac.data.training import items_to_dataset
from traac.errors import TraacError
from traac.training.planning.extra_rewards import (
    check_extra_weights,
    load_extra_rewards,
    load_reward_func,
    split_path,
    with_extra_rewards,
)
from traac.training.planning.traac_config import TRAACConfig
from traac.training.trl_adapter.trainer import TRAACTrainer

MODULE = """
CALLS = []
NOT_A_FUNCTION = 3

def brevity(prompts, completions, completion_ids, **kwargs):
    CALLS.append(sorted(kwargs))
    return [-len(ids) / 100 for ids in completion_ids]

def no_kwargs(prompts, completions):
    return [0.0] * len(completions)

def needs_more(scale, prompts, completions, **kwargs):
    return [0.0] * len(completions)

def correctness_reward(completions, **kwargs):
    return [0.0] * len(completions)
"""


@pytest.fixture
def rewards_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request) -> str:
    """A reward module in the working directory, as a user writes one (a fresh name per test,
    so no test sees another's import)."""
    name = f"my_rewards_{request.node.name.replace('[', '_').replace(']', '').replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the loader adds the working directory
    yield name
    sys.modules.pop(name, None)


def test_a_function_with_trls_signature_loads(rewards_module: str) -> None:
    func = load_reward_func(f"{rewards_module}:brevity")
    assert func.__name__ == "brevity"
    assert func(prompts=[], completions=["a"], completion_ids=[[1, 2]]) == [-0.02]
    assert load_reward_func(f"{rewards_module}.brevity") is func  # TRL's dotted form


@pytest.mark.parametrize(
    ("attribute", "message"),
    [
        ("missing", "has no missing"),
        ("NOT_A_FUNCTION", "is a int, not a function"),
        ("no_kwargs", "(prompts, completions) cannot take TRL's reward call"),
        ("needs_more", "cannot take TRL's reward call (missing a required argument: 'scale')"),
    ],
)
def test_a_bad_function_is_named(rewards_module: str, attribute: str, message: str) -> None:
    with pytest.raises(TraacError) as err:
        load_reward_func(f"{rewards_module}:{attribute}")
    assert str(err.value).startswith(f"extra_reward_funcs: {rewards_module}:{attribute}")
    assert message in str(err.value)


@pytest.mark.parametrize("spec", ["brevity", "mod:", ":brevity", "mod:not-a-name"])
def test_a_malformed_path_is_named(spec: str) -> None:
    with pytest.raises(TraacError, match="is no module:function path"):
        split_path(spec)


def test_a_module_that_does_not_import_is_named(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "broken_rewards.py").write_text("import no_such_package_here\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    with pytest.raises(TraacError) as err:
        load_reward_func("broken_rewards:f")
    assert str(err.value) == (
        "extra_reward_funcs: broken_rewards:f: cannot import broken_rewards "
        "(ModuleNotFoundError: No module named 'no_such_package_here')"
    )


def test_names_must_differ_from_the_modes_rewards(rewards_module: str) -> None:
    with pytest.raises(TraacError, match="the name correctness_reward is already a reward"):
        load_extra_rewards([f"{rewards_module}:correctness_reward"], ["correctness_reward"])
    with pytest.raises(TraacError, match="the name brevity is already"):
        load_extra_rewards([f"{rewards_module}:brevity"] * 2, [])


@pytest.mark.parametrize(
    ("weights", "trl", "message"),
    [
        ([1.0, 2.0], None, "2 weights for 1 extra_reward_funcs"),
        ([math.nan], None, "nan must be a finite number"),
        ([1.0], [1.0, 1.0, 1.0, 1.0], "set it or TRL's reward_weights"),
    ],
)
def test_weights_are_checked(weights: list, trl: list | None, message: str) -> None:
    with pytest.raises(TraacError, match=f"extra_reward_weights: .*{message}"):
        check_extra_weights(["m:f"], weights, trl)
    check_extra_weights(["m:f"], [0.5], None)


def correctness_reward(completions, **kwargs):  # the mode's own, as TRL names it
    return [0.0] * len(completions)


def format_reward(completions, **kwargs):
    return [0.0] * len(completions)


def length_reward(completions, **kwargs):
    return [0.0] * len(completions)


def mine(prompts, completions, **kwargs):
    return [1.0] * len(completions)


MODE = [correctness_reward, format_reward, length_reward]


def test_reward_funcs_are_added_to_the_modes_never_in_their_place(tmp_path: Path) -> None:
    """TRL's `reward_funcs` keep TRAAC's rewards first; a name clash or a weight count that
    leaves a reward unweighted is one line naming the rewards."""
    args = TRAACConfig(output_dir=str(tmp_path), use_cpu=True)
    funcs = with_extra_rewards(MODE, args, [mine])
    assert funcs == [*MODE, mine] and args.reward_weights is None  # TRL: 1 each
    assert with_extra_rewards(MODE, args, mine) == [*MODE, mine]  # one function, as TRL allows
    assert with_extra_rewards(MODE, args, None) == MODE
    with pytest.raises(TraacError, match="reward_funcs: correctness_reward is already a reward "
                       "of mode traac, which traac keeps"):  # fmt: skip
        with_extra_rewards(MODE, args, [correctness_reward])
    weighted = TRAACConfig(output_dir=str(tmp_path), use_cpu=True, reward_weights=[2.0])
    with pytest.raises(TraacError) as error:
        with_extra_rewards(MODE, weighted, [mine])
    assert str(error.value) == (
        "reward_weights: 1 weights for 4 rewards (correctness_reward, format_reward, "
        "length_reward, mine); give one per reward, in that order"
    )


@pytest.mark.slow
def test_a_traac_step_sums_the_extra_reward_after_the_modes(
    rewards_module: str, quick_testbed: Path, tmp_path: Path
) -> None:
    tokenizer = load_tokenizer(str(quick_testbed))
    tokenizer.padding_side = "left"
    config = TRAACConfig(
        output_dir=str(tmp_path / "out"), use_cpu=True, bf16=False, report_to="none",
        save_strategy="no", disable_tqdm=True, max_steps=1, per_device_train_batch_size=8,
        num_generations=4, max_completion_length=64, seed=0, method_args={"scorer": "random"},
        extra_reward_funcs=[f"{rewards_module}:brevity"], extra_reward_weights=[0.5],
    )  # fmt: skip
    trainer = TRAACTrainer(
        str(quick_testbed),
        reward_funcs=[mine],  # the caller's, between the mode's and the recipe's
        args=config,
        train_dataset=items_to_dataset(make_items("easy", 4, seed=1, split="rl")),
        processing_class=tokenizer,
    )
    assert trainer.reward_func_names == [
        "correctness_reward", "format_reward", "length_reward", "mine", "brevity",
    ]  # fmt: skip
    assert trainer.reward_weights.tolist() == [1.0, 1.0, 1.0, 1.0, 0.5]
    trainer.train()
    calls = sys.modules[rewards_module].CALLS
    assert len(calls) == 1  # one training step, one call
    assert {"answer", "data_source", "trainer_state", "correct", "bin"} <= set(calls[0])
    logged = trainer.state.log_history[0]
    assert logged["rewards/brevity/mean"] < 0  # every completion has tokens
    assert logged["rewards/mine/mean"] == 1.0
