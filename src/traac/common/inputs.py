"""Inputs a command reads, checked before any work: the same run given twice is a mistake no
reader would notice (a run compared with itself shows no change at all)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from traac.errors import TraacError


def check_distinct(command: str, dirs: Sequence[Path], names: Sequence[str] | None = None) -> None:
    """Each directory once (compared after resolving links and `..`), and each row name once."""
    seen: dict[Path, Path] = {}
    for directory in dirs:
        key = Path(directory).expanduser().resolve()
        if key in seen:
            same = "" if str(seen[key]) == str(directory) else f" (as {seen[key]})"
            raise TraacError(
                f"{command}: {directory} is given twice{same}; a run compared with itself shows "
                "no difference: pass each directory once"
            )
        seen[key] = Path(directory)
    given = list(names or ())
    twice = next((name for name in given if given.count(name) > 1), None)
    if twice is not None:
        raise TraacError(f"{command}: --names gives {twice!r} twice; give each row its own name")
