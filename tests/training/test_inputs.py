"""What TRAACTrainer takes beyond GRPOTrainer: model names and TRL/open-r1 rows."""

from __future__ import annotations

from pathlib import Path

from datasets import Dataset

from traac.training.config import TRAACConfig
from traac.training.inputs import trainer_inputs

ROWS = [{"prompt": "4 + 1 =", "solution": "5"}, {"prompt": "6 + 7 =", "solution": "13"}]


def test_names_resolve_as_on_the_command_line(quick_testbed: Path) -> None:
    """`testbed-quick` as the policy becomes the cached model's directory (not a hub id to
    download), and as a foreign scorer stays as named, for the trainer to resolve the one way
    (`traac.common.scoring_model`); datasets get the columns the step reads."""
    args = TRAACConfig(output_dir="unused", use_cpu=True, scoring_model="testbed-quick")
    model, train, kwargs = trainer_inputs(
        "testbed-quick", args, Dataset.from_list(ROWS), {"eval_dataset": Dataset.from_list(ROWS)}
    )
    assert Path(model) == quick_testbed and args.scoring_model == "testbed-quick"
    assert train["answer"] == ["5", "13"] and kwargs["eval_dataset"]["id"] == ["0", "1"]


def test_objects_and_hub_ids_pass_through() -> None:
    args = TRAACConfig(output_dir="unused", use_cpu=True, mode="cr_lr", scoring_model="x/y")
    model = object()
    assert trainer_inputs(model, args, None, {})[0] is model
    assert trainer_inputs("Qwen/Qwen3-4B", args, None, {})[0] == "Qwen/Qwen3-4B"
    assert args.scoring_model == "x/y"  # a mode that does not compress reads no scorer
