"""The peak-memory estimate `traac train --dry-run` prints: each term against numbers worked by
hand, the parameter counts against the models themselves, and the Qwen3-4B recipe against an
80 GB card (from Qwen3-4B's published config.json; no weights)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from peft import LoraConfig, get_peft_model
from transformers import Qwen3Config, Qwen3ForCausalLM

from traac.cli import main as cli_main
from traac.training import packages
from traac.training.memory import GIB, Sharding, count_parameters, estimate

RECIPES = Path(__file__).resolve().parents[2] / "recipes"
# Qwen/Qwen3-4B's config.json (the fields that size it), as published on the hub.
QWEN3_4B = {
    "hidden_size": 2560, "intermediate_size": 9728, "num_hidden_layers": 36,
    "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
    "vocab_size": 151936, "tie_word_embeddings": True, "max_position_embeddings": 40960,
}  # fmt: skip


def recipe(**overrides: Any) -> SimpleNamespace:
    values = {
        "load_dtype": torch.bfloat16, "compresses": True, "scoring_model": "reference",
        "scorer": "attention", "beta": 0.001, "use_vllm": True, "vllm_mode": "colocate",
        "vllm_gpu_memory_utilization": 0.5, "per_device_train_batch_size": 2,
        "max_completion_length": 1488, "gradient_checkpointing": True,
    }  # fmt: skip
    return SimpleNamespace(**{**values, **overrides})


SHAPE = {"hidden": 1000, "intermediate": 3000, "layers": 10, "vocab": 50000}


def test_each_term_is_the_hand_computed_one() -> None:
    """1e9 parameters in bf16 under ZeRO-2 on 8 processes, 2 sequences of 512 + 1488 tokens."""
    got = estimate(10**9, 10**9, **SHAPE, config=recipe(), sharding=Sharding(8, zero=2),
                   lora=False, card_gib=80)  # fmt: skip
    tokens = 2 * (512 + 1488)  # 4,000
    assert got.terms == {
        "weights": 2e9,  # 2 bytes each, whole on every process (ZeRO-2)
        "gradients": 2e9 / 8,
        "optimizer": 12e9 / 8,  # DeepSpeed's fp32 master weights and two moments
        "reference": 2e9,
        "vLLM": 0.5 * 80 * GIB,
        # one hidden state per layer kept (10 x 1000 x 2 bytes a token) plus one layer's whole
        # (8 x 1000 + 3 x 3000 values a token), plus the logits and their gradient
        "activations": tokens * 1000 * 2 * 10 + tokens * 17000 * 2 + 2 * 2 * 1488 * 50000 * 2,
    }
    assert got.terms["activations"] == 811_200_000


def test_sharding_lora_server_mode_and_float32_change_the_terms_they_should() -> None:
    zero3 = estimate(10**9, 10**9, **SHAPE, config=recipe(), sharding=Sharding(8, zero=3),
                     lora=False, card_gib=80).terms  # fmt: skip
    assert zero3["weights"] == zero3["reference"] == 2e9 / 8
    lora = estimate(10**9, 10**7, **SHAPE, config=recipe(use_vllm=False), sharding=Sharding(),
                    lora=True, card_gib=80).terms  # fmt: skip
    assert "reference" not in lora and "vLLM" not in lora  # the base is the reference
    assert lora["gradients"] == 2e7 and lora["optimizer"] == 2 * 2e7  # torch AdamW, bf16 moments
    fp32 = estimate(10**9, 10**9, **SHAPE, config=recipe(load_dtype=None, vllm_mode="server",
                    gradient_checkpointing=False), sharding=Sharding(), lora=False,
                    card_gib=80).terms  # fmt: skip
    assert fp32["weights"] == 4e9 and fp32["optimizer"] == 8e9 and "vLLM" not in fp32
    assert fp32["activations"] == 4000 * 17000 * 4 * 10 + 2 * 2 * 1488 * 50000 * 4


def test_parameters_are_counted_as_the_model_and_peft_count_them() -> None:
    config = Qwen3Config(**{**QWEN3_4B, "hidden_size": 32, "intermediate_size": 64,
                            "num_hidden_layers": 2, "num_attention_heads": 4,
                            "num_key_value_heads": 2, "head_dim": 8, "vocab_size": 97})  # fmt: skip
    model = Qwen3ForCausalLM(config)
    assert count_parameters(config) == (sum(p.numel() for p in model.parameters()),) * 2
    for targets, peft_targets in ((None, None), (["all-linear"], "all-linear")):
        lora = LoraConfig(r=4, target_modules=peft_targets)
        peft = get_peft_model(Qwen3ForCausalLM(config), lora)
        trainable = sum(p.numel() for p in peft.parameters() if p.requires_grad)
        assert count_parameters(config, (4, targets))[1] == trainable
    assert count_parameters(Qwen3Config(**QWEN3_4B))[0] == 4_022_468_096


@pytest.mark.parametrize(("batch", "fits"), [(None, True), ("4", False)])
def test_the_qwen3_4b_recipe_fits_an_80_gb_card_by_the_estimate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any, batch: str | None, fits: bool
) -> None:
    """As its comments launch it (8 GPUs, ZeRO-2); the recipe's former 4 sequences per device
    would not fit."""
    Qwen3Config(**QWEN3_4B).save_pretrained(tmp_path / "qwen3-4b")  # a config, no weights
    monkeypatch.setattr(packages, "find_spec", lambda name: True)  # vLLM, as on the GPU machine
    monkeypatch.setattr("traac.pipelines.plan.hub_reachable", lambda: False)
    monkeypatch.setattr("traac.data.hub.hub_reachable", lambda *a, **k: False)
    argv = ["train", "--config", str(RECIPES / "qwen3-4b.yaml"), "--model_name_or_path",
            str(tmp_path / "qwen3-4b"), "--output_dir", str(tmp_path / "out"), "--dry-run",
            "--dry_run_processes", "8", "--dry_run_sharding", "zero2"]  # fmt: skip
    if batch:
        argv += ["--per_device_train_batch_size", batch, "--gradient_accumulation_steps", "1",
                 "--steps_per_generation", "2"]  # fmt: skip
    assert cli_main(argv) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "weights bfloat16 (policy, reference and scorer; model_init_kwargs)" in out
    line = out[out.index("peak GPU memory") :]
    assert ("fits with 10% left" in line) == fits
    assert "sharding zero2 over 8 process(es)" in line
