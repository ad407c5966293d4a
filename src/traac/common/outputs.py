"""Where results go: output directories and files checked by really writing, before any work.

Permissions alone do not say whether a path can be written (root ignores them; `/proc`, a
read-only mount or a full disk refuse anyway), so each check creates what it checks. A failure
is one line naming the option and the reason, given before a model loads rather than after the
work is done and then lost.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from traac.errors import TraacError


def output_dir(path: Path, what: str = "--output") -> Path:
    """Create `path` (and its parents) if needed, and prove a file can be written inside it."""
    path = Path(path).expanduser()
    if path.exists() and not path.is_dir():
        raise TraacError(f"{what} {path}: is a file, not a directory; name a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as err:
        raise TraacError(f"{what} {path}: cannot write there ({_reason(err)})") from None
    return path


def writable_dir(path: str | Path, what: str) -> None:
    """Prove a directory can be made at `path` and written, creating nothing: where it does not
    exist yet, a file is written (and removed) in its nearest existing ancestor, so a dry run
    leaves no directory behind. A path that is a file, or lies under one, is named as such."""
    path = Path(path).expanduser()
    if path.exists() and not path.is_dir():
        raise TraacError(f"{what} {path}: is a file, not a directory; name a directory")
    existing = path
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise TraacError(f"{what} {path}: {existing} is a file, not a directory; name a "
                         "directory")  # fmt: skip
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as err:
        raise TraacError(f"{what} {path}: cannot write in {existing} ({_reason(err)}); name a "
                         "directory you can write") from None  # fmt: skip


def output_file(path: Path | None, what: str) -> None:
    """Prove `path` can be written (an existing file is opened for appending and left as it
    was; a new one is created and removed again)."""
    if path is None:
        return
    path = Path(path).expanduser()
    if path.is_dir():
        raise TraacError(f"{what} {path}: is a directory; name a file")
    if not path.parent.is_dir():
        raise TraacError(f"{what} {path}: no directory {path.parent}")
    existed = path.exists()
    try:
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as err:
        raise TraacError(f"{what} {path}: cannot write it ({_reason(err)})") from None
    if not existed:
        path.unlink(missing_ok=True)


def write_text(path: Path, text: str, what: str) -> None:
    """Write a whole file; a failure (a full disk) is one line naming it."""
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as err:
        raise TraacError(f"{what} {path}: cannot write it ({_reason(err)})") from None


def _reason(err: OSError) -> str:
    return err.strerror or os.strerror(err.errno or 0) or type(err).__name__
