"""The peak-memory estimate `traac train --dry-run` prints: each term against numbers worked by
hand, the parameter counts against the models themselves, and the Qwen3-4B recipe against an
80 GB card (from Qwen3-4B's published config.json; no weights)."""

from __future__ import annotations

import weakref
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
import torch.utils._pytree as pytree
from peft import LoraConfig, get_peft_model
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import Qwen3Config, Qwen3ForCausalLM

from traac.cli import main as cli_main
from traac.training.methods.traac import TraacSettings
from traac.training.planning import packages
from traac.training.planning.memory import (
    GIB,
    Shape,
    Sharding,
    count_parameters,
    estimate,
    layer_activation_bytes,
)

RECIPES = Path(__file__).resolve().parents[3] / "recipes"
# Qwen/Qwen3-4B's config.json (the fields that size it), as published on the hub.
QWEN3_4B = {
    "hidden_size": 2560, "intermediate_size": 9728, "num_hidden_layers": 36,
    "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
    "vocab_size": 151936, "tie_word_embeddings": True, "max_position_embeddings": 40960,
}  # fmt: skip


def recipe(**overrides: Any) -> SimpleNamespace:
    values = {
        "load_dtype": torch.bfloat16, "compresses": True,
        "traac_settings": TraacSettings(scorer="attention", scoring_model="reference"),
        "beta": 0.001, "use_vllm": True, "vllm_mode": "colocate",
        "vllm_gpu_memory_utilization": 0.5, "per_device_train_batch_size": 2,
        "max_completion_length": 1488, "gradient_checkpointing": True,
    }  # fmt: skip
    return SimpleNamespace(**{**values, **overrides})


SHAPE = Shape(hidden=1000, intermediate=3000, layers=10, vocab=50000, heads=8, kv_heads=2,
              head_dim=125)  # fmt: skip


def test_each_term_is_the_hand_computed_one() -> None:
    """1e9 parameters in bf16 under ZeRO-2 on 8 processes, 2 sequences of 512 + 1488 tokens."""
    got = estimate(10**9, 10**9, SHAPE, config=recipe(), sharding=Sharding(8, zero=2),
                   lora=None, card_gib=80)  # fmt: skip
    assert got.terms == {
        "weights": 2e9,  # 2 bytes each, whole on every process (ZeRO-2)
        "optimizer": 12e9 / 8,  # DeepSpeed's fp32 master weights and two moments
        "reference": 2e9,
        "vLLM": 0.5 * 80 * GIB,
    }
    tokens = 2 * (512 + 1488)  # 4,000
    # a layer keeps 6 hidden, 4 intermediate, 4 query and 4 kv values in bf16, the norms'
    # float32 copies (4 bytes a hidden value, 2 a query or kv one) and 4-byte scalars
    layer = 2 * (6000 + 12000 + 4000 + 1000) + 4 * 1000 + 2 * 1250 + 4 * (2 + 16 + 2)
    assert layer_activation_bytes(SHAPE, 2) == layer == 52_580
    logits = 2 * 1488 * 50000 * 2
    assert got.phases == {
        "training": {
            "gradients": 2e9 / 8,
            # one hidden state per layer kept (10 x 1000 x 2 bytes a token) plus one layer's whole
            "activations": tokens * (1000 * 2 * 10 + layer),
            "logits": 2 * logits,
        },
        "log-prob passes": {"logits": logits, "log-softmax": logits + 1488 * 50000 * 4},
        "scorer": {"activations": 8 * 2000 * layer, "probe rows": 8 * 2000 * 10 * 8 * 4},
    }  # vLLM generates: no KV cache of transformers' generation
    assert got.peak_phase == "training"
    assert got.total == sum(got.terms.values()) + sum(got.phases["training"].values())


