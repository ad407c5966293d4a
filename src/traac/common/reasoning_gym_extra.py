"""reasoning-gym, an optional extra: its procedural tasks (`reasoning-gym:TASK`, otb-underthink)
and their scorers. It pins exact versions of several packages and three of its dependencies
ship no wheels, so the core install leaves it out; the testbed's chain sums and their scorer are
traac's own (`traac.data.chain_sum`, `traac.verification.chain_sum`) and need nothing of it.
"""

from __future__ import annotations

import importlib
from importlib.util import find_spec
from types import ModuleType

from traac.errors import TraacError

REASONING_GYM_EXTRA = "pip install 'traac[reasoning-gym]'"


def reasoning_gym_installed() -> bool:
    """Whether reasoning-gym can be imported (found, not imported)."""
    return find_spec("reasoning_gym") is not None


def missing(what: str) -> str:
    """The one line for `what` (a dataset, a task) asked for without the extra."""
    return f"{what} needs reasoning-gym, an optional extra: {REASONING_GYM_EXTRA}"


def import_reasoning_gym(what: str) -> ModuleType:
    """reasoning-gym, imported on first use; a TraacError naming the extra when absent."""
    if not reasoning_gym_installed():
        raise TraacError(missing(what))
    return importlib.import_module("reasoning_gym")


def reasoning_gym_tasks(what: str) -> frozenset[str]:
    """The names of reasoning-gym's tasks (its factory's registry)."""
    import_reasoning_gym(what)
    from reasoning_gym.factory import DATASETS

    return frozenset(DATASETS)
