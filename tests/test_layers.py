"""The package's floors hold: a module imports only its own floor and those below it, no two
modules import each other through any path, and no module outgrows the cap. Inside `training`,
its folders are ordered the same way (`TRAINING_ROOMS`); tests/evaluation/test_rooms.py orders
evaluation's rooms."""

from __future__ import annotations

import ast
from pathlib import Path

import traac

ROOT = Path(traac.__file__).parent
# Bottom to top; one number a floor, equal numbers side by side (neither imports the other).
FLOORS = {"errors": 0, "common": 1, "compression": 2, "verification": 2, "data": 3, "console": 3,
          "evaluation": 4, "training": 4, "testbed": 5, "pipelines": 6, "commands": 7,
          "cli": 8}  # fmt: skip
# training's folders, bottom to top: a folder imports only its own and those below it.
TRAINING_ROOMS = ("telemetry", "step", "methods", "planning", "trl_adapter")
MAX_LINES = 600  # the largest today: training/trl_adapter/trainer.py, 560


def modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = modules()


def imports(name: str) -> set[str]:
    """The package's modules that `name` imports (a name imported from a module counts as
    that module unless it is a module itself)."""
    out = set()
    for node in ast.walk(ast.parse(MODULES[name].read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            named = {f"{node.module}.{a.name}" for a in node.names} & MODULES.keys()
            out |= named or ({node.module} & MODULES.keys())
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names} & MODULES.keys()
    return {m for m in out if m != "traac" and not name.startswith(m + ".")}


GRAPH = {name: imports(name) for name in MODULES}


def floor(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else None


def test_every_floor_is_placed() -> None:
    assert {floor(m) for m in MODULES} - {None} <= FLOORS.keys()


def test_a_module_imports_only_its_floor_and_those_below() -> None:
    against = sorted(
        f"{a} -> {b}"
        for a, targets in GRAPH.items()
        for b in targets
        if floor(a) and floor(b) and floor(a) != floor(b)
        and FLOORS[floor(b)] >= FLOORS[floor(a)]
    )  # fmt: skip
    assert against == []


def room(name: str) -> str | None:
    parts = name.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "training" else None


def test_every_training_room_is_placed() -> None:
    assert {room(m) for m in MODULES} - {None} == set(TRAINING_ROOMS)


def test_a_training_module_imports_only_its_room_and_those_below() -> None:
    rank = {name: i for i, name in enumerate(TRAINING_ROOMS)}
    against = sorted(
        f"{a} -> {b}"
        for a, targets in GRAPH.items()
        for b in targets
        if room(a) and room(b) and rank[room(b)] > rank[room(a)]
    )
    assert against == []


def test_no_module_reaches_itself_through_its_imports() -> None:
    cycles = []
    for start in GRAPH:
        seen, todo = set(), list(GRAPH[start])
        while todo:
            name = todo.pop()
            if name == start:
                cycles.append(start)
                break
            if name not in seen:
                seen.add(name)
                todo.extend(GRAPH[name])
    assert cycles == []


def test_no_module_outgrows_the_cap() -> None:
    sizes = {name: len(path.read_text().splitlines()) for name, path in MODULES.items()}
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


# Basenames two modules share, each one concept: a command and the module below it that does
# its work (commands/<name> parses and prints; pipelines/ or evaluation/reports/ runs it), or one
# task split across floors. A basename with two meanings gets a name of its own instead.
SHARED_NAMES = {
    # the testbed's chain-sum task: its problems and its scorer
    "chain_sum": {"traac.data.chain_sum", "traac.verification.chain_sum"},
    "demo": {"traac.commands.demo", "traac.pipelines.demo"},
    # the mechanism table: its statistics, and a long build's responses it is measured on
    "mechanism": {"traac.evaluation.reports.mechanism", "traac.testbed.mechanism"},
    "probe_report": {"traac.commands.probe_report", "traac.evaluation.reports.probe_report"},
    "records": {"traac.commands.records", "traac.pipelines.records"},  # the kept run records
    "report": {"traac.commands.report", "traac.evaluation.reports.report"},
    "train": {"traac.commands.train", "traac.pipelines.train"},
    # maj@k's votes: which answers the verifier calls one, and their groups
    "votes": {"traac.verification.votes", "traac.evaluation.harness.votes"},
}


def test_a_shared_basename_is_one_concept() -> None:
    homes: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        if path.name != "__init__.py":
            homes.setdefault(name.rsplit(".", 1)[-1], set()).add(name)
    assert {base: names for base, names in homes.items() if len(names) > 1} == SHARED_NAMES
