"""A CUDA machine as far as argument validation asks: `torch.cuda` reports `count` H100s, so
`traac train --dry-run` validates a GPU command line as on the GPU (transformers sets its device
and checks bf16, accelerate its state) on a CPU. Nothing runs on the fake devices; install it
after torch's users are imported (bitsandbytes probes CUDA kernels at import)."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import accelerate.utils.imports
import torch
import transformers.utils.import_utils
from accelerate.state import AcceleratorState, PartialState

NAME = "NVIDIA H100 80GB HBM3"
MEMORY = 80 * 2**30


def install(setattr_: Callable[[Any, str, Any], None], count: int = 1) -> None:
    """Fake `count` GPUs with `setattr_` (a monkeypatch's `setattr`, which undoes it); the
    accelerate state starts afresh, so it is built on the fake devices."""
    cuda = torch.cuda
    properties = types.SimpleNamespace(name=NAME, total_memory=MEMORY, major=9, minor=0)
    fakes = {
        "is_available": lambda: True,
        "device_count": lambda: count,
        "is_bf16_supported": lambda *a, **k: True,
        "current_device": lambda: 0,
        "set_device": lambda *a: None,
        "get_device_name": lambda *a: NAME,
        "get_device_capability": lambda *a: (9, 0),
        "get_device_properties": lambda *a: properties,
        "mem_get_info": lambda *a: (MEMORY, MEMORY),
    }
    for name, fake in fakes.items():
        setattr_(cuda, name, fake)
    reset()


def reset() -> None:
    """Forget what the libraries remember of the devices (accelerate's state, their cached
    `is_torch_bf16_gpu_available` and the like): what they learnt from the fake GPUs must not
    outlive it, nor what they learnt before it hide it."""
    AcceleratorState._reset_state(reset_partial_state=True)
    PartialState._reset_state()
    for module in (transformers.utils.import_utils, accelerate.utils.imports):
        for name in dir(module):
            cached = getattr(module, name)
            if name.startswith("is_") and hasattr(cached, "cache_clear"):
                cached.cache_clear()
