"""Resolve `pip install 'traac[gpu]'` as a user would, and fail on a set nobody tested.

    python .ci/check_gpu_extra.py [PROJECT] [--report FILE] [--overlay DIR]

pip resolves the extra with `--dry-run --report` (only package metadata is read: with
`--use-feature=fast-deps` pip reads each wheel's METADATA through HTTP range requests, so the
multi-GB CUDA wheels are never downloaded, even from an index that serves no PEP 658 metadata).
The check then reads every resolved package's own requirements and fails, one line each, when

- a requirement of a resolved package does not hold for the version resolved (vLLM's caps on
  transformers and torch included), or its Python requirement excludes this interpreter;
- the resolved vLLM declares no upper bound on transformers: such a release predates the
  transformers versions its successors exclude, so the pair was never tested;
- the resolved vLLM pins no torch (its kernels are built against one);
- the resolved vLLM lies outside the range TRL's own `vllm` extra accepts.

`--overlay DIR` then installs (without dependencies) into DIR the resolved versions of every
package traac's core imports that the running environment holds at another version, so that
`PYTHONPATH=DIR:src python -m pytest ...` runs traac's tests on the versions the gpu extra
brings (torch excepted: the CPU build of the resolved version stands in for the CUDA wheel).
It needs pip 24 or newer, which an older pip is upgraded to in a cache venv beside DIR.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import venv
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

EXTRA = "gpu"
PIP_MIN = Version("24.0")  # older pips download every wheel in full after a --dry-run
# What the check prints first: the packages a GPU run's behaviour depends on.
HEADLINE = ("vllm", "torch", "transformers", "trl", "peft", "accelerate", "deepspeed")
UPPER = ("<", "<=", "==", "===", "~=")


@dataclass
class Package:
    """One resolved distribution: its version, requirements and the extras asked of it."""

    name: str
    version: Version
    requires: list[Requirement]
    requires_python: str | None
    extras: set[str] = field(default_factory=set)


def load_report(report: Mapping[str, Any]) -> tuple[dict[str, Package], dict[str, str]]:
    """pip's installation report -> (packages by canonical name, the marker environment)."""
    packages = {}
    for entry in report["install"]:
        meta = entry["metadata"]
        name = canonicalize_name(meta["name"])
        packages[name] = Package(
            name,
            Version(meta["version"]),
            [Requirement(r) for r in meta.get("requires_dist", [])],
            meta.get("requires_python"),
            set(entry.get("requested_extras") or []),
        )
    return packages, dict(report["environment"])


def applies(requirement: Requirement, extras: Iterable[str], env: Mapping[str, str]) -> bool:
    """Whether `requirement` holds for a package installed with `extras` in `env`."""
    if requirement.marker is None:
        return True
    return any(requirement.marker.evaluate({**env, "extra": e}) for e in ("", *extras))


def active_requirements(
    packages: dict[str, Package], env: Mapping[str, str]
) -> list[tuple[Package, Requirement]]:
    """Every (package, requirement) in force: extras asked by one package of another (e.g.
    `fastapi[standard]`) are propagated until nothing changes."""
    changed = True
    while changed:
        changed = False
        for package in packages.values():
            for req in package.requires:
                target = packages.get(canonicalize_name(req.name))
                if target and applies(req, package.extras, env) and not req.extras <= target.extras:
                    target.extras |= req.extras
                    changed = True
    return [
        (p, r) for p in packages.values() for r in p.requires if applies(r, p.extras, env)
    ]  # fmt: skip


