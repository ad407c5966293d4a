"""The optional packages a recipe uses: what each setting needs, the one-line error, and the
extras in pyproject.toml against what TRL accepts and what the README's GPU section runs."""

from __future__ import annotations

import re
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement as PipRequirement
from trl import import_utils

from traac.errors import TraacError
from traac.training.planning import packages
from traac.training.planning.packages import check_packages, requirements

if sys.version_info >= (3, 11):
    import tomllib
else:  # the dev extra brings tomli there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[3]


def settings(**values: Any) -> SimpleNamespace:
    base = {"report_to": [], "use_vllm": False, "deepspeed": None}
    return SimpleNamespace(**{**base, **values})


def test_each_setting_names_its_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ACCELERATE_USE_DEEPSPEED", raising=False)
    assert requirements(settings()) == []
    found = requirements(
        settings(report_to=["tensorboard", "wandb"], use_vllm=True, deepspeed="ds.json"),
    )
    assert [(r.setting, r.modules[0]) for r in found] == [
        ("report_to tensorboard", "tensorboard"), ("report_to wandb", "wandb"),
        ("use_vllm", "vllm"), ("deepspeed", "deepspeed"),
    ]  # fmt: skip
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")  # what `accelerate launch` sets
    assert [r.modules[0] for r in requirements(settings())] == ["deepspeed"]


def test_missing_packages_are_one_line_naming_the_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(packages, "find_spec", lambda name: None)
    with pytest.raises(TraacError) as err:
        check_packages(settings(report_to="tensorboard", use_vllm=True))
    assert str(err.value) == (
        "report_to tensorboard needs tensorboard, which is not installed: "
        "pip install 'traac[gpu]'; use_vllm needs vllm, which is not installed: "
        "pip install 'traac[vllm]'"
    )
    check_packages(settings(report_to="none"))  # nothing asked, nothing missing


def test_tensorboardx_serves_report_to_tensorboard(monkeypatch: pytest.MonkeyPatch) -> None:
    """transformers' TensorBoardCallback takes either package."""
    monkeypatch.setattr(packages, "find_spec", lambda n: object() if n == "tensorboardX" else None)
    check_packages(settings(report_to=["tensorboard"]))


def test_an_unknown_logger_names_the_known_ones() -> None:
    with pytest.raises(TraacError, match=r"report_to: 'tensorbord' is no logger .*tensorboard"):
        requirements(settings(report_to=["tensorbord"]))


def extras() -> dict[str, list[str]]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def brought_by(extra: str) -> dict[str, PipRequirement]:
    """The packages `pip install 'traac[extra]'` brings beyond the core, by name."""
    out = {}
    for line in extras()[extra]:
        req = PipRequirement(line)
        if req.name == "traac":
            for inner in req.extras:
                out.update(brought_by(inner))
        else:
            out[req.name] = req
    return out


@pytest.mark.parametrize(
    ("version", "supported"),
    [("0.21.9", False), ("0.22.0", True), ("0.26.1", True), ("0.31.0", True),
     ("0.31.0+cu129", True), ("0.31.1", False), ("0.32.0", False)],
)  # fmt: skip
def test_the_vllm_extra_admits_only_versions_trl_accepts(
    monkeypatch: pytest.MonkeyPatch, version: str, supported: bool
) -> None:
    """TRL's is_vllm_available warns outside the versions it supports; the extra admits only
    versions it accepts silently (one of them: the pin whose caps the gpu set meets)."""
    monkeypatch.setattr(import_utils, "_is_package_available", lambda *a, **k: (True, version))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import_utils.is_vllm_available()
    assert (not caught) == supported
    if brought_by("vllm")["vllm"].specifier.contains(version):
        assert supported


def gpu_section() -> str:
    readme = (ROOT / "README.md").read_text()
    start = readme.index("## Install")  # the install lines and the three starts
    return readme[start : readme.index("## Python quickstart", start)]


def test_the_readme_gpu_install_brings_what_its_commands_use() -> None:
    """Every recipe and accelerate config the GPU section runs needs only packages its install
    line brings: vLLM (use_vllm), DeepSpeed (the DeepSpeed configs), each report_to logger."""
    section = gpu_section()
    installs = re.findall(r"pip install -e \"\.\[(\w+)\]\"", section)
    assert installs, "the GPU section has no install line"
    brought = {name for extra in installs for name in brought_by(extra)}
    needed: set[str] = set()
    for path in sorted(set(re.findall(r"recipes/[\w/.-]+\.yaml", section))):
        config = yaml.safe_load((ROOT / path).read_text())
        if config.get("distributed_type") == "DEEPSPEED":
            needed.add("deepspeed")
        if config.get("use_vllm"):
            needed.add("vllm")
        for backend in [config.get("report_to") or "none"]:
            if backend != "none":
                needed.add(packages.REPORTERS[backend][0][0])
    assert {"vllm", "deepspeed", "tensorboard"} <= needed  # the section runs all three
    assert needed <= brought
