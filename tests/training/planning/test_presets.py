"""`preset: authors` reproduces the authors' code point by point (docs/method.md#presets): the
pool rule, the token-mean loss against `optimizer_profile`, the layer rule per model, the fields
a recipe pinned, and the dry run's account of each."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from traac.training.methods.traac import authors_probe_layers
from traac.training.methods.traac_presets import AUTHORS, PRESET_FILLS
from traac.training.planning.presets import preset_rows
from traac.training.planning.traac_config import TRAACConfig


def make(tmp_path: Path, **overrides: Any) -> TRAACConfig:
    """A config, spelt as a recipe (the compression settings in the `traac` block)."""
    return TRAACConfig.from_recipe(
        output_dir=str(tmp_path), use_cpu=True, report_to="none", **overrides
    )


def test_the_authors_re_answer_every_right_rollout_the_paper_only_the_pruned(
    tmp_path: Path,
) -> None:
    assert make(tmp_path, preset="authors").method_settings.copy_pool == "all_correct"
    assert make(tmp_path).method_settings.copy_pool == "evicted"
    pinned = make(tmp_path, preset="authors", traac={"copy_pool": "evicted"})
    assert pinned.method_settings.copy_pool == "evicted"
    assert pinned.preset_pinned == {"copy_pool": "recipe"}


@pytest.mark.parametrize(
    ("fields", "loss_type", "pinned"),
    [
        ({}, "dapo", None),  # verl's token mean
        ({"optimizer_profile": "dler"}, "dapo", "optimizer_profile dler"),
        ({"optimizer_profile": "grpo"}, "grpo", "optimizer_profile grpo"),  # the profile owns it
        ({"loss_type": "grpo"}, "grpo", "recipe"),
    ],
)
def test_the_authors_token_mean_meets_the_optimizer_profile(
    tmp_path: Path, fields: dict, loss_type: str, pinned: str | None
) -> None:
    config = make(tmp_path, preset="authors", **fields)
    assert config.loss_type == loss_type
    assert config.preset_pinned.get("loss_type") == pinned
    assert make(tmp_path).loss_type == "grpo"  # the paper's: each rollout's own mean


def test_the_authors_layer_rule_per_model(tmp_path: Path) -> None:
    layers = make(tmp_path, preset="authors").traac_settings.probe_layers_for
    assert layers("qwen3", "Qwen/Qwen3-4B") == "first_half"
    distills = (
        "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B",
        "deepseek-ai/DeepSeek-R1-Distill-Llama-8B",
    )
    assert layers("qwen2", distills[0]) == "all"
    assert layers("llama", distills[1]) == "all"
    # SmolLM2 is neither Qwen3 nor an R1 distill: the first half (traac's choice, documented).
    assert layers("llama", "/cache/traac/smollm2-think") == "first_half"
    paper = make(tmp_path).traac_settings
    assert paper.probe_layers_for("qwen3", "Qwen/Qwen3-4B") == "all"  # the paper's
    assert authors_probe_layers(None, distills[1].lower()) == "all"


def test_the_dry_run_names_each_authors_setting_and_what_overrode_it(tmp_path: Path) -> None:
    config = make(tmp_path, preset="authors", traac={"probe_layers": "all", "probe_heads": "gated"})
    rows = dict(preset_rows(config, "smollm2-think"))
    assert set(rows) == {f"authors: {s.field}" for s in AUTHORS} | {
        "authors: copy_tags", "authors: split_phrases",
    }  # fmt: skip
    assert rows["authors: probe_layers"].startswith(
        "all, the recipe's: overrides the authors' first_half (scripts/train/model_host_qwen.py"
    )
    assert rows["authors: probe_heads"].startswith(
        "gated, the recipe's: overrides the authors' all"
    )
    assert rows["authors: copy_pool"].startswith("all_correct, the authors' (")
    assert "vllm_rollout_spmd.py" in rows["authors: copy_pool"]
    assert rows["authors: loss_type"].startswith("dapo, the authors' (")
    assert rows["authors: copy_tags"].startswith("single, not the authors'")
    profiled = dict(preset_rows(make(tmp_path, preset="authors", optimizer_profile="grpo"), "x"))
    assert profiled["authors: loss_type"].startswith(
        "grpo, the optimizer_profile grpo's: overrides the authors' dapo"
    )
    (default,) = preset_rows(make(tmp_path), "x")
    assert default == (
        "preset traac",
        "format_preset paper, length_weight 2, probe_layers all, copy_pool evicted, "
        "copy_loss answer_only",
    )
    (paper,) = preset_rows(make(tmp_path, preset="paper"), "x")
    assert paper == (
        "preset paper",
        "format_preset paper, length_weight 2, probe_layers all, copy_pool evicted, copy_loss full",
    )
    authors = make(tmp_path, preset="authors", traac={"copy_loss": "answer_only"})
    masked = dict(preset_rows(authors, "x"))
    assert masked["authors: copy_loss"].startswith(
        "answer_only, the recipe's: overrides the authors' full"
    )
    assert set(PRESET_FILLS["paper"]) < set(PRESET_FILLS["authors"])  # + the authors' loss