def problems(packages: dict[str, Package], env: Mapping[str, str]) -> list[str]:
    """One line per requirement of the resolved set that does not hold, and per rule below."""
    out = []
    python = Version(env["python_full_version"])
    for package in packages.values():
        if package.requires_python and not Requirement(
            f"python{package.requires_python}"
        ).specifier.contains(python, prereleases=True):
            out.append(f"{package.name} {package.version}: requires Python "
                       f"{package.requires_python}, resolved for {python}")  # fmt: skip
    for package, req in active_requirements(packages, env):
        target = packages.get(canonicalize_name(req.name))
        if target is None:
            out.append(f"{package.name} {package.version} requires {req}: not in the resolved set")
        elif not req.specifier.contains(target.version, prereleases=True):
            out.append(f"{package.name} {package.version} requires {req}; resolved "
                       f"{target.name} {target.version}")  # fmt: skip
    return out + vllm_problems(packages, env)


def vllm_problems(packages: dict[str, Package], env: Mapping[str, str]) -> list[str]:
    """The rules for vLLM, whose wheels are built against one torch and tested against a range
    of transformers that its later releases cap."""
    vllm = packages.get("vllm")
    if vllm is None:
        return ["vllm: not in the resolved set; the gpu extra must bring it"]
    own = {canonicalize_name(r.name): r for r in vllm.requires if applies(r, vllm.extras, env)}
    out = []
    transformers = own.get("transformers")
    if transformers is None or not any(s.operator in UPPER for s in transformers.specifier):
        resolved = packages.get("transformers")
        out.append(
            f"vllm {vllm.version} requires {transformers or 'transformers'} with no upper bound; "
            f"such a release predates the transformers its successors exclude, so its pairing "
            f"with transformers {resolved.version if resolved else '?'} is untested: pin a vLLM "
            "that caps transformers (its METADATA's Requires-Dist)"
        )
    torch = own.get("torch")
    if torch is None or not any(s.operator in ("==", "===") for s in torch.specifier):
        out.append(f"vllm {vllm.version} pins no torch ({torch or 'no torch requirement'})")
    trl = packages.get("trl")
    accepted = [
        r for r in (trl.requires if trl else [])
        if canonicalize_name(r.name) == "vllm" and applies(r, {"vllm"}, env)
    ]  # fmt: skip
    for req in accepted:
        if not req.specifier.contains(vllm.version, prereleases=True):
            out.append(f"vllm {vllm.version}: trl {trl.version} accepts {req} (its vllm extra)")
    return out


# ---------------------------------------------------------------- running pip


def modern_pip(cache: Path) -> list[str]:
    """A pip command of version PIP_MIN or newer: this interpreter's, else one in `cache`."""
    try:
        if Version(metadata.version("pip")) >= PIP_MIN:
            return [sys.executable, "-m", "pip"]
    except metadata.PackageNotFoundError:
        pass
    python = cache / "bin" / "python"
    if not python.exists():
        venv.create(cache, with_pip=True)
    pip = [str(python), "-m", "pip"]
    found = subprocess.run(
        [*pip, "--version"], capture_output=True, text=True, check=True
    ).stdout.split()[1]
    if Version(found) < PIP_MIN:
        subprocess.run([*pip, "install", "-q", "--isolated", f"pip>={PIP_MIN}"], check=True)
    return pip


def resolve(project: Path, pip: list[str], report: Path) -> dict[str, Any]:
    """`pip install --dry-run --report` of PROJECT[gpu], ignoring this machine's pip settings
    (local wheels, constraints) so it resolves as a user's pip does against the index."""
    subprocess.run(
        [*pip, "install", "--isolated", "--use-feature=fast-deps", "--dry-run", "--quiet",
         "--ignore-installed", "--report", str(report), f"{project.resolve()}[{EXTRA}]"],
        check=True,
    )  # fmt: skip
    return json.loads(report.read_text())


def core_closure(packages: dict[str, Package], env: Mapping[str, str]) -> list[Package]:
    """What traac's core requirements bring in (no extras of traac's): what its tests import.
    torch's own requirements (CUDA libraries, triton) are left out: its CPU build stands in."""
    seen: dict[str, Package] = {}
    todo = [packages["traac"]]
    while todo:
        package = todo.pop()
        if package.name in seen:
            continue
        seen[package.name] = package
        if package.name == "torch":
            continue
        extras = () if package.name == "traac" else package.extras
        for req in package.requires:
            target = packages.get(canonicalize_name(req.name))
            if target is not None and applies(req, extras, env):
                todo.append(target)
    return [p for p in seen.values() if p.name != "traac"]


