"""Which fields a run reads, from the registries alone (`traac.training.planning.effects`)."""

from __future__ import annotations

import pytest

from traac.training.methods.base import TRAAC_REWARDS
from traac.training.methods.registry import METHODS
from traac.training.methods.traac import TraacMethod
from traac.training.planning.effects import LORA_FIELDS, unread_fields


def names(given: dict, mode: str, use_peft: bool = False) -> list[str]:
    return [u.name for u in unread_fields(given, mode, use_peft)]


def test_every_mode_reads_what_its_registry_entry_says() -> None:
    every = {"traac": {"scorer": "random", "copy_loss": "answer_only"}, "alp": {"beta": 0.1},
             "lora_r": 8,
             "length_weight": 1.0, "format_preset": "paper", "beta": 0.1,
             "difficulty": {"easy_threshold": 0.7, "tau": {}, "single_tau": 0.5,
                            "length_scale": {}, "single_scale": 1.0}}  # fmt: skip
    assert names(every, "traac", use_peft=True) == [
        "alp.beta", "difficulty.single_tau", "difficulty.single_scale"
    ]  # fmt: skip
    assert names(every, "compression_no_difficulty", use_peft=True) == [
        "alp.beta", "difficulty.easy_threshold", "difficulty.tau", "difficulty.length_scale"
    ]  # fmt: skip
    assert names(every, "cr") == [
        "traac.scorer", "traac.copy_loss", "alp.beta", "lora_r", "length_weight", "format_preset",
        "difficulty.easy_threshold", "difficulty.tau", "difficulty.single_tau",
        "difficulty.length_scale", "difficulty.single_scale",
    ]  # fmt: skip
    assert names(every, "alp", use_peft=True) == [
        "traac.scorer", "traac.copy_loss", "length_weight", "difficulty.tau",
        "difficulty.single_tau", "difficulty.length_scale", "difficulty.single_scale",
    ]  # fmt: skip
    assert set(LORA_FIELDS) == {"lora_r", "lora_alpha", "lora_dropout", "lora_target_modules"}


def test_a_new_mode_is_read_off_the_registry_without_an_edit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A mode with TRAAC's bins and length rewards but no compression (as a future
    `traac_no_compression`): its compression settings and tau are unread, the bins' length
    scales and thresholds read."""
    mode = TraacMethod("bins_no_compression", "test", False, True, TRAAC_REWARDS)
    monkeypatch.setitem(METHODS, mode.name, mode)
    given = {"traac": {"scorer": "random", "scoring_model": "policy"},
             "difficulty": {"easy_threshold": 0.7, "tau": {}, "length_scale": {}}}  # fmt: skip
    found = unread_fields(given, mode.name, False)
    assert [u.name for u in found] == ["traac.scorer", "traac.scoring_model", "difficulty.tau"]
    assert found[0].why == "mode bins_no_compression never compresses"
