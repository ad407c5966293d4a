"""The package's floors hold: a module imports only its own floor and those below it, no two
modules import each other through any path, and no module outgrows the cap. (Inside a floor,
tests/evaluation/test_rooms.py orders evaluation's rooms.)"""

from __future__ import annotations

import ast
from pathlib import Path

import traac

ROOT = Path(traac.__file__).parent
# Bottom to top; one number a floor, equal numbers side by side (neither imports the other).
FLOORS = {"errors": 0, "common": 1, "method": 2, "verification": 2, "data": 3, "console": 3,
          "evaluation": 4, "training": 4, "testbed": 5, "pipelines": 6, "commands": 7,
          "cli": 8}  # fmt: skip
MAX_LINES = 600  # the largest today: training/trl_adapter/trainer.py, 556


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
