"""Where a result came from: the code's commit, the CPU, the command and the time.

A figure outlives the machine that made it only with its provenance beside it: a kept run
record (`traac.pipelines.records`) says which commit trained it, on which CPU (the CPU changes
float rounding, so runs paired against each other share one), and with which command.
"""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

# The instruction-set flags that change a CPU run's speed or its bf16 path (docs/training.md).
CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")


def cpu() -> dict[str, Any]:
    """The CPU's model name, family and model numbers and its relevant flags (Linux's
    /proc/cpuinfo; the platform's processor string elsewhere)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {"name": platform.processor() or platform.machine(), "cores": os.cpu_count()}
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break  # the first processor's block is enough
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    flags = set(fields.get("flags", "").split())
    return {
        "name": fields.get("model name", platform.machine()),
        "family": fields.get("cpu family"),
        "model": fields.get("model"),
        "flags": [f for f in CPU_FLAGS if f in flags],
        "cores": os.cpu_count(),
    }


def commit(source: Path | None = None) -> dict[str, Any] | None:
    """The git commit of the checkout traac runs from (and whether it had local changes);
    None for an installed package or where git is missing."""
    where = source or Path(__file__).resolve().parent
    try:
        head = subprocess.run(["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip()  # fmt: skip
        status = subprocess.run(
            ["git", "-C", str(where), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": head, "dirty": bool(status.strip())}


def provenance() -> dict[str, Any]:
    """This process's provenance: code, CPU, command, time (UTC)."""
    return {
        "code": commit(),
        "cpu": cpu(),
        "command": shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "python": platform.python_version(),
        "time": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
