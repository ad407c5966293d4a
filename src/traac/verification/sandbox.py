"""The worker sandbox: what a verification worker may not do, and the limits it runs under.

A worker has no file-size allowance, a memory cap, a private empty working directory (the
pool's), and an audit hook (`install_guard`) that refuses spawning processes, opening files for
writing or creating, deleting or renaming files, sockets, ctypes and signals to other processes.
The hook is a second line, not a sandbox: Python code that ran inside a worker could still forge
that worker's own replies or create an empty FIFO. The first line is the screening
(`traac.verification.screening`): model output is never executed.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import sys
from collections.abc import Callable
from typing import Any

_MEMORY_LIMIT = 4 << 30  # bytes of address space per worker

_REFUSED_EVENTS = frozenset(
    {
        "subprocess.Popen",
        "os.system",
        "os.fork",
        "os.forkpty",
        "os.remove",
        "os.rename",
        "os.rmdir",
        "os.mkdir",
        "os.link",
        "os.symlink",
        "os.truncate",
        "os.chmod",
        "os.chown",
        "os.chflags",
        "os.utime",
        "os.setxattr",
        "os.removexattr",
        "os.kill",
        "os.killpg",
        "signal.pthread_kill",
        "resource.setrlimit",
        "resource.prlimit",
        "shutil.rmtree",
        "tempfile.mkstemp",
        "tempfile.mkdtemp",
        "webbrowser.open",
    }
)
# os.exec*, os.spawn*, os.posix_spawn*, sockets, ctypes (loading, calls, raw memory), sqlite
_REFUSED_PREFIXES = ("os.exec", "os.spawn", "os.posix_spawn", "socket.", "ctypes.", "sqlite3.")
# Modules whose (re-)import would bring back a spawner the guard took away, or that write files
# without Python's `open`: `_posixsubprocess.fork_exec` starts processes with no audit event.
_REFUSED_IMPORTS = frozenset({"_posixsubprocess", "_sqlite3", "_dbm", "_gdbm"})
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def install_guard() -> None:
    """Refuse, from now on in this process, what a verification worker never needs: starting
    processes, opening files to write or create, changing the file system, sockets, ctypes,
    signals to other processes and raising its limits (each raises PermissionError).

    Installed in a worker after its libraries are imported and warmed up, so their lazy imports
    have happened; the checks themselves only read. The hook takes everything it uses as
    defaults, and refuses the attribute writes that could replace its code or defaults.
    """

    def guard(
        event: str,
        args: tuple[Any, ...],
        refused: frozenset[str] = _REFUSED_EVENTS,
        prefixes: tuple[str, ...] = _REFUSED_PREFIXES,
        imports: frozenset[str] = _REFUSED_IMPORTS,
        write_flags: int = _WRITE_FLAGS,
        write_modes: frozenset[str] = frozenset("wax+"),
        function_attrs: frozenset[str] = frozenset({"__code__", "__defaults__", "__kwdefaults__"}),
        error: type[Exception] = PermissionError,
        string: type = str,
        integer: type = int,
        is_instance: Callable[[Any, Any], bool] = isinstance,
    ) -> None:
        if event in refused or event.startswith(prefixes):
            raise error(f"refused in a verification worker: {event}")
        if event == "open":
            _, mode, flags = args
            if (is_instance(flags, integer) and flags & write_flags) or (
                is_instance(mode, string) and not write_modes.isdisjoint(mode)
            ):
                raise error("refused in a verification worker: open for writing")
        elif event == "import" and args[0] in imports:
            raise error(f"refused in a verification worker: import {args[0]}")
        elif event == "object.__setattr__" and args[1] in function_attrs:
            raise error("refused in a verification worker: replacing a function's code")

    fork_exec = getattr(sys.modules.get("_posixsubprocess"), "fork_exec", None)
    for module in list(sys.modules.values()):  # also `from _posixsubprocess import fork_exec`
        for attr, value in list(getattr(module, "__dict__", {}).items()):
            if fork_exec is not None and value is fork_exec:
                setattr(module, attr, _refuse_spawn)
    sys.addaudithook(guard)


def _refuse_spawn(*_: Any) -> None:
    raise PermissionError("refused in a verification worker: _posixsubprocess.fork_exec")


def limit_resources() -> None:
    """No file-size allowance (a write past 0 bytes fails, not kills), no core dumps, a memory
    cap; the zygote sets them and every worker inherits them."""
    with contextlib.suppress(ValueError, OSError):  # limits already lower
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_AS, (_MEMORY_LIMIT, _MEMORY_LIMIT))


def die_with_parent() -> None:
    """Linux: the kernel kills this worker when its zygote dies. (Not for the zygote: the signal
    follows the forking *thread*, and the pool may be started from a short-lived one; the zygote
    leaves when its socket closes.)"""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
