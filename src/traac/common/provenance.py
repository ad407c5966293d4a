"""Where a result came from: the code's commit, the packages' versions, the CPU and the machine,
the command and the time, and the weights a run starts from.

A figure outlives the machine that made it only with its provenance beside it: a kept run
record (`traac.pipelines.records`) says which commit trained it, with which torch,
transformers, TRL, peft and accelerate, on which CPU (the CPU changes float rounding, so runs
paired against each other share one) and which machine (a salted hash of its machine id: two
machines told apart, neither named), with which command, from which weights (their sha256: a
model built on first use differs between CPUs).
"""

from __future__ import annotations

import hashlib
import os
import platform
import shlex
import subprocess
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

# The instruction-set flags that change a CPU run's speed or its bf16 path (docs/training.md).
CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")
PACKAGES = (
    "torch",
    "transformers",
    "trl",
    "peft",
    "accelerate",
    "traac",
)  # what a run's numbers rest on
MACHINE_IDS = (Path("/etc/machine-id"), Path("/var/lib/dbus/machine-id"))
MACHINE_SALT = b"traac machine: "  # so that the record never holds the machine's own id
WEIGHTS = (".safetensors", ".bin", ".pt", ".pth", ".gguf")  # a model directory's weight files
UNKNOWN = "unknown"  # a field that could not be read (or was not recorded, in a backfill)


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
    flags = sorted(set(fields.get("flags", "").split()))
    return {
        "name": fields.get("model name", platform.machine()),
        "family": fields.get("cpu family"),
        "model": fields.get("model"),
        "flags": [f for f in CPU_FLAGS if f in flags],
        "flags_sha256": hashlib.sha256(" ".join(flags).encode()).hexdigest()[:16],
        "cores": os.cpu_count(),
    }


def machine() -> str:
    """An identifier of this machine that tells two apart without naming either: the salted
    sha256 of its machine id (`UNKNOWN` where it has none)."""
    for path in MACHINE_IDS:
        try:
            found = path.read_bytes().strip()
        except OSError:
            continue
        if found:
            return hashlib.sha256(MACHINE_SALT + found).hexdigest()[:16]
    return UNKNOWN


def versions() -> dict[str, str]:
    """The installed version of each of `PACKAGES` (`UNKNOWN` where one is not installed)."""
    found = {}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = UNKNOWN
    return found


def weights_sha256(model: Path) -> str:
    """The sha256 of a model's weights: of the file, or of a directory's weight files (`WEIGHTS`)
    in name order, each name then its bytes; `UNKNOWN` where there are none (a hub name)."""
    root = model.parent if model.is_file() else model
    files = (
        [model]
        if model.is_file()
        else sorted(f for f in model.rglob("*") if f.is_file() and f.name.endswith(WEIGHTS))
    )  # a path that is neither (a hub name) has none
    if not files:
        return UNKNOWN
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(root)).encode())
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


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


def now() -> str:
    """The time in UTC, to the second, as every record writes it."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def provenance() -> dict[str, Any]:
    """This process's provenance: code, versions, CPU, machine, command, time (UTC)."""
    return {
        "code": commit(),
        "versions": versions(),
        "cpu": cpu(),
        "machine": machine(),
        "command": shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "python": platform.python_version(),
        "time": now(),
    }
