"""Where `traac eval --backend vllm --compress-tau` puts the probe's transformers copy, decided
on the visible GPUs' sizes (faked here: the decision is what runs on a GPU machine), and the
CLI refusing a GPU too small for both before vLLM or the copy loads."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from transformers import AutoModelForCausalLM

from traac.cli import main as cli_main
from traac.errors import TraacError
from traac.evaluation.inference.generation import VLLMSettings
from traac.evaluation.inference.placement import OVERHEAD, GiB, place_probe, weight_bytes

GPU = torch.device("cuda")
COPY = 8 * GiB  # a 4B model in bf16


def place(gpus: list[float], copy: float = COPY, *, share: float | None = None, tp: int = 1,
          device: torch.device = GPU, device_given: bool = False) -> Any:  # fmt: skip
    engine = VLLMSettings(tensor_parallel_size=tp)
    if share is not None:
        engine = VLLMSettings(tensor_parallel_size=tp, gpu_memory_utilization=share)
    sizes = [int(g * GiB) for g in gpus]
    return place_probe(int(copy), sizes, engine, share is not None, device, device_given)


def test_a_gpu_beyond_vllms_group_takes_the_copy() -> None:
    placed = place([80, 80], tp=1)
    assert placed.device == torch.device("cuda", 1)
    assert placed.engine.gpu_memory_utilization == 0.9  # vLLM keeps its share
    assert place([80, 80, 80], tp=2).device == torch.device("cuda", 2)


def test_sharing_cuda0_lowers_vllms_default_share_to_leave_room() -> None:
    placed = place([80])
    need = (COPY + OVERHEAD) / (80 * GiB)  # 0.119 of the GPU
    assert placed.device == GPU
    assert placed.engine.gpu_memory_utilization == 0.85 <= 1 - need
    assert place([80], share=0.5).engine.gpu_memory_utilization == 0.5  # room already


def test_a_given_share_that_leaves_no_room_is_refused_naming_it() -> None:
    with pytest.raises(TraacError) as err:
        place([80], share=0.9)
    assert str(err.value) == (
        "--gpu-memory-utilization 0.9 leaves 8.0 GB of cuda:0 and the probe's copy of the "
        "model needs about 9.5 GB: set it to 0.85 or lower, or make a GPU beyond vLLM's visible"
    )


def test_a_gpu_too_small_for_both_is_refused_naming_the_ways_out() -> None:
    with pytest.raises(
        TraacError,
        match=r"leaves vLLM under 30% of cuda:0 \(80 GB\); make a GPU "
        r"beyond vLLM's 2 visible for it, or put it on the CPU with --device cpu",
    ):
        place([80, 80], copy=60 * GiB, tp=2)  # fmt: skip


def test_a_device_the_user_names_is_kept() -> None:
    cpu = torch.device("cpu")
    assert place([80], copy=60 * GiB, device=cpu, device_given=True).device == cpu
    named = torch.device("cuda", 2)
    assert place([80, 80, 80], tp=2, device=named, device_given=True).device == named
    with pytest.raises(TraacError, match=r"--gpu-memory-utilization 0\.95"):  # cuda:0 named
        place([80, 80], share=0.95, device=torch.device("cuda", 0), device_given=True)
    assert place([], device=GPU).device == GPU  # no GPU seen: nothing to decide


def test_weight_bytes_counts_parameters_from_the_safetensors_headers(
    tmp_path: Path, save_tiny: Any, char_tokenizer: Any
) -> None:
    path = save_tiny(tmp_path / "m", char_tokenizer())
    model = AutoModelForCausalLM.from_pretrained(path)
    params = sum(p.numel() for p in model.parameters())  # tied weights once, as saved
    assert weight_bytes(str(path), torch.bfloat16) == 2 * params
    assert weight_bytes(str(tmp_path), torch.bfloat16) == 0  # no weights there


def test_eval_refuses_a_gpu_too_small_before_vllm_starts(
    quick_testbed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_vllm: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """One visible GPU of 1.6 GB (faked): vLLM and the probe's copy cannot share it."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    props = SimpleNamespace(total_memory=int(1.6 * GiB))
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: props)
    argv = ["eval", "--model", str(quick_testbed), "--dataset", "testbed:easy?n=2",
            "--backend", "vllm", "--compress-tau", "0.5", "--max-new-tokens", "8",
            "--output", str(tmp_path / "out")]  # fmt: skip
    assert cli_main(argv) == 2
    (line,) = [x for x in capsys.readouterr().err.splitlines() if "error" in x]
    assert "leaves vLLM under 30% of cuda:0 (2 GB)" in line and "--device cpu" in line
    assert fake_vllm.INSTANCES == []  # refused before vLLM took the GPU
