"""How many CPU threads torch uses (torch's default unless asked; the command line makes them
wait passively, see `traac.cli`)."""

from __future__ import annotations

import torch

from traac.errors import TraacError


def set_threads(requested: int | None) -> int:
    """Set torch's intra-op threads to `requested` if given; returns the count in effect."""
    if requested is not None:
        if isinstance(requested, bool) or not isinstance(requested, int) or requested < 1:
            raise TraacError(f"num_threads: {requested!r} must be an integer >= 1")
        torch.set_num_threads(requested)
    return torch.get_num_threads()
