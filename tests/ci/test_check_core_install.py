"""`.ci/check_core_install.py`, which `.ci/run` runs against the package index: its verdicts on
pip reports, and pyproject.toml's core dependencies and extras, offline."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "check_core_install", ROOT / ".ci" / "check_core_install.py"
)
check = sys.modules["check_core_install"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check)


def item(name: str, version: str, url: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "version": version}, "download_info": {"url": url}}


WHEEL = "https://files.example/{}-py3-none-any.whl"


def test_a_set_of_wheels_passes_and_the_project_may_be_built() -> None:
    report = {"install": [item("traac", "0.1.0", "file:///src/traac"),
                          item("math-verify", "0.9.0", WHEEL.format("math_verify"))]}  # fmt: skip
    assert check.problems(report) == []


def test_an_sdist_and_reasoning_gym_are_each_named() -> None:
    sdist = "https://files.example/pycosat-0.6.6.tar.gz"
    gym = WHEEL.format("reasoning_gym")
    report = {"install": [item("pycosat", "0.6.6", sdist), item("reasoning_gym", "0.1.25", gym)]}
    found = check.problems(report)
    assert len(found) == 2
    assert found[0].startswith("pycosat 0.6.6: not a wheel")
    assert found[1].startswith("reasoning-gym: in the core install")


def test_reasoning_gym_is_an_extra_that_the_dev_install_brings() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if d.lower().startswith("reasoning")]
    extras = project["optional-dependencies"]
    assert [d for d in extras["reasoning-gym"] if d.startswith("reasoning-gym")]
    assert "traac[reasoning-gym]" in extras["dev"]


def test_the_ci_script_runs_the_check() -> None:
    assert ".ci/check_core_install.py" in (ROOT / ".ci" / "run").read_text()
