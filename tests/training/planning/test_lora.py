"""LoRA in the trainer: the recipe fields and TRL's configs built from them, the quantized-base
checks up to where CUDA is needed, and TRAACTrainer training adapters on the quick testbed in
every kind of mode (TRAAC, an ablation, a peer method), scoring through the policy with its
adapters disabled."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from peft import LoraConfig, get_peft_model
from transformers import BitsAndBytesConfig

from traac.common.models import load_model, load_tokenizer
from traac.data.testbed_problems import make_items
from traac.data.training import items_to_dataset
from traac.errors import TraacError
from traac.training.planning.lora import LoraArguments, as_reference
from traac.training.planning.traac_config import TRAACConfig
from traac.training.trl_adapter.trainer import TRAACTrainer

N = 4  # rollouts per prompt
REASONINGS = [
    "First, 12 + 30 = 42. Then 42 / 2 = 21. Wait, check: 21 * 2 = 42. So the answer is 21.",
    "Let me add 5 and 7: that is 12. Then I double it to get 24. Therefore, 24.",
]


# ------------------------------------------------------------------ fields and TRL's configs


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"lora_r": 0}, "lora_r"),
        ({"lora_alpha": 0}, "lora_alpha"),
        ({"lora_dropout": 1.0}, "lora_dropout"),
        ({"lora_target_modules": ["q_proj", " "]}, "lora_target_modules"),
        ({"load_in_4bit": True, "load_in_8bit": True}, "load_in_4bit and load_in_8bit"),
        ({"load_in_4bit": True}, "load_in_4bit: a quantized base trains only adapters"),
        ({"load_in_8bit": True}, "load_in_8bit: a quantized base trains only adapters"),
    ],
)
def test_an_invalid_lora_field_is_named(fields: dict[str, Any], named: str) -> None:
    with pytest.raises(TraacError, match=named):
        LoraArguments(use_peft=not fields.get("load_in_4bit") and not fields.get("load_in_8bit"),
                      **fields).check_lora()  # fmt: skip


def test_without_use_peft_the_trainer_gets_no_configs() -> None:
    assert LoraArguments().trainer_kwargs(bf16=True) == {}
    assert LoraArguments().summary() == "off (every weight trains)"


def test_lora_fields_become_trls_lora_config() -> None:
    args = LoraArguments(use_peft=True, lora_r=4, lora_alpha=8, lora_dropout=0.0,
                         lora_target_modules=["q_proj", "v_proj"])  # fmt: skip
    kwargs = args.trainer_kwargs(bf16=False)
    lora = kwargs["peft_config"]
    assert isinstance(lora, LoraConfig) and kwargs["quantization_config"] is None
    assert (lora.r, lora.lora_alpha, lora.lora_dropout) == (4, 8, 0.0)
    assert lora.target_modules == {"q_proj", "v_proj"} and lora.task_type == "CAUSAL_LM"
    # TRL turns a single name into a string, so `all-linear` reaches peft as its keyword
    one = LoraArguments(use_peft=True, lora_target_modules=["all-linear"])
    assert one.trainer_kwargs(bf16=False)["peft_config"].target_modules == "all-linear"
    assert LoraArguments(lora_target_modules="all-linear").lora_target_modules == ["all-linear"]


@pytest.mark.parametrize(("bf16", "dtype"), [(True, torch.bfloat16), (False, torch.float32)])
def test_qlora_builds_a_4bit_nf4_config_computing_in_the_models_dtype(
    bf16: bool, dtype: torch.dtype
) -> None:
    """The QLoRA path up to where CUDA is needed: the config TRL loads the base with."""
    args = LoraArguments(use_peft=True, load_in_4bit=True)
    args.check_lora()
    quantization = args.trainer_kwargs(bf16=bf16)["quantization_config"]
    assert isinstance(quantization, BitsAndBytesConfig)
    assert quantization.load_in_4bit and not quantization.load_in_8bit
    assert quantization.bnb_4bit_quant_type == "nf4"
    assert quantization.bnb_4bit_compute_dtype == dtype
    assert "4-bit (QLoRA) base" in args.summary()
    eight = LoraArguments(use_peft=True, load_in_8bit=True).trainer_kwargs(bf16=bf16)
    assert eight["quantization_config"].load_in_8bit


def test_a_quantized_base_needs_bitsandbytes_then_cuda_or_its_cpu_release(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    args = LoraArguments(use_peft=True, load_in_4bit=True)
    assert LoraArguments(use_peft=True).gpu_requirement() is None
    find_spec = importlib.util.find_spec
    with monkeypatch.context() as patch:
        patch.setattr(
            importlib.util,
            "find_spec",
            lambda name, *a: None if name == "bitsandbytes" else find_spec(name, *a),
        )
        with pytest.raises(TraacError, match=r"bitsandbytes is not installed; pip install 'traac"):
            args.check_quantization()
    installed = {"bitsandbytes": "0.45.1"}
    version = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda n: installed.get(n) or version(n))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert args.gpu_requirement() is None  # any release quantizes on a CUDA GPU
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for field in ("load_in_4bit", "load_in_8bit"):
        line = LoraArguments(use_peft=True, **{field: True}).gpu_requirement()
        assert line == (
            f"{field}: bitsandbytes 0.45.1 quantizes on a CUDA GPU only and none is visible "
            "here; pip install 'bitsandbytes>=0.50' for the CPU, or drop it to train LoRA on a "
            "full-precision base"
        )
    installed["bitsandbytes"] = "0.50.2"
    assert args.gpu_requirement() is None  # the CPU release


# ------------------------------------------------------------------ the trainer with adapters


def lora_trainer(
    model: Path, tmp_path: Path, quantized: dict[str, bool] | None = None, **overrides: Any
) -> TRAACTrainer:
    values: dict[str, Any] = {
        "output_dir": str(tmp_path / "out"), "use_cpu": True, "bf16": False,
        "gradient_checkpointing": False, "report_to": "none", "save_strategy": "no",
        "disable_tqdm": True, "max_steps": 2, "per_device_train_batch_size": 2 * N,
        "num_generations": N, "max_completion_length": 64, "learning_rate": 1e-3, "seed": 0,
    }  # fmt: skip
    values.update(overrides)
    tokenizer = load_tokenizer(str(model))
    tokenizer.padding_side = "left"
    lora = LoraArguments(use_peft=True, lora_r=4, lora_alpha=8, lora_dropout=0.0, **quantized or {})
    lora.check_quantization()
    return TRAACTrainer(
        str(model),
        args=TRAACConfig.from_recipe(**values),
        train_dataset=items_to_dataset(make_items("easy", 6, seed=1, split="rl")),
        processing_class=tokenizer,
        **lora.trainer_kwargs(bf16=False),
    )


def weights(model: Any) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.named_parameters()}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "scorer", "beta"),
    [("traac", "attention", 0.04), ("cr_lr", "confidence", 0.0), ("alp", "attention", 0.04)],
)
def test_two_steps_train_only_the_adapters(
    quick_testbed: Path, tmp_path: Path, mode: str, scorer: str, beta: float
) -> None:
    trainer = lora_trainer(quick_testbed, tmp_path, mode=mode, traac={"scorer": scorer}, beta=beta)
    policy = trainer.accelerator.unwrap_model(trainer.model)
    assert trainer.ref_model is None  # TRL's reference: the policy with adapters disabled
    if trainer.compressor is not None:  # nor a frozen copy for scoring, even with beta = 0
        assert trainer.compressor.scorer.model is policy  # forwards enter the PEFT wrapper
    trainable = {n for n, p in policy.named_parameters() if p.requires_grad}
    assert trainable and all(".lora_A." in n or ".lora_B." in n for n in trainable)
    before = weights(policy)
    trainer.train()
    assert trainer.state.global_step == 2
    after = weights(policy)
    changed = {n for n in before if not torch.equal(before[n], after[n])}
    assert changed and changed <= trainable  # some adapter weights moved, no base weight did


@pytest.mark.slow
def test_a_step_on_4bit_weights_trains_the_adapters_on_the_cpu(
    quick_testbed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """QLoRA without CUDA (bitsandbytes 0.50 quantizes on the CPU): the base's projections
    are 4-bit, the probe scores the right rollouts (judged by the parity of their length)
    through them with the adapters disabled, and only adapters move."""
    monkeypatch.setattr(
        "traac.training.step.driver.verify_many",
        lambda items, texts, **kw: [len(t) % 2 == 1 for t in texts],
    )
    trainer = lora_trainer(
        quick_testbed, tmp_path, {"load_in_4bit": True}, max_steps=1, warmup_steps=0
    )
    policy = trainer.accelerator.unwrap_model(trainer.model)
    assert not torch.cuda.is_available()
    bases = [type(m).__name__ for n, m in policy.named_modules() if n.endswith("proj.base_layer")]
    assert bases and set(bases) == {"Linear4bit"}
    before = weights(policy)
    trainer.train()
    assert trainer.state.global_step == 1 and trainer.last_step is not None
    assert trainer.last_step.stats.flat()["traac/all/candidates"] > 0  # the probe ran
    # The 4-bit bytes too: bitsandbytes kept from repacking them for CPU inference, after
    # which no gradient reached the adapters (`keep_4bit_trainable`).
    after = weights(policy)
    assert all(before[n].shape == after[n].shape for n in before)
    changed = {n for n in before if not torch.equal(before[n], after[n])}
    assert changed and all(".lora_" in n for n in changed)


def scores(trainer: TRAACTrainer, compressor: Any = None) -> list[Any]:
    return [t.scores for t in (compressor or trainer.compressor).score(REASONINGS)]


@pytest.mark.slow
def test_the_probe_through_disabled_adapters_is_the_base_models(
    quick_testbed: Path, tmp_path: Path
) -> None:
    trainer = lora_trainer(quick_testbed, tmp_path)
    policy = trainer.accelerator.unwrap_model(trainer.model)
    randomize(policy, "default", seed=0)  # adapters that change the model (B starts at zero)
    with trainer.scoring():  # as the step scores: eval mode, adapters disabled
        through_policy = scores(trainer)
    trainer.probe = replace(
        trainer.probe, model=load_model(str(quick_testbed), device="cpu", dtype=torch.float32)
    )
    base = scores(trainer, trainer._build_compressor())
    trainer.probe = replace(trainer.probe, model=None)
    policy.eval()
    with_adapters = scores(trainer)
    for a, b, c in zip(through_policy, base, with_adapters, strict=True):
        assert a.shape == b.shape
        torch.testing.assert_close(torch.as_tensor(a), torch.as_tensor(b), atol=1e-5, rtol=1e-4)
        assert not torch.allclose(torch.as_tensor(c), torch.as_tensor(b), atol=1e-4)


def randomize(model: Any, adapter: str, seed: int) -> None:
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if f".lora_B.{adapter}." in name:
                p.normal_(0, 0.5)


def test_as_reference_follows_trls_rule(tiny_model: Any) -> None:
    """The base alone; or TRL's `ref` copy of the adapter a policy came with; a plain model
    as it is."""
    model = tiny_model()
    ids = torch.tensor([[5, 9, 14, 3, 22, 8]])

    def logits() -> torch.Tensor:
        with torch.no_grad():
            return policy(input_ids=ids).logits

    policy = model
    base = logits()
    with as_reference(model):
        torch.testing.assert_close(logits(), base)
    policy = get_peft_model(model, LoraConfig(r=2, target_modules=["q_proj", "v_proj"])).eval()
    randomize(policy, "default", seed=0)
    initial = logits()
    assert not torch.allclose(initial, base, atol=1e-4)
    with as_reference(policy):
        torch.testing.assert_close(logits(), base)
    with as_reference(policy, active=False):
        torch.testing.assert_close(logits(), initial)
    policy.add_adapter("ref", policy.peft_config["default"])  # as TRL does for such a policy
    for name, p in policy.named_parameters():
        if ".default." in name:
            policy.get_parameter(name.replace(".default.", ".ref.")).data.copy_(p.data)
    randomize(policy, "default", seed=1)  # the policy trains on
    with as_reference(policy):
        torch.testing.assert_close(logits(), initial)
    assert not torch.allclose(logits(), initial, atol=1e-4)