def test_sharding_lora_server_mode_and_float32_change_the_terms_they_should() -> None:
    zero3 = estimate(10**9, 10**9, SHAPE, config=recipe(), sharding=Sharding(8, zero=3),
                     lora=None, card_gib=80).terms  # fmt: skip
    assert zero3["weights"] == zero3["reference"] == 2e9 / 8
    lora = estimate(10**9, 10**7, SHAPE, config=recipe(use_vllm=False, steps_per_generation=4),
                    sharding=Sharding(), lora=(4, None), card_gib=80)  # fmt: skip
    assert "reference" not in lora.terms and "vLLM" not in lora.terms  # the base is the reference
    assert lora.terms["weights"] == 2e9 + 4e7  # a bf16 base, float32 adapters
    assert lora.terms["optimizer"] == 8e7  # torch AdamW's float32 moments of the adapters
    assert lora.phases["training"]["gradients"] == 4e7
    # transformers generates: 2 x 4 rows of 2000 tokens, keys and values of 2 x 125 per layer
    # and one layer's again while the dynamic cache concatenates
    assert lora.phases["generation"] == {"KV cache": 8 * 2000 * 10 * 2 * 250 * 2 * 1.1}
    fp32 = estimate(10**9, 10**9, SHAPE, config=recipe(load_dtype=None, vllm_mode="server",
                    gradient_checkpointing=False), sharding=Sharding(), lora=None,
                    card_gib=80)  # fmt: skip
    assert fp32.terms["weights"] == 4e9 and fp32.terms["optimizer"] == 8e9
    assert "vLLM" not in fp32.terms
    layer = 4 * (6000 + 12000 + 4000 + 1000) + 4 * (2 + 16 + 2)  # no upcasts in float32
    assert fp32.phases["training"]["activations"] == 4000 * 10 * layer


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


# --------------------------------------------------------------------------------------------
# Each phase against the allocation peak of the same pass at a small shape (`Allocations`
# follows every tensor's storage on the CPU as the CUDA allocator's peak does on a GPU). The
# shape is none of those the activation bytes were fitted on.

SMALL = Shape(hidden=160, intermediate=448, layers=4, vocab=96, heads=6, kv_heads=2, head_dim=32)


def small_model(dtype: torch.dtype) -> Qwen3ForCausalLM:
    torch.manual_seed(0)
    config = Qwen3Config(hidden_size=SMALL.hidden, intermediate_size=SMALL.intermediate,
                         num_hidden_layers=SMALL.layers, num_attention_heads=SMALL.heads,
                         num_key_value_heads=SMALL.kv_heads, head_dim=SMALL.head_dim,
                         vocab_size=SMALL.vocab)  # fmt: skip
    model = Qwen3ForCausalLM(config).to(dtype)
    model.set_attn_implementation("sdpa")
    return model


class Allocations(TorchDispatchMode):
    """The bytes of the tensor storages created inside the block and still alive, and their
    peak: what the CUDA allocator's `max_memory_allocated` reports above the weights, here on
    the CPU (each storage counted once, released when it is freed)."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        # the weights' storages: a view of a weight (a transpose in a linear) allocates nothing
        self.held = {t.untyped_storage().data_ptr() for t in model.state_dict().values()}
        self.live: dict[int, int] = {}
        self.now = self.peak = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for t in pytree.tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.device.type == "cpu":
                storage = t.untyped_storage()
                key = storage.data_ptr()
                if key and key not in self.live and key not in self.held:
                    self.live[key] = storage.nbytes()
                    self.now += storage.nbytes()
                    self.peak = max(self.peak, self.now)
                    weakref.finalize(storage, self._free, key)
        return out

    def _free(self, key: int) -> None:
        self.now -= self.live.pop(key, 0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_activations_are_what_the_training_forward_keeps(dtype: torch.dtype) -> None:
    """What the forward leaves for the backward, at its end, against rows x tokens x layers x
    `layer_activation_bytes` plus the logits. Tolerance 10%: the estimate leaves out the
    embedding's output and the final norm, about a sixth of one layer here."""
    model, rows, tokens = small_model(dtype), 3, 80
    ids = torch.randint(0, SMALL.vocab, (rows, tokens))
    with Allocations(model) as got:
        logits = model(input_ids=ids).logits
    assert logits.shape == (rows, tokens, SMALL.vocab)
    width = torch.finfo(dtype).bits // 8
    expected = (
        rows * tokens * (SMALL.layers * layer_activation_bytes(SMALL, width) + SMALL.vocab * width)
    )
    assert got.now == pytest.approx(expected, rel=0.10)


