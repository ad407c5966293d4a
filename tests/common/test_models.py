"""Model placement: `--device-map` checked before any weight is read, and a model spread by
accelerate computes what the same model on one device does."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from traac.common import models
from traac.common.models import input_device, load_model, resolve_placement
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
