"""Optimiser profiles: each one's TRL options reach a built GRPOTrainer, under TRAAC's mode as
under a peer's; explicit values fill in or fail against an explicit profile."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from traac.common.items import Item
from traac.data.training import items_to_dataset
from traac.training.planning.profiles import OPTIMIZER_PROFILES, describe_profile
from traac.training.planning.traac_config import TRAACConfig, TRAACConfigError
from traac.training.trl_adapter.trainer import TRAACTrainer


def config(**overrides: Any) -> TRAACConfig:
    values: dict[str, Any] = {"output_dir": "unused", "use_cpu": True, "bf16": False}
    return TRAACConfig.from_recipe(**{**values, **overrides})


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory, save_tiny, char_tokenizer) -> tuple:
    tokenizer = char_tokenizer(
        ("<pad>", "<eos>", "<think>", "</think>"),
        eos="<eos>",
        chat_template="{% for m in messages %}{{ m['content'] }}{% endfor %}",
    )
    path = tmp_path_factory.mktemp("profile") / "model"
    return save_tiny(path, tokenizer, eos_token_id=1, pad_token_id=0), tokenizer


@pytest.mark.parametrize(
    ("profile", "mode"), [("grpo", "traac"), ("dler", "traac"), ("dler", "dler")]
)
def test_each_profile_reaches_the_trainer(tiny: tuple, tmp_path: Path, profile, mode) -> None:
    model, tokenizer = tiny
    args = config(
        output_dir=str(tmp_path), report_to="none", num_generations=2,
        per_device_train_batch_size=2, max_completion_length=8, gradient_checkpointing=False,
        optimizer_profile=profile, mode=mode, dler={"length": 6}, traac={"scorer": "random"},
    )  # fmt: skip
    items = [Item(id=str(k), question=f"{k}+1?", answer=str(k + 1)) for k in range(4)]
    trainer = TRAACTrainer(
        str(model), args=args, train_dataset=items_to_dataset(items), processing_class=tokenizer
    )
    expected = OPTIMIZER_PROFILES[profile]
    # The attributes GRPOTrainer's advantage and loss code read.
    assert trainer.scale_rewards == expected["scale_rewards"]
    assert trainer.epsilon_high == expected["epsilon_high"]
    assert trainer.epsilon_low == 0.2
    assert trainer.loss_type == expected["loss_type"]
    assert trainer.args.dynamic_sampling == expected["dynamic_sampling"]
    assert trainer.multi_objective_aggregation == "sum_then_normalize"


def test_unset_fields_take_the_profile_and_explicit_ones_stay() -> None:
    assert config().scale_rewards == "group" and config().dynamic_sampling == "none"
    c = config(scale_rewards="batch", dynamic_sampling="drop")  # no profile named: both kept
    assert (c.scale_rewards, c.epsilon_high, c.loss_type, c.dynamic_sampling) == (
        "batch", 0.28, "grpo", "drop",
    )  # fmt: skip
    c = config(optimizer_profile="dler", epsilon_high=0.28, max_resample_rounds=1)
    assert (c.scale_rewards, c.loss_type, c.dynamic_sampling) == ("batch", "dapo", "resample")
    assert config(scale_rewards=True).scale_rewards == "group"  # TRL's boolean spelling
    line = describe_profile(c.optimizer_profile, c)
    assert line.startswith("dler: scale_rewards batch, clip 0.2/0.28, loss_type dapo")
    assert "dynamic_sampling resample" in line
    assert describe_profile(None, config()).startswith("grpo (default): scale_rewards group")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"optimizer_profile": "dler", "scale_rewards": "group"}, "scale_rewards: 'group' con"),
        ({"optimizer_profile": "dler", "dynamic_sampling": "none"}, "dynamic_sampling: 'none'"),
        ({"optimizer_profile": "grpo", "epsilon_high": 0.2}, "epsilon_high: 0.2 conflicts"),
        ({"optimizer_profile": "grpo", "loss_type": "dapo"}, "loss_type: 'dapo' conflicts"),
        ({"optimizer_profile": "adam"}, "optimizer_profile: 'adam' is not one of grpo, dler"),
        (
            {"multi_objective_aggregation": "normalize_then_sum", "scale_rewards": "group"},
            "scale_rewards: 'group' is not used with multi_objective_aggregation",
        ),
        ({"mode": "dler", "max_completion_length": 160}, "dler.length: 4000 exceeds max_compl"),
        ({"mode": "laser_d", "laser_d": {"upper": 20000}}, "laser_d.upper: candidate targets 2500"),
    ],
)
def test_conflicts_fail_in_one_line_naming_the_field(overrides: dict, message: str) -> None:
    with pytest.raises(TRAACConfigError, match="^" + message.replace(".", r"\.")) as err:
        config(**overrides)
    assert "\n" not in str(err.value)


def test_per_reward_normalisation_is_trls_and_implies_batch_scaling() -> None:
    c = config(multi_objective_aggregation="normalize_then_sum", optimizer_profile="dler")
    assert c.scale_rewards == "batch"
    assert "each reward normalised within its group" in describe_profile("dler", c)
