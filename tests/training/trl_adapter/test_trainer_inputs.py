"""What TRAACTrainer takes beyond GRPOTrainer: model names and TRL/open-r1 rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from datasets import Dataset

from traac.errors import TraacError
from traac.training.planning.traac_config import TRAACConfig
from traac.training.trl_adapter.trainer_inputs import trainer_inputs

ROWS = [{"prompt": "4 + 1 =", "solution": "5"}, {"prompt": "6 + 7 =", "solution": "13"}]


def test_names_resolve_as_on_the_command_line(quick_testbed: Path) -> None:
    """`testbed-quick` as the policy becomes the cached model's directory (not a hub id to
    download), and as a foreign scorer stays as named, for the trainer to resolve the one way
    (`traac.common.scoring_model`); datasets get the columns the step reads."""
    args = TRAACConfig(
        output_dir="unused", use_cpu=True, method_args={"scoring_model": "testbed-quick"}
    )
    model, train, kwargs = trainer_inputs(
        "testbed-quick", args, Dataset.from_list(ROWS), {"eval_dataset": Dataset.from_list(ROWS)}
    )
    assert Path(model) == quick_testbed
    assert args.method_settings.scoring_model == "testbed-quick"
    assert train["answer"] == ["5", "13"] and kwargs["eval_dataset"]["id"] == ["0", "1"]


def test_objects_and_hub_ids_pass_through() -> None:
    args = TRAACConfig(output_dir="unused", use_cpu=True, method_args={"scoring_model": "x/y"})
    model = object()
    assert trainer_inputs(model, args, None, {})[0] is model
    assert trainer_inputs("Qwen/Qwen3-4B", args, None, {})[0] == "Qwen/Qwen3-4B"
    assert args.method_settings.scoring_model == "x/y"  # a foreign scorer, resolved later


# TRAACTrainer's arguments that need no model, each one line before any model work (issue 60,
# kinds 3 and 4): TRL failed on them after loading the model, or tried the hub.
TRAINER_MISTAKES = [
    ({"reward_funcs": 42}, "reward_funcs: 42 is an int; pass a reward function"),
    ({"reward_funcs": [len, "x"]}, "reward_funcs[0]: len(obj, /) cannot take TRL's reward call"),
    ({"reward_funcs": "someone/reward-model"},
     "reward_funcs: 'someone/reward-model' is no reward TRL names, no local model directory"),
    ({"reward_funcs": "accuracy_rewrd"}, "(did you mean accuracy_reward?)"),
    ({"reward_funcs": "no_module:f"}, "reward_funcs: no_module:f: cannot import no_module"),
    ({"train_dataset": ROWS}, "train_dataset: of type list; traac trains on a datasets.Dataset: "
     "pass datasets.Dataset.from_list(rows)"),
    ({"train_dataset": {"train": None}}, "train_dataset: of type dict; traac trains on a "
     "datasets.Dataset: pass one split, e.g. dataset['train']"),
    ({"eval_dataset": ROWS}, "eval_dataset: of type list"),
    ({"model": 3}, "model: 3 is of type int; pass a model name"),
    # rows `traac train --dataset` refuses: the API loaded the weights and trained on them
    # (loss 0; an empty set "trained 0 steps, model saved") (issue 72, kind 5)
    ({"train_dataset": Dataset.from_list([*ROWS, {"prompt": "1 + 1 =", "solution": None}])},
     "train_dataset: row 2 has no 'solution' field (or it is empty)"),
    ({"train_dataset": Dataset.from_list(ROWS).filter(lambda row: False)},
     "train_dataset: no rows (did a filter keep none?); pass at least one problem"),
    ({"train_dataset": Dataset.from_list([{"question": " ", "answer": "1"}])},
     "train_dataset: row 0 has no 'question' field (or it is empty)"),
    ({"eval_dataset": {"held": Dataset.from_list([{"prompt": "1 =", "answer": ""}])}},
     "eval_dataset['held']: row 0 has no 'answer' field (or it is empty)"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("given", "message"), TRAINER_MISTAKES, ids=[m for _, m in TRAINER_MISTAKES]
)
def test_trainer_arguments_are_one_line_before_any_model_work(
    given: dict[str, Any], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from traac.training.trl_adapter.trainer import TRAACTrainer

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("model work started")

    monkeypatch.setattr("traac.training.trl_adapter.trainer_inputs.resolve_name", refuse)
    monkeypatch.setattr("trl.GRPOTrainer.__init__", refuse)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    args = TRAACConfig(output_dir=str(tmp_path / "out"), use_cpu=True, report_to="none")
    arguments = {"model": "testbed-tiny", "args": args, "train_dataset": Dataset.from_list(ROWS)}
    with pytest.raises(TraacError) as raised:
        TRAACTrainer(**{**arguments, **given})
    assert message in str(raised.value) and "\n" not in str(raised.value)


@pytest.mark.parametrize("where", ["file", "under a file", "/proc/traac-out"])
def test_an_output_dir_that_cannot_be_made_is_one_line_before_any_model_work(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """transformers' `Trainer.__init__` raised FileExistsError / PermissionError after the
    model had loaded (issue 60, kind 2)."""
    from traac.training.trl_adapter.trainer import TRAACTrainer

    monkeypatch.setattr("traac.training.trl_adapter.trainer_inputs.resolve_name",
                        lambda *a, **k: pytest.fail("model work started"))  # fmt: skip
    (tmp_path / "file").write_text("")
    output = {"file": tmp_path / "file", "under a file": tmp_path / "file" / "out"}.get(
        where, Path(where)
    )
    args = TRAACConfig(output_dir=str(output), use_cpu=True, report_to="none")
    with pytest.raises(TraacError, match=f"output_dir {output}: "):
        TRAACTrainer("testbed-tiny", args=args, train_dataset=Dataset.from_list(ROWS))


def test_named_rewards_resolve_to_functions_and_models_stay_as_given(tmp_path: Path) -> None:
    """TRL's rewards by name become TRL's functions (as `trl grpo --reward_funcs` names them);
    a local model directory stays a string for TRL to load as a reward model."""
    import trl.rewards

    from traac.training.planning.extra_rewards import given_rewards

    (tmp_path / "rm").mkdir()
    (tmp_path / "rm" / "config.json").write_text("{}")
    assert given_rewards(["think_format_reward", str(tmp_path / "rm")]) == [
        trl.rewards.think_format_reward, str(tmp_path / "rm")
    ]  # fmt: skip
    with pytest.raises(TraacError, match=r"holds no config\.json"):
        given_rewards(str(tmp_path))
    assert given_rewards(None) == []


def test_probe_layers_past_the_policy_are_named_from_its_config_before_the_weights_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, char_tokenizer: Any, save_tiny: Any
) -> None:
    """The probe's layers were resolved once the policy and its reference had loaded (issue 60,
    kind 3); a mode that does not compress reads no layers."""
    from traac.training.trl_adapter.trainer import TRAACTrainer

    model = str(save_tiny(tmp_path / "m", char_tokenizer()))
    monkeypatch.setattr("trl.GRPOTrainer.__init__",
                        lambda *a, **k: pytest.fail("the weights started to load"))  # fmt: skip
    rows = Dataset.from_list(ROWS)
    probe = {"probe_layers": "0,7"}
    args = TRAACConfig(output_dir=str(tmp_path / "o"), use_cpu=True, method_args=probe)
    with pytest.raises(TraacError, match=r"probe_layers: \[0, 7\] must be a non-empty set of "):
        TRAACTrainer(model, args=args, train_dataset=rows, processing_class=char_tokenizer())
    args = TRAACConfig.from_recipe(
        output_dir=str(tmp_path / "o"), use_cpu=True, mode="cr_lr", traac=probe
    )  # fmt: skip: a shared recipe's probe, unused
    with pytest.raises(pytest.fail.Exception, match="the weights started to load"):
        TRAACTrainer(model, args=args, train_dataset=rows, processing_class=char_tokenizer())