def build_overlay(packages: dict[str, Package], env: Mapping[str, str], pip: list[str],
                  overlay: Path) -> list[str]:  # fmt: skip
    """Install into `overlay` the resolved version of each core package this environment holds
    at another version (or lacks); returns the pins installed. torch must match in version."""
    pins = []
    for package in sorted(core_closure(packages, env), key=lambda p: p.name):
        try:
            here = Version(metadata.version(package.name))
        except metadata.PackageNotFoundError:
            here = None
        if package.name == "torch":
            if here is None or Version(here.base_version) != package.version:
                raise SystemExit(f"check_gpu_extra: torch {here} here; the gpu extra resolves "
                                 f"{package.version}: install its CPU build")  # fmt: skip
            continue
        if here != package.version:
            pins.append(f"{package.name}=={package.version}")
    shutil.rmtree(overlay, ignore_errors=True)
    if pins:
        subprocess.run(
            [*pip, "install", "-q", "--isolated", "--no-deps", "--target", str(overlay), *pins],
            check=True,
        )
    check_overlay(overlay, [*pins, f"torch=={packages['torch'].version}"])
    return pins


def check_overlay(overlay: Path, pins: list[str]) -> None:
    """Each pinned version is what `PYTHONPATH=overlay` imports (torch: its version without the
    local build label)."""
    code = (
        "import sys, importlib.metadata as m, packaging.version as v\n"
        "for pin in sys.argv[1:]:\n"
        "    name, want = pin.split('==')\n"
        "    got = v.Version(m.version(name))\n"
        "    got = v.Version(got.base_version) if name == 'torch' else got\n"
        "    assert got == v.Version(want), f'{name} {got} imported, {want} resolved'\n"
    )
    env = {**os.environ, "PYTHONPATH": str(overlay.resolve())}
    subprocess.run([sys.executable, "-c", code, *pins], env=env, check=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("project", nargs="?", default=".", type=Path)
    parser.add_argument("--report", type=Path, help="keep pip's report here")
    parser.add_argument("--from-report", type=Path, help="check a saved report (no pip run)")
    parser.add_argument("--overlay", type=Path, help="install the tested set's versions here")
    args = parser.parse_args(argv)
    began = time.perf_counter()
    cache = (args.overlay or Path("build/ci")).parent / "pip-venv"
    pip = modern_pip(cache) if args.from_report is None or args.overlay else []
    if args.from_report is not None:
        report = json.loads(args.from_report.read_text())
    else:
        with tempfile.TemporaryDirectory() as tmp:
            out = args.report or Path(tmp) / "report.json"
            report = resolve(args.project, pip, out)
    packages, env = load_report(report)
    heads = ", ".join(f"{n} {packages[n].version}" for n in HEADLINE if n in packages)
    print(f"traac[{EXTRA}] resolves ({len(packages)} packages, Python "
          f"{env['python_full_version']} on {env['sys_platform']} {env['platform_machine']}, "
          f"pip {report.get('pip_version', '?')}, {time.perf_counter() - began:.0f} s): "
          f"{heads}")  # fmt: skip
    found = problems(packages, env)
    for line in found:
        print(f"check_gpu_extra: {line}", file=sys.stderr)
    if found:
        print(f"check_gpu_extra: {len(found)} problem(s); the gpu extra resolves to a set nobody "
              "tested", file=sys.stderr)  # fmt: skip
        return 1
    print("every requirement of the resolved set holds, vLLM's caps on transformers and torch "
          "included")  # fmt: skip
    if args.overlay is not None:
        pins = build_overlay(packages, env, pip, args.overlay)
        print(f"overlay {args.overlay}: {' '.join(pins) or 'nothing differs from here'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
