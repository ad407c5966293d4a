"""`.ci/check_gpu_extra.py`, which `.ci/run` runs against the package index: its verdicts on
resolutions built from the real metadata of vLLM 0.30.0 / 0.31.0 / 0.32.0 (what main's and
this tree's gpu extra resolved to on 2026-11-25), and pyproject.toml's pins against that
metadata, offline."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.version import Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "check_gpu_extra", ROOT / ".ci" / "check_gpu_extra.py"
)
check = sys.modules["check_gpu_extra"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check)

ENV = {
    "implementation_name": "cpython", "implementation_version": "3.11.7", "os_name": "posix",
    "platform_machine": "x86_64", "platform_release": "6.1", "platform_system": "Linux",
    "platform_version": "#1", "python_full_version": "3.11.7",
    "platform_python_implementation": "CPython", "python_version": "3.11", "sys_platform": "linux",
}  # fmt: skip
# Requires-Dist of each vLLM wheel (manylinux x86_64), as read from its METADATA on 2026-11-25:
# (transformers, torch).
VLLM = {
    "0.29.0": ("transformers>=5.10.4", "torch==2.13.0"),
    "0.30.0": ("transformers>=5.10.4", "torch==2.13.0"),
    "0.31.0": ("transformers<5.18.0,>=5.10.4", "torch==2.13.0"),
    "0.32.0": ("transformers<5.20.0,>=5.16.1", "torch==2.13.0"),
    "0.33.0": ("transformers<5.21.0,>=5.16.1", "torch==2.14.0"),
}
TRANSFORMERS = ["5.10.4", "5.12.1", "5.14.1", "5.16.1", "5.17.0", "5.18.0", "5.19.0", "5.20.2",
                "5.21.1", "5.22.2", "5.23.0", "5.24.0"]  # fmt: skip
TRL = ["transformers>=4.56.2", 'vllm<=0.31.0,>=0.22.0; extra == "vllm"']


def entry(name: str, version: str, requires: list[str], extras: list[str] = ()) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "version": version, "requires_dist": requires},
        "requested_extras": list(extras),
    }


def report(vllm: str, transformers: str, vllm_requires: tuple[str, ...] | None = None) -> dict:
    return {
        "environment": ENV,
        "install": [
            entry("traac", "0.1.0", ["transformers>=5.17,<6", 'vllm==0.31.0; extra == "vllm"',
                                     "torch>=2.4", "trl<1.17,>=1.16"], ["gpu", "vllm"]),
            entry("vllm", vllm, list(vllm_requires or VLLM[vllm])),
            entry("transformers", transformers, []),
            entry("torch", "2.13.0", []),
            entry("trl", "1.16.0", TRL),
        ],
    }  # fmt: skip


def problems(data: dict) -> list[str]:
    return check.problems(*check.load_report(data))


def test_mains_resolution_vllm_0_30_with_transformers_5_24_fails() -> None:
    found = problems(report("0.30.0", "5.24.0"))
    assert any("vllm 0.30.0 requires transformers>=5.10.4 with no upper bound" in p for p in found)
    assert any("traac 0.1.0 requires vllm==0.31.0" in p for p in found)


def test_the_tested_set_vllm_0_31_with_transformers_5_17_passes() -> None:
    assert problems(report("0.31.0", "5.17.0")) == []


def test_a_cap_that_does_not_hold_is_named() -> None:
    found = problems(report("0.31.0", "5.24.0"))
    assert (
        "vllm 0.31.0 requires transformers<5.18.0,>=5.10.4; resolved transformers 5.24.0" in found
    )


def test_a_vllm_outside_trls_range_and_one_without_a_torch_pin_fail() -> None:
    found = problems(report("0.32.0", "5.17.0", ("transformers<5.20.0", "torch>=2.13")))
    assert any("trl 1.16.0 accepts vllm<=0.31.0,>=0.22.0" in p for p in found)
    assert any("pins no torch" in p for p in found)


def test_extras_one_package_asks_of_another_are_followed() -> None:
    data = report("0.31.0", "5.17.0")
    data["install"] += [entry("a", "1.0", ["b[x]"]), entry("b", "1.0", ['c>=2; extra == "x"']),
                        entry("c", "1.0", [])]  # fmt: skip
    data["install"][0]["metadata"]["requires_dist"].append("a")
    assert problems(data) == ['b 1.0 requires c>=2; extra == "x"; resolved c 1.0']


def test_pyproject_pins_a_vllm_whose_transformers_cap_meets_traacs_range() -> None:
    """Every recorded vLLM release the vllm extra admits caps transformers, pins torch, and
    leaves a transformers release that traac's own requirement accepts too."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = next(Requirement(r) for r in project["dependencies"] if r.startswith("transformers"))
    extra = [Requirement(r) for r in project["optional-dependencies"]["vllm"]]
    admitted = [v for v in VLLM if all(r.specifier.contains(v) for r in extra if r.name == "vllm")]
    assert admitted, "the vllm extra admits no recorded vLLM release"
    for version in admitted:
        cap, torch = (Requirement(r) for r in VLLM[version])
        assert any(s.operator in ("<", "<=", "==") for s in cap.specifier), version
        assert any(s.operator == "==" for s in torch.specifier), version
        both = [t for t in TRANSFORMERS if t in cap.specifier and t in core.specifier]
        assert both, f"vllm {version} allows {cap}, traac {core}: no transformers fits both"
        assert Version(max(both)) == Version("5.17.0")  # what .ci/run tests the model path on
