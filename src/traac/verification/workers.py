"""The caller's side of verification: a pool of workers forked from a warmed-up zygote
(`traac.verification.zygote`, a fresh interpreter, never a copy of the caller), each under the
sandbox (`traac.verification.sandbox`), with a hard deadline per check; any thread may call it.

Deadlines: a math or task call returns within its `timeout` (waiting for a worker included) plus
the in-process screening, which the `MAX_ANSWER_CHARS` cap and linear-time extraction keep to
milliseconds. A check that misses the deadline counts as wrong; its worker is killed and a fresh
fork (milliseconds, every task loaded so far included) replaces it in the background. Not charged
to a call: the pool's start (one interpreter importing sympy, math-verify and, where the extra is
installed, reasoning-gym, up to `STARTUP_TIMEOUT`) and loading a task's scorer, once in the
zygote for all later workers and once in each worker forked before that.
This works from any thread or subprocess, unlike math-verify's own signal-based timeout, which is
disabled here.

We keep this small pool rather than a maintained one: `concurrent.futures` cannot kill a task
that overruns, and `pebble` (which can) starts workers through multiprocessing, which either forks
the caller (unsafe in a trainer holding CUDA and threads) or, with spawn/forkserver, re-imports
the caller's `__main__` in every worker and every replacement, and starts each as a new
interpreter (seconds for sympy; a fork of our zygote takes milliseconds).
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import json
import math
import multiprocessing.util
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from traac.common.reasoning_gym_extra import missing, reasoning_gym_installed
from traac.errors import TraacError
from traac.verification.chain_sum import OWN_SCORERS

_T = TypeVar("_T")

STARTUP_TIMEOUT = 120.0  # seconds the zygote may take to import its libraries or load a task
_MAX_LINE = 1 << 24  # longest reply a worker may send
_ZYGOTE_BOOT = "from traac.verification.zygote import main; main()"


def _readable(fd: int, timeout: float) -> bool:
    """Does `fd` have data or end-of-file within `timeout` seconds? (poll, not select: a
    trainer's descriptors may number past select's 1024.)"""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(max(0, math.ceil(timeout * 1000))))


class _Worker:
    """The pool's end of one worker: a request pipe, a reply pipe, and the tasks it can score."""

    def __init__(self, pid: int, requests_fd: int, replies_fd: int, tasks: frozenset[str]) -> None:
        self.pid = pid
        self.tasks = tasks
        self._requests = os.fdopen(requests_fd, "wb")
        self._replies = replies_fd
        self._buffer = b""
        self._closed = False

    def request(self, message: dict[str, Any], timeout: float) -> dict[str, Any] | None:
        """Send one request; its reply, or None when the deadline passed or the worker died."""
        try:
            self._requests.write(json.dumps(message).encode() + b"\n")
            self._requests.flush()
        except (OSError, ValueError):  # a dead worker, or a pool closed under the call
            return None
        return self.read_reply(time.monotonic() + timeout)

    def read_reply(self, deadline: float) -> dict[str, Any] | None:
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or len(self._buffer) > _MAX_LINE:
                return None
            try:
                if not _readable(self._replies, remaining):
                    continue
                chunk = os.read(self._replies, 1 << 16)
            except (OSError, ValueError):  # closed under the call: the pool is closing
                return None
            if not chunk:  # the worker died
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            return json.loads(line)
        except ValueError:
            return None

    def idle(self) -> bool:
        """Alive and silent, as a worker between requests is (a dead one reads as end-of-file)."""
        return not self._buffer and not _readable(self._replies, 0)

    def close(self) -> None:
        """Once only: a second `os.close` could hit a descriptor number reused meanwhile."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError):  # flushing to a dead worker: nothing left to say
            self._requests.close()
        os.close(self._replies)


class _Zygote:
    """The pool's end of the zygote process: a datagram socket that also carries pipe ends."""

    def __init__(self, workdir: str) -> None:
        package_root = str(Path(__file__).resolve().parents[2])  # src/, the package's parent
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        env.update(PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _ZYGOTE_BOOT],
            stdin=theirs,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=workdir,
            env=env,
            start_new_session=True,  # a Ctrl-C aimed at the parent does not hit the workers
        )
        theirs.close()
        self._channel = ours
        self._lock = threading.Lock()
        try:
            self._receive(STARTUP_TIMEOUT)
        except TraacError:
            self.close()
            raise TraacError(
                f"verification workers did not start within {STARTUP_TIMEOUT:.0f} s; check that "
                f"`{sys.executable} -c 'import math_verify'` works"
            ) from None

    def _receive(self, timeout: float) -> dict[str, Any]:
        self._channel.settimeout(timeout)
        try:
            data = self._channel.recv(1 << 16)
        except OSError:
            data = b""
        if not data:
            raise TraacError("the verification zygote died or stopped answering")
        return json.loads(data)

    def command(self, message: dict[str, Any], fds: Sequence[int] = ()) -> dict[str, Any]:
        """One command and its reply (TraacError when the zygote is gone)."""
        with self._lock:
            try:
                socket.send_fds(self._channel, [json.dumps(message).encode()], list(fds))
            except OSError:
                raise TraacError("the verification zygote died") from None
            return self._receive(STARTUP_TIMEOUT)

    def fork(self) -> _Worker:
        """A new worker, guarded and ready (milliseconds)."""
        requests_read, requests_write = os.pipe()
        replies_read, replies_write = os.pipe()
        try:
            reply = self.command({"op": "fork"}, [requests_read, replies_write])
        except TraacError:
            for fd in (requests_write, replies_read):
                os.close(fd)
            raise
        finally:
            os.close(requests_read)
            os.close(replies_write)
        if not reply["ok"]:
            for fd in (requests_write, replies_read):
                os.close(fd)
            raise TraacError(f"cannot fork a verification worker: {reply['error']}")
        worker = _Worker(reply["pid"], requests_write, replies_read, frozenset(reply["tasks"]))
        ready = worker.read_reply(time.monotonic() + STARTUP_TIMEOUT)
        if ready is None:
            self.kill(worker)
            raise TraacError("a verification worker died while installing its guard")
        return worker

    def kill(self, worker: _Worker) -> None:
        """Kill and reap `worker` (its pid stays reserved until the zygote reaps it)."""
        worker.close()
        self.command({"op": "kill", "pid": worker.pid})

    def close(self) -> None:
        """Kill the zygote and every worker (one process group)."""
        with contextlib.suppress(OSError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self._channel.close()


@dataclass
class _Waiter:
    """A call waiting for a worker; `_release` fills `worker` and sets `ready`."""

    ready: threading.Event = field(default_factory=threading.Event)
    worker: _Worker | None = None


class VerifierPool:
    """Workers forked from one zygote, a hard deadline per call; any thread may call it.

    A call that misses its deadline (waiting for a worker included) returns None; its worker is
    killed and replaced in the background by a fork that has every task loaded so far. A task's
    first use loads its scorer in the zygote, and a worker forked before that loads it the first
    time it meets the task; neither is charged to the call.
    """

    def __init__(self, workers: int) -> None:
        if workers < 1:
            raise TraacError(f"verifier pool: workers must be >= 1, got {workers}")
        self.workers = workers
        self.pid = os.getpid()
        self._workdir = tempfile.mkdtemp(prefix="traac-verify-")
        self._lock = threading.Lock()
        self._load_lock = threading.Lock()  # held while the zygote loads a task (seconds)
        self._zygote_lock = threading.Lock()  # held while a dead zygote is replaced
        self._live: set[_Worker] = set()
        self._free: list[_Worker] = []  # idle workers, when no call is waiting
        self._waiters: collections.deque[_Waiter] = collections.deque()  # calls, first come first
        self._tasks: frozenset[str] = frozenset()
        self._error: str | None = None  # why replacements stopped coming, for the next caller
        self._closed = False
        self.timeouts = 0  # calls that missed their deadline, for reports
        try:
            self._zygote = _Zygote(self._workdir)
            for _ in range(workers):
                self._release(self._fork())
        except TraacError:
            self.close()
            raise
        # Forked children (DataLoader workers, multiprocessing) leave through os._exit, which
        # skips atexit but runs multiprocessing's finalizers.
        multiprocessing.util.Finalize(None, self.close, exitpriority=0)

    def _with_zygote(self, action: Callable[[_Zygote], _T]) -> _T:
        """`action(zygote)`; if the zygote died (killed for memory, say), once more on a new one
        that has loaded the pool's tasks (its workers died with it)."""
        zygote = self._zygote
        try:
            return action(zygote)
        except TraacError:
            if self._closed or zygote.proc.poll() is None:
                raise
        with self._zygote_lock:
            if self._zygote is zygote:
                zygote.close()
                fresh = _Zygote(self._workdir)
                for task in sorted(self._tasks):
                    fresh.command({"op": "load", "task": task})
                self._zygote = fresh
        return action(self._zygote)

    def _fork(self) -> _Worker:
        worker = self._with_zygote(_Zygote.fork)
        with self._lock:
            self._live.add(worker)
        return worker

    def _retire(self, worker: _Worker) -> None:
        """Kill `worker` and fork its replacement, off the caller's clock."""
        with self._lock:
            self._live.discard(worker)
        threading.Thread(target=self._replace, args=(worker,), daemon=True).start()

    def _replace(self, worker: _Worker) -> None:
        try:
            with contextlib.suppress(TraacError):  # a dead zygote took its workers along
                self._zygote.kill(worker)
            if not self._closed:
                self._release(self._fork())
        except TraacError as exc:
            if not self._closed:
                self._error = f"verification worker lost and not replaced: {exc}"

    def _release(self, worker: _Worker) -> None:
        """Hand `worker` to the longest-waiting call, else keep it idle. (A plain queue lets the
        thread that just returned a worker take it straight back, and a waiting call starves.)"""
        with self._lock:
            if self._waiters:
                waiter = self._waiters.popleft()
                waiter.worker = worker
                waiter.ready.set()
            else:
                self._free.append(worker)

    def _acquire(self, deadline: float) -> _Worker | None:
        while True:
            waiter = _Waiter()
            with self._lock:
                if self._free and not self._waiters:
                    waiter.worker = self._free.pop()
                    waiter.ready.set()
                else:
                    self._waiters.append(waiter)
            waiter.ready.wait(max(0.0, deadline - time.monotonic()))
            with self._lock:
                worker = waiter.worker
                if worker is None:
                    self._waiters.remove(waiter)
            if worker is None:
                if self._error is not None:
                    raise TraacError(self._error)
                return None
            if worker.idle():
                return worker
            self._retire(worker)  # died between calls

    def _load(self, task: str) -> None:
        with self._load_lock:
            if task in self._tasks:
                return
            if task not in OWN_SCORERS and not reasoning_gym_installed():
                raise TraacError(missing(f"verify_task: reasoning-gym task {task!r}"))
            reply = self._with_zygote(lambda zygote: zygote.command({"op": "load", "task": task}))
            if not reply["ok"]:
                raise TraacError(
                    f"verify_task: cannot load reasoning-gym task {task!r}: {reply['error']}"
                )
            self._tasks |= {task}

    def call(self, message: dict[str, Any], timeout: float, task: str | None = None) -> Any:
        """Run one request; its value, or None on timeout. Raises TraacError on a bad request."""
        start = time.monotonic()
        if task is not None and task not in self._tasks:
            self._load(task)  # once per pool, outside the deadline
            start = time.monotonic()
        deadline = start + timeout
        while True:
            worker = self._acquire(deadline)
            if worker is None or task is None or task in worker.tasks:
                break
            # Forked before the zygote loaded the task: the worker loads it too (once, outside
            # the deadline), or is replaced by a fork that has it.
            loaded = worker.request({"op": "load", "task": task}, STARTUP_TIMEOUT)
            if loaded is not None and loaded["ok"]:
                worker.tasks |= {task}
                deadline = time.monotonic() + timeout
                break
            self._retire(worker)
        reply = None if worker is None else worker.request(message, deadline - time.monotonic())
        if reply is None:
            if worker is not None:
                self._retire(worker)
            with self._lock:
                self.timeouts += 1
            return None
        self._release(worker)
        if not reply["ok"]:
            raise TraacError(f"verification failed: {reply['error']}")
        return reply["value"]

    def close(self) -> None:
        with self._lock:
            self._closed = True
            workers, self._live = self._live, set()
        zygote = getattr(self, "_zygote", None)
        if zygote is not None:
            zygote.close()  # kills the workers too
        for worker in workers:
            worker.close()
        shutil.rmtree(self._workdir, ignore_errors=True)


_pool: VerifierPool | None = None
_pool_lock = threading.Lock()


def default_workers() -> int:
    """Worker count: $TRAAC_VERIFY_WORKERS, else the CPU count capped at 4."""
    value = os.environ.get("TRAAC_VERIFY_WORKERS")
    if value is not None:
        if not value.isdigit() or int(value) < 1:
            raise TraacError(f"TRAAC_VERIFY_WORKERS must be a positive integer, got {value!r}")
        return int(value)
    return max(1, min(4, os.cpu_count() or 1))


def get_pool() -> VerifierPool:
    """The process-wide pool (a forked child gets its own; the parent's pipes stay the parent's)."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool.pid != os.getpid():
            _pool = VerifierPool(default_workers())
        return _pool


def configure_pool(workers: int) -> VerifierPool:
    """Replace the process-wide pool with one of `workers` processes."""
    global _pool
    with _pool_lock:
        if _pool is not None and _pool.pid == os.getpid():
            _pool.close()
        _pool = VerifierPool(workers)
        return _pool


@atexit.register
def shutdown_pool() -> None:
    """Stop the workers (also run at interpreter exit)."""
    global _pool
    with _pool_lock:
        if _pool is not None and _pool.pid == os.getpid():
            _pool.close()
        _pool = None
