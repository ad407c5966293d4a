"""The TRL range pyproject declares is the range these checks pass on: every private TRL hook
TRAACTrainer overrides has the signature the trainer was written for, every private attribute it
reads exists, and no override escapes the list. A TRL upgrade that moves any of them fails here,
not at a user's first training step."""

from __future__ import annotations

import inspect
import re
from importlib.metadata import version
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version
from transformers import Trainer
from trl import GRPOTrainer

from traac.common.items import Item
from traac.data.training import items_to_dataset
from traac.training.planning.traac_config import TRAACConfig
from traac.training.step.copy_rules import TRL_ROLLOUT_MASK
from traac.training.step.host import StepHost
from traac.training.trl_adapter.trainer import TRAACTrainer
from traac.training.trl_adapter.trl_api import (
    TRANSFORMERS_ATTRIBUTES,
    TRL_ATTRIBUTES,
    TRL_BATCH_KEYS,
    TRL_CALLS,
    TRL_HOOKS,
)

ROOT = Path(__file__).resolve().parents[3]


def declared_trl_range() -> SpecifierSet:
    found = re.search(r'"trl([<>=!~][^"]*)"', (ROOT / "pyproject.toml").read_text())
    assert found, "pyproject.toml declares no trl requirement"
    return SpecifierSet(found.group(1))


def test_the_installed_trl_is_in_the_declared_range() -> None:
    assert Version(version("trl")) in declared_trl_range()


@pytest.mark.parametrize(("hook", "parameters"), list(TRL_HOOKS.items()))
def test_each_overridden_hook_has_the_signature_it_was_written_for(
    hook: str, parameters: tuple[str, ...]
) -> None:
    theirs = inspect.signature(getattr(GRPOTrainer, hook)).parameters
    ours = tuple(inspect.signature(getattr(TRAACTrainer, hook)).parameters)
    assert tuple(theirs) == parameters, f"TRL's {hook} now takes {tuple(theirs)}"
    if ours[-1] == "media":  # the rest are inputs ours passes on untouched, None for text
        named = ours[:-1]
        assert named == parameters[: len(named)]
        assert all(theirs[p].default is None for p in parameters[len(named) :])
    else:
        assert ours == parameters


@pytest.mark.parametrize(("name", "parameters"), list(TRL_CALLS.items()))
def test_each_private_method_called_has_the_signature_it_was_written_for(
    name: str, parameters: tuple[str, ...]
) -> None:
    assert tuple(inspect.signature(getattr(GRPOTrainer, name)).parameters) == parameters
    assert name not in vars(TRAACTrainer)  # called, not overridden


@pytest.mark.parametrize("key", TRL_BATCH_KEYS)
def test_each_batch_key_dynamic_sampling_rewrites_is_made_and_read_by_trl(key: str) -> None:
    """Dynamic sampling masks dropped groups by rewriting these keys of TRL's batch: TRL must
    still build each one and its loss still read it, or the mask would change nothing."""
    made = inspect.getsource(GRPOTrainer._generate_and_score_completions)
    read = inspect.getsource(GRPOTrainer._compute_loss)
    assert f'"{key}": ' in made
    assert f'inputs["{key}"]' in read


def test_the_rollout_mask_becomes_the_tool_mask_the_loss_reads() -> None:
    """`copy_loss: answer_only` hands TRL a per-token mask through `rollout_func`'s `env_mask`:
    TRL must still take it as its tool mask and its loss still read that."""
    given, batch = TRL_ROLLOUT_MASK
    assert f'extra_fields.pop("{given}", None)' in inspect.getsource(GRPOTrainer._generate)
    assert f'output["{batch}"] = {batch}' in inspect.getsource(
        GRPOTrainer._generate_and_score_completions
    )
    assert f'inputs["{batch}"]' in inspect.getsource(GRPOTrainer._compute_loss)


def test_no_private_override_escapes_the_contract() -> None:
    inherited = set(dir(GRPOTrainer)) | set(dir(Trainer))
    overrides = {
        name
        for name, value in vars(TRAACTrainer).items()
        if name.startswith("_") and not name.startswith("__") and name in inherited
        and callable(value)
    }  # fmt: skip
    assert overrides <= set(TRL_HOOKS), sorted(overrides - set(TRL_HOOKS))


HOST_MEMBERS = {name for name in vars(StepHost) if not name.startswith("_")}


def test_the_step_host_is_the_trainers_own_and_shadows_nothing_of_trl() -> None:
    """`TRAACTrainer` implements every member of `StepHost` (the step driver's view of the run)
    itself, under names neither TRL nor transformers define: an upgrade that adds one (say a
    `gather` method) would be shadowed, or shadow ours, silently."""
    assert HOST_MEMBERS and not HOST_MEMBERS - set(vars(TRAACTrainer))
    assert not HOST_MEMBERS & (set(dir(GRPOTrainer)) | set(dir(Trainer)))


def test_every_private_attribute_read_exists_on_a_built_trainer(
    tmp_path: Path, save_tiny, char_tokenizer
) -> None:
    tokenizer = char_tokenizer(
        ("<pad>", "<eos>", "<think>", "</think>"),
        eos="<eos>",
        chat_template="{% for m in messages %}{{ m['content'] }}{% endfor %}",
    )
    model = save_tiny(tmp_path / "model", tokenizer, eos_token_id=1, pad_token_id=0)
    items = [Item(id=str(k), question=f"{k}+1?", answer=str(k + 1)) for k in range(4)]
    args = TRAACConfig(
        output_dir=str(tmp_path / "out"), use_cpu=True, bf16=False, report_to="none",
        num_generations=2, per_device_train_batch_size=2, max_completion_length=8,
        gradient_checkpointing=False,
    )  # fmt: skip
    trainer = TRAACTrainer(
        str(model), args=args, train_dataset=items_to_dataset(items), processing_class=tokenizer
    )
    missing = [
        name for name in TRL_ATTRIBUTES + TRANSFORMERS_ATTRIBUTES if not hasattr(trainer, name)
    ]
    assert not missing
    assert not HOST_MEMBERS & set(vars(trainer))  # no attribute TRL sets hides a host member
