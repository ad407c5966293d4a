"""TRAAC's state in TRL's checkpoints: what a resumed run needs beyond TRL's own (the length
windows of the rewards, the rank calibration's window of uniformities and the peer method's
state, e.g. Laser-D's targets), as JSON.

Rank 0 writes `traac_state.json`; under several processes each rank also writes its own
(as transformers does with the RNG states), which lets anyone check that the ranks agree, and
each rank resumes from its own where there is one.
"""

from __future__ import annotations

import json
from collections import deque
from pathlib import Path
from typing import Any

STATE_FILE = "traac_state.json"  # rank 0's


def traac_state(windows: Any, uniformities: deque[float], method: Any) -> dict[str, Any]:
    """The state of a run's length windows, calibration window and method (`MethodHooks`;
    empty for the methods that keep nothing), each with its `state_dict`. The method's is
    saved under "peer", the key older checkpoints hold."""
    return {
        "length_windows": windows.state_dict(),
        "uniformities": list(uniformities),
        "peer": method.state_dict(),
    }


def load_traac_state(
    state: dict[str, Any], windows: Any, uniformities: deque[float], method: Any
) -> None:
    """Restore `traac_state`'s values in place (a checkpoint without the method's loads as
    one whose method keeps nothing)."""
    windows.load_state_dict(state["length_windows"])
    uniformities.clear()
    uniformities.extend(state["uniformities"])
    method.load_state_dict(state.get("peer", {}))


def rank_state_file(rank: int) -> str:
    """The TRAAC state file of one process in a checkpoint of a multi-process run."""
    return f"traac_state_{rank}.json"


def save_state(
    folder: Path, state: dict[str, Any], *, main: bool, rank: int, num_processes: int
) -> None:
    """Write `state` into a checkpoint `folder`: `STATE_FILE` from the process that saves
    (`main`), and each rank's own file when there are several processes."""
    names = [STATE_FILE] if main else []
    if num_processes > 1:
        names.append(rank_state_file(rank))
    text = json.dumps(state)
    for name in names:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)


def load_state(checkpoint: Path, rank: int) -> dict[str, Any] | None:
    """This rank's TRAAC state in a checkpoint, else rank 0's, else None."""
    for name in (rank_state_file(rank), STATE_FILE):
        path = checkpoint / name
        if path.exists():
            return json.loads(path.read_text())
    return None
