"""Loading models: a LoRA adapter directory resolved through its base and loaded merged (the same
logits as peft's unmerged model), each broken form named in one line; `--device-map` checked
before any weight is read, and a model spread by accelerate computes what it does on one device."""

from __future__ import annotations

import importlib.util
import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from peft import LoraConfig, PeftModel, get_peft_model

from traac.common import models
from traac.common.models import (
    ADAPTER_CONFIG,
    PROMPT_STYLE_KEY,
    adapter_base,
    cache_kwargs,
    input_device,
    load_config,
    load_model,
    load_tokenizer,
    missing_model_files,
    prompt_style_of,
    resolve_model_path,
    resolve_placement,
)
from traac.errors import TraacError

CPU_ONLY = not torch.cuda.is_available()


@pytest.mark.skipif(not CPU_ONLY, reason="what a CPU-only machine resolves")
def test_placement_on_a_cpu_only_machine():
    assert resolve_placement(None, None) == (torch.device("cpu"), None)
    for strategy in models.DEVICE_MAPS:  # accelerate keeps the whole model on the CPU
        assert resolve_placement(None, strategy) == (torch.device("cpu"), strategy)
    assert resolve_placement("auto", "cpu") == (torch.device("cpu"), "cpu")
    with pytest.raises(TraacError, match=r"^--device-map cuda:1: no CUDA GPU is visible here"):
        resolve_placement(None, "cuda:1")


@pytest.mark.parametrize(
    ("device", "device_map", "message"),
    [
        ("cpu", "auto", r"--device cpu and --device-map auto: pass one"),
        (None, "everywhere", r"--device-map 'everywhere': use one of auto, balanced, "),
        (None, " ", r"--device-map ' ': use one of auto, balanced, balanced_low_0, sequential or"),
    ],
)
def test_a_bad_placement_is_one_line(device, device_map, message):
    with pytest.raises(TraacError, match=message) as err:
        resolve_placement(device, device_map)
    assert "\n" not in str(err.value)


def test_a_strategy_needs_accelerate(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "accelerate" else real(name)
    )
    with pytest.raises(TraacError, match="--device-map auto needs accelerate: pip install"):
        resolve_placement(None, "auto")


def test_a_mapped_model_computes_as_one_on_a_device(quick_testbed: Path):
    plain = load_model(str(quick_testbed), device="cpu")
    ids = torch.tensor([[1, 5, 9, 13, 2]])
    with torch.no_grad():
        expected = plain(input_ids=ids).logits
        for device_map in ("auto", "cpu"):
            mapped = load_model(str(quick_testbed), device_map=device_map)
            assert not mapped.training and mapped.dtype == plain.dtype
            assert input_device(mapped) == torch.device("cpu")
            torch.testing.assert_close(mapped(input_ids=ids).logits, expected, rtol=0, atol=0)


def test_the_cache_goes_by_the_name_the_forward_takes() -> None:
    class Before(torch.nn.Module):  # transformers up to 5.23
        def forward(self, input_ids: Any, past_key_values: Any = None) -> None: ...

    class After(torch.nn.Module):  # 5.24 on: `past_key_values` deprecated, gone in 5.40
        def forward(self, input_ids: Any, cache: Any = None, **kwargs: Any) -> None: ...

    cache = object()
    assert cache_kwargs(Before(), cache) == {"past_key_values": cache}
    assert cache_kwargs(After(), cache) == {"cache": cache}


def test_the_installed_transformers_takes_the_cache_without_a_warning(quick_testbed: Path):
    from transformers import DynamicCache

    model = load_model(str(quick_testbed), device="cpu")
    cache = DynamicCache(config=model.config)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*past_key_values")  # deprecated in 5.24
        with torch.no_grad():
            model.base_model(input_ids=torch.tensor([[1, 5, 9]]), use_cache=True,
                             **cache_kwargs(model.base_model, cache))  # fmt: skip
    assert cache.get_seq_length() == 3


@pytest.fixture
def adapter(tmp_path: Path, char_tokenizer: Callable, save_tiny: Callable) -> tuple[Path, Path]:
    """(base directory, adapter directory) of a tiny model with a non-zero LoRA adapter."""
    base = save_tiny(tmp_path / "base", char_tokenizer())
    config = json.loads((base / "config.json").read_text())
    (base / "config.json").write_text(json.dumps({**config, PROMPT_STYLE_KEY: "think"}))
    model = get_peft_model(
        load_model(str(base), device="cpu"),
        LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"]),
    )
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".lora_B." in name:
                p.normal_(0, 0.5)
    model.save_pretrained(tmp_path / "adapter")  # no tokenizer: the base's is used
    return base, tmp_path / "adapter"


def test_an_adapter_directory_is_a_model_through_its_base(adapter: tuple[Path, Path]) -> None:
    base, path = adapter
    assert resolve_model_path(str(path)) == str(path)
    assert adapter_base(str(path)) == str(base)
    assert adapter_base(str(base)) is None
    assert load_config(str(path)).to_dict() == load_config(str(base)).to_dict()
    assert prompt_style_of(str(path)) == "think"  # the base's
    assert load_tokenizer(str(path)).get_vocab() == load_tokenizer(str(base)).get_vocab()


def test_the_adapter_loads_merged_with_peft_models_logits(adapter: tuple[Path, Path]) -> None:
    base, path = adapter
    merged = load_model(str(path), device="cpu")
    assert not hasattr(merged, "peft_config")  # a plain transformers model
    unmerged = PeftModel.from_pretrained(load_model(str(base), device="cpu"), str(path)).eval()
    plain = load_model(str(base), device="cpu")
    ids = torch.tensor([[5, 9, 14, 3, 22, 8]])
    with torch.no_grad():
        out, expected, before = (m(input_ids=ids).logits for m in (merged, unmerged, plain))
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-4)
    assert not torch.allclose(out, before, atol=1e-4)  # the adapter is in the weights


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("{not json", "adapter_config.json is not a JSON mapping"),
        ({"peft_type": "LORA"}, "names no base_model_name_or_path"),
        ({"base_model_name_or_path": "/no/such/base"}, "its base: model '/no/such/base'"),
    ],
)
def test_a_broken_adapter_is_one_line(tmp_path: Path, config: Any, message: str) -> None:
    text = config if isinstance(config, str) else json.dumps(config)
    (tmp_path / ADAPTER_CONFIG).write_text(text)
    with pytest.raises(TraacError, match=message) as err:
        resolve_model_path(str(tmp_path))
    assert "\n" not in str(err.value)


def test_a_saved_model_directory_is_checked_without_reading_weights(
    tmp_path: Path, char_tokenizer: Callable, save_tiny: Callable
) -> None:
    """What `traac train` checks before it reports success: a config and every weight file."""
    whole = save_tiny(tmp_path / "whole", char_tokenizer())
    assert missing_model_files(whole) is None
    (whole / "model.safetensors").unlink()
    assert missing_model_files(whole) == (
        "no weights (model.safetensors or pytorch_model.bin, or a sharded index)"
    )
    (whole / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"a": "model-00001-of-00002.safetensors"}})
    )
    assert "absent shards (model-00001-of-00002.safetensors)" in missing_model_files(whole)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert missing_model_files(empty) == "no config.json"
    (empty / ADAPTER_CONFIG).write_text("{}")
    assert missing_model_files(empty).startswith("no weights (adapter_model.safetensors")
