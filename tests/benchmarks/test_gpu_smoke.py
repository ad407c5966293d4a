"""`python benchmarks/gpu_smoke.py --tiny`: the GPU smoke command's CPU path, as a user runs it
(a subprocess, no network): LoRA then full fine-tuning, then an evaluation with a think budget
and test-time compression, each phase printing its figures; and the GPU path's arguments, with a
GPU faked, through the dry run the smoke runs before its first step."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import cuda_fake
import pytest

from traac.commands import eval as eval_parser
from traac.training.planning import packages

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_smoke_command_runs_every_phase_at_a_tiny_shape(tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": "",
           "TRAAC_CACHE_DIR": str(tmp_path / "cache")}  # fmt: skip
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_smoke.py"), "--tiny", "--steps", "3",
         "--output", str(tmp_path / "run")],
        capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "generation: transformers" in out
    step = r"[\d.]+ s, peak GPU memory n/a \(no GPU\), [\d.]+ s per step \(3 steps\), \d+ rollout"
    assert re.search(rf"^LoRA: {step}", out, re.M), out
    assert re.search(rf"^full fine-tuning: {step}", out, re.M), out
    assert re.search(r"^eval \(think budget, compress-tau\): [\d.]+ s", out, re.M), out
    assert (tmp_path / "run" / "lora" / "adapter_config.json").is_file()
    assert (tmp_path / "run" / "full" / "model.safetensors").is_file()
    samples = (tmp_path / "run" / "eval" / "samples.jsonl").read_text().splitlines()
    assert len(samples) == 24  # 8 problems per tier, one sample each


@pytest.fixture
def smoke(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[ModuleType]:
    """benchmarks/gpu_smoke.py as a module, run offline with an empty cache."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRAAC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    yield importlib.import_module("gpu_smoke")
    cuda_fake.reset()


@pytest.mark.parametrize("vllm", [False, True])
def test_the_gpu_paths_arguments_pass_the_dry_run(
    smoke: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, vllm: bool
) -> None:
    """The arguments the smoke sends on a GPU (one H100 faked; with and without vLLM, which
    is found as on the GPU image) go through `traac train --dry-run` as the smoke does before
    its first step, on the model shape it builds there (config and tokenizer: a dry run reads
    no weights)."""
    config, tokenizer = smoke.model_files(smoke.QWEN3_06B)
    model = tmp_path / "model"
    config.save_pretrained(model)
    tokenizer.save_pretrained(model)
    real = packages.find_spec
    monkeypatch.setattr(
        packages, "find_spec", lambda n: real("json") if n == "vllm" and vllm else real(n)
    )
    cuda_fake.install(monkeypatch.setattr, 1)
    plan = smoke.phases(tmp_path / "run", model, 5, tiny=False, gpu=True, vllm=vllm)
    assert [p.argv[0] for p in plan] == ["train", "train", "eval"]
    assert all("--use_cpu" in p.argv and "false" in p.argv for p in plan[:2])
    smoke.validate(plan)  # raises SystemExit naming the phase on a refused argument
    eval_parser.build_parser().parse_args(plan[2].argv[1:])  # argparse exits 2 on a bad one
    # What broke on the first GPU: a value the dry run now refuses as a run would.
    with pytest.raises(SystemExit, match="LoRA: the dry run exited 2"):
        smoke.validate([replace(plan[0], argv=[*plan[0].argv, "--num_threads", "0"])])
