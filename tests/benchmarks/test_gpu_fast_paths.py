"""`python benchmarks/gpu_fast_paths.py --tiny`: the GPU measurements' script on the CPU, so the
one command docs/gpu.md names for the first GPU still runs (its figures are not checked)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_gpu_measurements_run_at_a_tiny_shape(tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_fast_paths.py"), "--tiny"],
        capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    for heading in ("## decode", "## memory", "## probe"):
        assert heading in out
    assert "static == padded eager tokens: True" in out
    for phase in ("training", "log-prob passes", "generation", "scorer"):
        assert f"| {phase} | n/a (no GPU) |" in out
    refused = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_fast_paths.py")],
        capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert refused.returncode == 2 and "no GPU here" in refused.stderr
