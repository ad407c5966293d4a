"""The run's precision: whether bf16 is on, and the dtype every model loads in.

TRL's `GRPOConfig` turns bf16 on by default, which stops a laptop in transformers ("Your setup
doesn't support bf16/gpu"), and loads every model in float32 unless `model_init_kwargs` names a
dtype (Qwen3-4B in float32 is 16 GB a copy). Both are decided here, once, for `TRAACConfig`.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers.utils import is_torch_bf16_gpu_available, is_torch_xla_available

from traac.errors import TraacError

DTYPE_NAMES = {torch.bfloat16: "bfloat16", torch.float16: "float16", torch.float32: "float32"}


def resolve_bf16(bf16: bool | None, fp16: bool, use_cpu: bool) -> bool | None:
    """bf16 left unset follows the machine: TRL's bf16 where a GPU computes in it, full
    precision elsewhere (a laptop's `TRAACConfig(output_dir=...)` trains as it is, and bf16
    autocast on a CPU is slower than fp32 for small models). Set to True where no GPU has it,
    it fails here in one line instead of deep in transformers."""
    if fp16:
        return bf16  # TRL's own rule decides: bf16 off under fp16 unless set
    device_bf16 = not use_cpu and (is_torch_bf16_gpu_available() or is_torch_xla_available())
    if bf16 is None:
        return device_bf16
    if bf16 and not use_cpu and not device_bf16:
        raise TraacError(
            "bf16: True, but no GPU with bfloat16 support is visible; set bf16=False "
            "(full precision) or use_cpu=True (bf16 on the CPU)"
        )
    return bf16


def load_dtype(model_init_kwargs: Any, bf16: bool, fp16: bool) -> torch.dtype | None:
    """The dtype every model of the run loads in: `model_init_kwargs["dtype"]` if set, else
    bfloat16 under `bf16` and float16 under `fp16` (the policy, TRL's reference, a frozen
    scorer), else None (TRL's float32)."""
    named = model_init_kwargs.get("dtype") if isinstance(model_init_kwargs, dict) else None
    if named is not None and named != "auto":
        return named if isinstance(named, torch.dtype) else getattr(torch, named)
    return torch.bfloat16 if bf16 else torch.float16 if fp16 else None
