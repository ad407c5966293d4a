"""traac's cache: models built or converted once, then reused by every command.

`$TRAAC_CACHE_DIR` (default `~/.cache/traac`) holds one folder per kind (`testbed`, `gguf`). An
entry is built in a sibling temporary directory under a file lock and renamed into place when it
is whole, so concurrent callers wait for one build and an interrupted build leaves nothing
half-written where a later run would take it for finished.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from filelock import FileLock

from traac.common.outputs import output_dir
from traac.errors import TraacError

T = TypeVar("T")


def cache_root(kind: str) -> Path:
    """`$TRAAC_CACHE_DIR/<kind>`, default `~/.cache/traac/<kind>`."""
    root = os.environ.get("TRAAC_CACHE_DIR") or "~/.cache/traac"
    return Path(root).expanduser() / kind


def build_atomically(output: Path, build: Callable[[Path], T], what: str) -> T:
    """Run `build(work)` on a fresh sibling of `output`, then rename it to `output` (replacing
    what was there). Temporaries left by killed builds are removed first; `what` names the
    directory in errors."""
    output_dir(output.parent, what)
    for stale in output.parent.glob(f".{output.name}.tmp-*"):
        if not _pid_alive(stale.name.rsplit("-", 1)[-1]):
            shutil.rmtree(stale, ignore_errors=True)
    work = Path(tempfile.mkdtemp(prefix=f".{output.name}.tmp-", dir=output.parent))
    work = work.rename(work.with_name(f"{work.name}-{os.getpid()}"))
    try:
        result = build(work)
        if output.exists():
            shutil.rmtree(output)
        work.rename(output)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return result


def cached_entry(
    target: Path, marker: str, build: Callable[[Path], object], *, force: bool = False
) -> Path:
    """`target`, built by `build(work_dir)` unless it already holds `marker` (the file a build
    writes last); one process builds while the others wait on the lock."""
    if (target / marker).exists() and not force:
        return target
    what = f"{target.parent.name} cache"
    try:
        output_dir(target.parent, what)
    except TraacError as err:
        raise TraacError(f"{err}; set TRAAC_CACHE_DIR to a writable directory") from None
    with FileLock(target.with_name(target.name + ".lock")):
        if (target / marker).exists() and not force:
            return target  # another process built it while we waited
        build_atomically(target, build, what)
    return target


def _pid_alive(text: str) -> bool:
    try:
        os.kill(int(text), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True
