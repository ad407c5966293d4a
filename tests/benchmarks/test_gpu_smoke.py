"""`python benchmarks/gpu_smoke.py --tiny`: the GPU smoke command's CPU path, as a user runs it
(a subprocess, no network): LoRA then full fine-tuning, then an evaluation with a think budget
and test-time compression, each phase printing its figures."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

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
