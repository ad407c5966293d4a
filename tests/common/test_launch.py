"""The sharding a launch asks for, read before any weight loads (`traac.common.launch`)."""

from __future__ import annotations

import json

import pytest

from traac.common.launch import fsdp_launch, zero_stage

LAUNCH = ("ACCELERATE_USE_DEEPSPEED", "ACCELERATE_DEEPSPEED_ZERO_STAGE",
          "ACCELERATE_DEEPSPEED_CONFIG_FILE", "ACCELERATE_USE_FSDP")  # fmt: skip


@pytest.fixture(autouse=True)
def no_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in LAUNCH:
        monkeypatch.delenv(name, raising=False)


def test_the_recipes_deepspeed_config_names_the_stage(tmp_path) -> None:
    path = tmp_path / "ds.json"
    path.write_text(json.dumps({"zero_optimization": {"stage": 3}}))
    assert zero_stage({"zero_optimization": {"stage": 2}}) == 2
    assert zero_stage(str(path)) == 3
    assert zero_stage({"zero_optimization": {"stage": "auto"}}) is None
    assert zero_stage(None) is None


def test_an_accelerate_launch_names_it_through_its_environment(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", "3")
    assert zero_stage(None) is None  # a stage without DeepSpeed in use is not a launch
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
    assert zero_stage(None) == 3
    path = tmp_path / "ds.json"  # accelerate's `deepspeed_config_file` holds the stage then
    path.write_text(json.dumps({"zero_optimization": {"stage": 2}}))
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_CONFIG_FILE", str(path))
    assert zero_stage(None) == 2
    assert zero_stage({"zero_optimization": {"stage": 1}}) == 1  # the recipe's wins


def test_fsdp_from_the_recipe_or_the_launch(monkeypatch) -> None:
    assert not fsdp_launch("") and fsdp_launch("full_shard")
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    assert fsdp_launch(None)
