"""Provenance: the commit of the checkout traac runs from, the CPU, the command."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from traac.common.provenance import commit, cpu, provenance


def test_the_commit_is_the_checkouts_head_and_none_outside_git(tmp_path: Path) -> None:
    here = Path(__file__).resolve().parent
    head = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()  # fmt: skip
    found = commit(here)
    assert found is not None and found["commit"] == head and re.fullmatch(r"[0-9a-f]{40}", head)
    assert commit(tmp_path) is None


def test_the_cpu_and_command_are_named() -> None:
    record = provenance()
    assert record["cpu"] == cpu() and record["cpu"]["name"] and record["cpu"]["cores"] >= 1
    assert set(record["cpu"].get("flags", [])) <= {"avx2", "avx512f", "avx512_bf16", "amx_bf16"}
    assert record["command"] and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", record["time"])
