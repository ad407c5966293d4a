"""How many CPU threads torch uses (torch's default unless asked; the command line makes them
wait passively, see `traac.cli`)."""

from __future__ import annotations

import os

import torch

from traac.errors import TraacError


def check_threads(requested: int | None) -> None:
    """A thread count is unset (torch's default) or an integer >= 1; checked before any work
    (`traac train --dry-run` runs it too)."""
    if requested is not None and (
        isinstance(requested, bool) or not isinstance(requested, int) or requested < 1
    ):
        raise TraacError(
            f"num_threads: {requested!r} must be an integer >= 1 (leave it unset for torch's "
            "default)"
        )


def set_threads(requested: int | None) -> int:
    """Set torch's intra-op threads to `requested` if given; returns the count in effect."""
    check_threads(requested)
    if requested is not None:
        torch.set_num_threads(requested)
    return torch.get_num_threads()


def cores() -> int:
    """The cores this process may run on (its affinity where the platform tells it)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
