"""Where the probe's transformers copy goes when vLLM decodes (`traac eval --backend vllm
--compress-tau`), decided before either loads.

vLLM keeps no attention probe, so test-time compression loads the model (or `--scoring-model`)
a second time with transformers. vLLM takes `--gpu-memory-utilization` (0.9 by default) of
each of its `--tensor-parallel-size` GPUs (cuda:0 to cuda:N-1) when it starts; a copy loaded on
cuda:0 after that runs out of memory. So, unless `--device` names a device:
- a visible GPU vLLM does not use takes the copy (the first one past its group);
- else the copy shares cuda:0: vLLM's share is lowered to leave the copy room when the share
  was not given, and a given share that leaves too little, or a GPU too small for both, is
  refused in one line naming the setting to change.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from traac.errors import TraacError
from traac.evaluation.inference.generation import VLLMSettings

GiB = 1024**3
OVERHEAD = 1.5 * GiB  # the CUDA context and the probe forward's activations beside the weights
MIN_VLLM_SHARE = 0.3  # below this vLLM's KV cache holds too few tokens for a useful batch


@dataclass(frozen=True)
class Placement:
    """The probe copy's device and the engine settings vLLM starts with."""

    device: torch.device
    engine: VLLMSettings


def weight_bytes(path: str, dtype: torch.dtype) -> int:
    """The bytes a model directory's weights take in `dtype`, counted from the safetensors
    headers (no weight is read); else the size of its PyTorch weight files as stored."""
    params = 0
    for file in Path(path).glob("*.safetensors"):
        with file.open("rb") as handle:
            header = json.loads(handle.read(int.from_bytes(handle.read(8), "little")))
        params += sum(math.prod(t["shape"]) for k, t in header.items() if k != "__metadata__")
    if params:
        return params * torch.empty((), dtype=dtype).element_size()
    return sum(f.stat().st_size for f in Path(path).glob("*.bin"))


def place_probe(
    copy_bytes: int,
    gpu_bytes: list[int],
    engine: VLLMSettings,
    share_given: bool,
    device: torch.device,
    device_given: bool,
) -> Placement:
    """The decision, on the visible GPUs' sizes (`gpu_bytes[i]`: cuda:i's memory)."""
    if device.type != "cuda" or not gpu_bytes:
        return Placement(device, engine)
    tp = engine.tensor_parallel_size
    if not device_given and len(gpu_bytes) > tp:
        return Placement(torch.device("cuda", tp), engine)  # a GPU of its own
    index = device.index or 0
    if index >= tp:
        return Placement(device, engine)  # named by the user, outside vLLM's group
    total, need = gpu_bytes[index], copy_bytes + OVERHEAD
    share = engine.gpu_memory_utilization
    room = (1 - share) * total
    if room >= need:
        return Placement(device, engine)
    fitting = math.floor((total - need) / total * 20) / 20  # 0.05 steps
    where = f"cuda:{index}"
    if fitting < MIN_VLLM_SHARE:
        raise TraacError(
            f"--compress-tau on vLLM: the probe's copy of the model (about {need / GiB:.1f} GB) "
            f"leaves vLLM under {MIN_VLLM_SHARE:.0%} of {where} ({total / GiB:.0f} GB); make a "
            f"GPU beyond vLLM's {tp} visible for it, or put it on the CPU with --device cpu"
        )
    if share_given:
        raise TraacError(
            f"--gpu-memory-utilization {share} leaves {room / GiB:.1f} GB of {where} and the "
            f"probe's copy of the model needs about {need / GiB:.1f} GB: set it to {fitting} "
            "or lower, or make a GPU beyond vLLM's visible"
        )
    return Placement(device, replace(engine, gpu_memory_utilization=fitting))


def probe_placement(
    path: str,
    dtype: torch.dtype,
    engine: VLLMSettings,
    share_given: bool,
    device: torch.device,
    device_given: bool,
) -> Placement:
    """`place_probe` for the model at `path` on this machine's visible GPUs."""
    gpus = [torch.cuda.get_device_properties(i).total_memory for i in range(_gpu_count())]
    return place_probe(weight_bytes(path, dtype), gpus, engine, share_given, device, device_given)


def _gpu_count() -> int:
    return torch.cuda.device_count() if torch.cuda.is_available() else 0
