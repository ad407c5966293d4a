"""Rich progress: a TrainerCallback bar for SFT and GRPO, and a bar for batched generation."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import Any

from transformers import TrainerCallback


def make_console() -> Any:
    """Progress goes to stderr, so a command's stdout stays for its results."""
    from rich.console import Console

    return Console(stderr=True)


def make_progress(console: Any) -> Any:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[info]}"),
        console=console,
        transient=False,
    )


class RichProgressCallback(TrainerCallback):
    """One bar over the optimizer steps, showing the latest logged loss (and, under GRPO, the
    mean reward and completion length) in place of transformers' printed log dicts."""

    SHOWN = (("loss", "loss"), ("reward", "reward"), ("completions/mean_length", "length"))

    def __init__(self, console: Any, label: str) -> None:
        self.console = console
        self.label = label
        self.progress: Any = None
        self.task: Any = None
        self.last_loss: float | None = None
        self.history: list[tuple[int, float]] = []  # (step, loss) at every log

    def on_train_begin(self, args, state, control, **kwargs):
        self.progress = make_progress(self.console)
        self.progress.start()
        self.task = self.progress.add_task(self.label, total=state.max_steps, info="")

    def on_step_end(self, args, state, control, **kwargs):
        self.progress.update(self.task, completed=state.global_step)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs:
            return
        if "loss" in logs:
            self.last_loss = round(float(logs["loss"]), 4)
            self.history.append((state.global_step, self.last_loss))
        shown = [f"{name} {float(logs[k]):.3g}" for k, name in self.SHOWN if k in logs]
        if shown:
            self.progress.update(self.task, info="  ".join(shown))

    def on_train_end(self, args, state, control, **kwargs):
        self.progress.stop()


@contextlib.contextmanager
def quiet_libraries() -> Iterator[None]:
    """Silence the libraries' own tqdm bars and deprecation notices while our bars run."""
    import datasets
    from transformers.utils import logging

    datasets_on = not datasets.are_progress_bars_disabled()
    transformers_on = logging.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    logging.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            yield
    finally:
        if datasets_on:
            datasets.enable_progress_bars()
        if transformers_on:
            logging.enable_progress_bar()
