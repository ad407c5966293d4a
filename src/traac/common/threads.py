"""How many CPU threads torch uses.

torch defaults to one intra-op thread per core, and OpenMP threads spin while they wait for each
other. For a small model that buys little on an idle machine (8.2 s against 8.8 s for a testbed
evaluation on 2 cores) and loses badly on a shared one: two spinning threads on two busy cores
stall each other, and the same evaluation took 139-277 s instead of 26-37 s
(`benchmarks/threads.py`). So a small model on the CPU runs on one thread unless the user says
otherwise, through `num_threads` or the `OMP_NUM_THREADS` variable torch itself reads.
"""

from __future__ import annotations

import os

import torch

from traac.errors import TraacError

# Below this many parameters a forward is too small for a second thread to pay off on a CPU.
SMALL_MODEL_PARAMETERS = 100_000_000


def set_threads(requested: int | None, *, model: torch.nn.Module | None = None) -> int:
    """Set torch's intra-op threads; returns the count in effect.

    `requested` wins; else `OMP_NUM_THREADS` (already applied by torch) is left alone; else a
    small `model` on the CPU gets one thread; else torch's default stays."""
    if requested is not None:
        if isinstance(requested, bool) or not isinstance(requested, int) or requested < 1:
            raise TraacError(f"num_threads: {requested!r} must be an integer >= 1")
        torch.set_num_threads(requested)
    elif model is not None and not os.environ.get("OMP_NUM_THREADS") and _small_on_cpu(model):
        torch.set_num_threads(1)
    return torch.get_num_threads()


def _small_on_cpu(model: torch.nn.Module) -> bool:
    first = next(model.parameters(), None)
    if first is None or first.device.type != "cpu":
        return False
    return sum(p.numel() for p in model.parameters()) < SMALL_MODEL_PARAMETERS
