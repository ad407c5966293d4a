"""Resolve the core `pip install traac` from wheels alone, and fail on what a GPU image could not
install as it is.

    python .ci/check_core_install.py [PROJECT] [--report FILE]

pip resolves PROJECT (default: this checkout) with `--dry-run --only-binary=:all:
--ignore-installed --report FILE` against the package index: no extra, nothing built from
source but the project itself, nothing already installed taken into account. The check fails,
one line each, when

- pip finds no set of wheels (a dependency that ships only an sdist needs a compiler);
- a resolved package other than the project is not a wheel;
- an optional package (`OPTIONAL`: reasoning-gym, which pins exact versions of packages a GPU
  image already has and pulls in three without wheels) is in the core set.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

OPTIONAL = ("reasoning-gym",)  # behind extras; never in the core install


def _name(item: Mapping[str, Any]) -> str:
    return str(item["metadata"]["name"]).lower().replace("_", "-")


def problems(report: Mapping[str, Any], project: str = "traac") -> list[str]:
    """What is wrong with a pip `--report` of the core install (empty: nothing)."""
    found = []
    for item in report.get("install", []):
        name, url = _name(item), item.get("download_info", {}).get("url", "")
        if name == project:
            continue
        if not url.endswith(".whl"):
            found.append(f"{name} {item['metadata']['version']}: not a wheel ({url})")
        if name in OPTIONAL:
            found.append(f"{name}: in the core install; it belongs behind an extra")
    return found


def resolve(project: Path, report: Path) -> subprocess.CompletedProcess[str]:
    """pip's dry-run resolution of `project` from wheels only, written to `report`."""
    command = [sys.executable, "-m", "pip", "install", "--dry-run", "--only-binary=:all:",
               "--ignore-installed", "--quiet", "--report", str(report), str(project)]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("project", nargs="?", type=Path, default=Path(__file__).parents[1])
    parser.add_argument("--report", type=Path, help="keep pip's report here (default: temp)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        report = args.report or Path(tmp) / "core.json"
        done = resolve(args.project, report)
        if done.returncode != 0:
            errors = [x for x in done.stderr.splitlines() if x.startswith("ERROR")]
            print(f"core install: pip found no set of wheels: {' '.join(errors)}", file=sys.stderr)
            return 1
        resolved = json.loads(report.read_text())
    found = problems(resolved)
    for line in found:
        print(f"core install: {line}", file=sys.stderr)
    if not found:
        print(f"core install: {len(resolved['install'])} packages, all wheels, no optional one")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
