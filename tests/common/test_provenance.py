"""Provenance: the commit of the checkout traac runs from, the versions, the CPU and the machine,
the command, the starting weights."""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

import pytest

from traac.common import provenance as module
from traac.common.provenance import PACKAGES, UNKNOWN, commit, cpu, provenance, weights_sha256


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


def test_versions_and_the_machine_are_named_without_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every package a run's numbers rest on has its version; the machine is a salted hash of
    its machine id: two ids give two identifiers, neither holds the id, none gives `unknown`."""
    record = provenance()
    assert list(record["versions"]) == list(PACKAGES) and record["versions"]["torch"] != UNKNOWN
    assert re.fullmatch(r"[0-9a-f]{16}", record["cpu"]["flags_sha256"])
    ids = []
    for text in ("0123abcd\n", "4567ef01\n"):
        (tmp_path / "machine-id").write_text(text)
        monkeypatch.setattr(module, "MACHINE_IDS", (tmp_path / "absent", tmp_path / "machine-id"))
        ids.append(module.machine())
        assert text.strip() not in ids[-1] and re.fullmatch(r"[0-9a-f]{16}", ids[-1])
    assert ids[0] != ids[1]
    monkeypatch.setattr(module, "MACHINE_IDS", (tmp_path / "absent",))
    assert module.machine() == UNKNOWN


def test_the_weights_sha256_is_of_their_names_and_bytes(tmp_path: Path) -> None:
    """A directory's weight files in name order, each name then its bytes; other files do not
    count; a changed byte changes it; a hub name (no such path) is `unknown`."""
    (tmp_path / "b.safetensors").write_bytes(b"BB")
    (tmp_path / "a.bin").write_bytes(b"A")
    (tmp_path / "config.json").write_text("{}")
    by_hand = hashlib.sha256(b"a.binAb.safetensorsBB").hexdigest()
    assert weights_sha256(tmp_path) == by_hand
    assert weights_sha256(tmp_path / "a.bin") == hashlib.sha256(b"a.binA").hexdigest()
    (tmp_path / "a.bin").write_bytes(b"a")
    assert weights_sha256(tmp_path) != by_hand
    assert weights_sha256(tmp_path / "org--model") == UNKNOWN
