"""Progress without a UI library: what long library work reports through.

Library code never draws. It takes a `Progress` and opens tasks on it; the commands pass a rich
one on a terminal and `LogProgress` elsewhere (nohup, a batch scheduler, `| tee`), which logs a
plain line at a steady pace: done/total, rate, time left. `traac.common.trainer_progress`
drives either from a transformers `Trainer`.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any, Protocol

logger = logging.getLogger(__name__)


class Task(Protocol):
    """One counted piece of work."""

    def advance(self, n: int = 1) -> None: ...

    def update(self, *, completed: int | None = None, info: str | None = None) -> None: ...


class Progress(Protocol):
    """Where long work reports: counted tasks, and phases with no count."""

    def task(self, description: str, total: int | None, completed: int = 0) -> Any:
        """A context manager yielding a `Task`."""
        ...

    def phase(self, description: str) -> Any:
        """A context manager around work that has no count."""
        ...


class _NullTask:
    def advance(self, n: int = 1) -> None:
        pass

    def update(self, *, completed: int | None = None, info: str | None = None) -> None:
        pass


class NullProgress:
    """Reports nothing (library calls without a UI, tests)."""

    @contextlib.contextmanager
    def task(self, description: str, total: int | None, completed: int = 0) -> Iterator[Task]:
        yield _NullTask()

    @contextlib.contextmanager
    def phase(self, description: str) -> Iterator[None]:
        yield


class _LogTask:
    """Counts, and logs a line when `interval` seconds have passed since the last one."""

    def __init__(
        self,
        description: str,
        total: int | None,
        completed: int,
        interval: float,
        emit: Callable[[str], None],
    ):
        self.emit = emit
        self.description = description
        self.total = total
        self.start_count = self.completed = completed
        self.info = ""
        self.interval = interval
        self.started = self.last = time.monotonic()

    def advance(self, n: int = 1) -> None:
        self.update(completed=self.completed + n)

    def update(self, *, completed: int | None = None, info: str | None = None) -> None:
        if completed is not None:
            self.completed = completed
        if info is not None:
            self.info = info
        if time.monotonic() - self.last >= self.interval:
            self.log()

    def log(self, final: bool = False) -> None:
        self.last = time.monotonic()
        elapsed = self.last - self.started
        done = self.completed - self.start_count
        rate = done / elapsed if elapsed > 0 else 0.0
        parts = [f"{self.description}: {self.completed}" + (f"/{self.total}" if self.total else "")]
        if self.total:
            parts[0] += f" ({100 * self.completed / self.total:.0f}%)"
        parts.append(f"{elapsed:.0f} s elapsed")
        if rate > 0:
            parts.append(f"{rate:.3g}/s")
            if self.total and not final:
                parts.append(f"about {(self.total - self.completed) / rate:.0f} s left")
        if self.info:
            parts.append(self.info)
        self.emit(", ".join(parts))


class LogProgress:
    """Plain progress lines through `logging` (or `emit`), one every `interval` seconds per
    task, and a closing line: what a log file needs to tell how far a job has come."""

    def __init__(self, interval: float = 30.0, emit: Callable[[str], None] | None = None) -> None:
        self.interval = interval
        self.emit = logger.info if emit is None else emit

    @contextlib.contextmanager
    def task(self, description: str, total: int | None, completed: int = 0) -> Iterator[Task]:
        task = _LogTask(description, total, completed, self.interval, self.emit)
        if completed and total:
            self.emit(f"{description}: resumed at {completed}/{total}")
        else:
            self.emit(f"{description}: started" + (f", {total} to do" if total else ""))
        try:
            yield task
        finally:
            task.log(final=True)

    @contextlib.contextmanager
    def phase(self, description: str) -> Iterator[None]:
        started = time.monotonic()
        self.emit(f"{description} ...")
        yield
        self.emit(f"{description}: done in {time.monotonic() - started:.1f} s")


def to_stderr(line: str) -> None:
    """A progress line straight to stderr: for library use, where no logging is set up."""
    print(f"traac: {line}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def quiet_libraries() -> Iterator[None]:
    """Silence the libraries' own tqdm bars and deprecation notices while ours report."""
    import datasets  # here, not at the top: a re-report imports this module and neither library
    from transformers.utils import logging as hf_logging

    datasets_on = not datasets.are_progress_bars_disabled()
    transformers_on = hf_logging.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    hf_logging.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            yield
    finally:
        if datasets_on:
            datasets.enable_progress_bars()
        if transformers_on:
            hf_logging.enable_progress_bar()