@pytest.mark.parametrize("targets", [None, ["all-linear"]])
def test_lora_activations_are_what_its_training_forward_keeps(targets: Any) -> None:
    """As above for a LoRA run on a bf16 base (r 8, peft's dropout), with peft's default
    targets and all linears."""
    rows, tokens, rank = 3, 80, 8
    model = small_model(torch.bfloat16)
    peft_targets = None if targets is None else "all-linear"
    lora = LoraConfig(r=rank, lora_dropout=0.05, target_modules=peft_targets)
    model = get_peft_model(model, lora)
    ids = torch.randint(0, SMALL.vocab, (rows, tokens))
    with Allocations(model) as got:
        logits = model(input_ids=ids).logits  # kept, with the graph behind it
    assert logits.requires_grad
    layer = layer_activation_bytes(SMALL, 2, (rank, targets))
    expected = rows * tokens * (SMALL.layers * layer + SMALL.vocab * 2)
    assert got.now == pytest.approx(expected, rel=0.10)


def test_generation_peaks_at_the_kv_cache_it_fills() -> None:
    """`generate`'s peak above the weights against `kv_cache_bytes` of its rows: the dynamic
    cache grows by concatenation, so one layer's cache is briefly held twice, and the
    estimate counts that layer (`kv_cache_bytes` x (1 + 1 / layers)). Tolerance 15%: the
    per-step logits and one step's transient activations come on top at this small size (a
    short prompt, so that the prefill's activations stay below the cache, as in a rollout of
    hundreds of tokens)."""
    from traac.training.planning.memory import kv_cache_bytes

    model, rows, prompt, new = small_model(torch.bfloat16), 6, 4, 120
    ids = torch.randint(3, SMALL.vocab, (rows, prompt))
    generate = lambda: model.generate(  # noqa: E731
        input_ids=ids, max_new_tokens=new, min_new_tokens=new, do_sample=False, pad_token_id=0
    )
    with torch.inference_mode(), Allocations(model) as got:
        generate()
    config = recipe(use_vllm=False, per_device_train_batch_size=rows, max_completion_length=new)
    got_estimate = estimate(
        10**6, 10**6, SMALL, config=config, sharding=Sharding(), lora=None, prompt_tokens=prompt
    )
    cache = got_estimate.phases["generation"]["KV cache"]
    assert cache == kv_cache_bytes(SMALL, rows, prompt + new, 2) * (1 + 1 / SMALL.layers)
    assert got.peak == pytest.approx(cache, rel=0.15)


def test_a_log_prob_pass_peaks_at_its_logits_and_their_log_softmax() -> None:
    """A no-gradient forward over a batch and TRL's log-softmax of its logits, against the
    estimate's log-prob phase (bf16 logits, their scaled copy, one row's log-softmax).
    Tolerance 15%: one layer's transient activations (the estimate counts none) come on top."""
    from trl.trainer.utils import selective_log_softmax

    model, rows, tokens = small_model(torch.bfloat16), 4, 200
    wide = Qwen3Config(**{**model.config.to_dict(), "vocab_size": 4096})
    model = Qwen3ForCausalLM(wide).to(torch.bfloat16)  # a vocabulary that dominates, as in LMs
    ids = torch.randint(0, 4096, (rows, tokens))

    with torch.no_grad(), Allocations(model) as got:
        logits = model(input_ids=ids).logits
        selective_log_softmax(logits, ids, temperature=0.9)  # as TRL's log-prob passes call it
    config = recipe(per_device_train_batch_size=rows, max_completion_length=tokens)
    shape = Shape(**{**SMALL.__dict__, "vocab": 4096})
    phase = estimate(10**6, 10**6, shape, config=config, sharding=Sharding(), lora=None)
    assert got.peak == pytest.approx(sum(phase.phases["log-prob passes"].values()), rel=0.15)


def test_lora_keeps_float32_adapters_and_their_moments_on_a_bf16_base() -> None:
    model = get_peft_model(small_model(torch.bfloat16), LoraConfig(r=4))
    trainable = [p for p in model.parameters() if p.requires_grad]
    assert {p.dtype for p in trainable} == {torch.float32}  # what the estimate's 4 bytes assume
    optimizer = torch.optim.AdamW(trainable)
    for p in trainable:
        p.grad = torch.ones_like(p)
    optimizer.step()
    moments = sum(v.nbytes for state in optimizer.state.values() for v in state.values()
                  if torch.is_tensor(v) and v.dim() > 0)  # fmt: skip
    count = sum(p.numel() for p in trainable)
    config = recipe(use_vllm=False)
    got = estimate(10**6, count, SMALL, config=config, sharding=Sharding(), lora=(4, None))
    assert got.terms["optimizer"] == moments == 8 * count
