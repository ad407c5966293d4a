"""The evaluation package's three rooms keep their order: inference imports neither the harness
nor the reports, and the harness does not import the reports (the project's layer check sees
only `evaluation` as a whole)."""

import ast
from pathlib import Path

import traac.evaluation

ROOMS = ("inference", "harness", "reports")  # bottom to top
ROOT = Path(traac.evaluation.__file__).parent


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def test_every_module_is_in_a_room():
    loose = [p.name for p in ROOT.glob("*.py") if p.name != "__init__.py"]
    assert loose == []
    assert sorted(p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()) == sorted(ROOMS)


def test_a_room_imports_only_the_rooms_below_it():
    against = []
    for i, room in enumerate(ROOMS):
        above = ROOMS[i + 1 :]
        for path in sorted((ROOT / room).glob("*.py")):
            for name in imported(path):
                if any(name.startswith(f"traac.evaluation.{up}") for up in above):
                    against.append(f"{room}/{path.name} -> {name}")
    assert against == []
