"""Shared fixtures of the verification tests: reasoning-gym entries, and per module a fresh
worker pool with a trap that shows whether anything an answer says was run."""

import os

import pytest

from traac.verification import screening
from traac.verification.workers import configure_pool, default_workers, shutdown_pool

TASKS = (
    "ab",
    "advanced_geometry",
    "tsumego",
    "fraction_simplification",
    "propositional_logic",
    "bitwise_arithmetic",
    "letter_counting",
    "maze",
    "puzzle24",
    "quantum_lock",
)

# A hand-made knight swap (reasoning-gym takes seconds to generate one): a 6-cycle, white on A1,
# black on D1; each knight walks three squares round the cycle.
KNIGHT_SWAP = {
    "question": "Swap the knights.",
    "answer": '["w,A1,B1", "B,D1,E1", "w,B1,C1", "B,E1,F1", "w,C1,D1", "B,F1,A1"]',
    "metadata": {
        "source_dataset": "knight_swap",
        "board": {
            "A1": ["B1", "F1"],
            "B1": ["A1", "C1"],
            "C1": ["B1", "D1"],
            "D1": ["C1", "E1"],
            "E1": ["D1", "F1"],
            "F1": ["E1", "A1"],
        },
        "pieces": {"A1": "w", "B1": None, "C1": None, "D1": "B", "E1": None, "F1": None},
        "start_turn": "w",
        "solution": [
            ["w", "A1", "B1"],
            ["B", "D1", "E1"],
            ["w", "B1", "C1"],
            ["B", "E1", "F1"],
            ["w", "C1", "D1"],
            ["B", "F1", "A1"],
        ],
        "is_possible": True,
    },
}


SENTINEL = "traac_sentinel_mod"


@pytest.fixture(scope="module", autouse=True)
def trap(tmp_path_factory):
    """For the whole module: a module that leaves a file when imported, importable by the workers
    and this process; a working directory to watch; a fresh worker pool started with the module
    on its path."""
    root = tmp_path_factory.mktemp("trap")
    (root / f"{SENTINEL}.py").write_text(
        f"open({str(root / 'IMPORTED')!r}, 'w').write('imported')\n"
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(root))
        mp.setenv("PYTHONPATH", os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))
        mp.chdir(root)
        pool = configure_pool(default_workers())
        yield root, pool
    shutdown_pool()


@pytest.fixture(scope="module")
def entries():
    """Two fresh reasoning-gym entries per task (regenerated, seeded), plus the knight swap."""
    import reasoning_gym

    config = {"quantum_lock": {"difficulty": 3}}
    out = {
        name: list(reasoning_gym.create_dataset(name, size=2, seed=3, **config.get(name, {})))
        for name in TASKS
    }
    out["knight_swap"] = [KNIGHT_SWAP]
    return out


@pytest.fixture(scope="module")
def evaluating_entries():
    """Two entries of every task whose scorer evaluates answers."""
    import reasoning_gym

    return {
        name: list(reasoning_gym.create_dataset(name, size=2, seed=3))
        for name in screening.EVALUATING_TASKS
    }
