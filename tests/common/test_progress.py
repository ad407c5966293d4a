"""Progress reporting: plain log lines off a terminal (done/total, rate, time left, a closing
line), rich bars on one, and the Trainer callback that drives either."""

from __future__ import annotations

import contextlib
import io
import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from rich.console import Console
from transformers import Trainer, TrainingArguments

from traac.common.progress import LogProgress, NullProgress
from traac.common.trainer_progress import TrainerProgress
from traac.console import RichProgress, make_progress

RATE = r"[0-9.e+-]+/s"


@pytest.fixture(autouse=True)
def fresh_traac_logger() -> Iterator[logging.Logger]:
    """The "traac" logger as a fresh process has it (no handler yet, propagating to caplog's),
    restored afterwards: `make_progress` installs a handler once per process."""
    logger = logging.getLogger("traac")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    logger.handlers, logger.propagate = [], True
    logger.setLevel(logging.NOTSET)
    try:
        yield logger
    finally:
        logger.handlers, logger.level, logger.propagate = saved


def logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("traac")]


def test_log_progress_logs_done_total_rate_and_time_left_at_each_interval(caplog):
    caplog.set_level(logging.INFO, logger="traac")
    with LogProgress(interval=0.0).task("scoring", 4) as task:
        time.sleep(0.01)  # some time passes, so there is a rate
        task.advance()
        task.update(completed=2, info="loss 0.5")
    started, first, second, closing = logged(caplog)
    assert started == "scoring: started, 4 to do"
    assert re.fullmatch(rf"scoring: 1/4 \(25%\), \d+ s elapsed, {RATE}, about \d+ s left", first)
    assert re.fullmatch(
        rf"scoring: 2/4 \(50%\), \d+ s elapsed, {RATE}, about \d+ s left, loss 0.5", second
    )
    # the closing line says where the task stopped, with no time left to guess
    assert re.fullmatch(rf"scoring: 2/4 \(50%\), \d+ s elapsed, {RATE}, loss 0.5", closing)


def test_log_progress_is_quiet_between_intervals_but_always_closes(caplog):
    caplog.set_level(logging.INFO, logger="traac")
    with LogProgress(interval=3600.0).task("generating", 3) as task:
        for _ in range(3):
            task.advance()
    started, closing = logged(caplog)
    assert started == "generating: started, 3 to do"
    assert re.fullmatch(rf"generating: 3/3 \(100%\), \d+ s elapsed(, {RATE})?", closing)
    caplog.clear()
    with LogProgress(interval=3600.0).task("generating", 5, completed=3) as task:
        task.advance(2)
    started, closing = logged(caplog)
    assert started == "generating: resumed at 3/5"  # the rate counts this run's 2 alone
    assert re.fullmatch(rf"generating: 5/5 \(100%\), \d+ s elapsed(, {RATE})?", closing)


def test_log_progress_without_a_total_and_phases(caplog):
    caplog.set_level(logging.INFO, logger="traac")
    progress = LogProgress(interval=3600.0)
    with progress.task("loading", None) as task:
        task.advance(2)
    with progress.phase("tokenizing"):
        pass
    started, closing, phase_started, phase_done = logged(caplog)
    assert started == "loading: started"
    assert re.fullmatch(rf"loading: 2, \d+ s elapsed(, {RATE})?", closing)
    assert phase_started == "tokenizing ..."
    assert re.fullmatch(r"tokenizing: done in [0-9.]+ s", phase_done)


def test_off_a_terminal_progress_is_printed_as_plain_lines_on_stderr(capsys):
    """A command's progress under nohup, a scheduler or `| tee` must reach the log."""
    progress = make_progress(Console(file=io.StringIO(), force_terminal=False))
    assert isinstance(progress, LogProgress)
    with progress.task("scoring", 2) as task:
        task.advance(2)
    out, err = capsys.readouterr()
    assert out == ""  # stdout stays for the results
    lines = err.splitlines()
    assert len(lines) == 2
    assert lines[0].endswith("scoring: started, 2 to do")
    assert re.search(r"scoring: 2/2 \(100%\), \d+ s elapsed", lines[1])


def test_on_a_terminal_progress_is_drawn_as_bars():
    screen = io.StringIO()
    progress = make_progress(Console(file=screen, force_terminal=True, width=120))
    assert isinstance(progress, RichProgress)
    with progress.task("scoring", 2) as task:
        task.advance(2)
        task.update(info="loss 0.25")
    assert "scoring" in screen.getvalue() and "2/2" in screen.getvalue()
    assert "loss 0.25" in screen.getvalue()


class Recorder:
    """A `Progress` that records what is done to it."""

    def __init__(self) -> None:
        self.events: list[tuple] = []

    @contextlib.contextmanager
    def task(self, description: str, total: int | None, completed: int = 0) -> Iterator:
        self.events.append(("open", description, total, completed))
        yield SimpleNamespace(
            advance=lambda n=1: self.events.append(("advance", n)),
            update=lambda completed=None, info=None: self.events.append(
                ("update", completed, info)
            ),
        )
        self.events.append(("close",))

    @contextlib.contextmanager
    def phase(self, description: str) -> Iterator[None]:
        yield


def test_trainer_progress_drives_a_task_and_keeps_the_loss_history() -> None:
    progress = Recorder()
    callback = TrainerProgress(progress, "TRAAC steps")
    args, control = SimpleNamespace(), SimpleNamespace()
    state = SimpleNamespace(max_steps=2, global_step=0, is_local_process_zero=True)
    callback.on_train_begin(args, state, control)
    for step, logs in enumerate(
        [{"loss": 0.25, "reward": 4.5, "completions/mean_length": 41.0}, {"learning_rate": 1e-6}],
        start=1,
    ):
        state.global_step = step
        callback.on_step_end(args, state, control)
        callback.on_log(args, state, control, logs=logs)
    callback.on_train_end(args, state, control)
    assert callback.history == [(1, 0.25)]
    assert callback.last_loss == 0.25
    assert progress.events == [
        ("open", "TRAAC steps", 2, 0),
        ("update", 1, None),
        ("update", None, "loss 0.25  reward 4.5  length 41"),
        ("update", 2, None),
        ("close",),
    ]


def test_trainer_progress_resumes_at_the_current_step_and_only_process_zero_reports() -> None:
    progress = Recorder()
    callback = TrainerProgress(progress, "steps")
    args, control = SimpleNamespace(), SimpleNamespace()
    resumed = SimpleNamespace(max_steps=10, global_step=6, is_local_process_zero=True)
    callback.on_train_begin(args, resumed, control)
    callback.on_train_end(args, resumed, control)
    assert progress.events == [("open", "steps", 10, 6), ("close",)]

    other = Recorder()
    callback = TrainerProgress(other, "steps")
    state = SimpleNamespace(max_steps=2, global_step=1, is_local_process_zero=False)
    callback.on_train_begin(args, state, control)
    callback.on_step_end(args, state, control)
    callback.on_log(args, state, control, logs={"loss": 0.5})
    callback.on_train_end(args, state, control)
    assert other.events == []
    assert callback.history == [(1, 0.5)]  # every process keeps the history


def test_trainer_progress_in_a_real_trainer(tmp_path: Path, tiny_model) -> None:
    """The callback's hooks as transformers calls them: one task over max_steps, each step."""
    model = tiny_model()
    ids = torch.randint(5, 50, (4, 12)).tolist()
    rows = [{"input_ids": row, "labels": row} for row in ids]
    args = TrainingArguments(
        output_dir=str(tmp_path),
        use_cpu=True,
        report_to="none",
        disable_tqdm=True,
        save_strategy="no",
        max_steps=2,
        logging_steps=1,
        per_device_train_batch_size=2,
    )
    progress = Recorder()
    callback = TrainerProgress(progress, "SFT")
    trainer = Trainer(model=model, args=args, train_dataset=rows, callbacks=[callback])
    trainer.train()
    assert progress.events[0] == ("open", "SFT", 2, 0)
    assert progress.events[-1] == ("close",)
    assert ("update", 2, None) in progress.events
    assert [step for step, _ in callback.history] == [1, 2]
    assert callback.last_loss == callback.history[-1][1]


def test_null_progress_accepts_everything() -> None:
    progress = NullProgress()
    with progress.task("x", 3) as task, progress.phase("y"):
        task.advance()
        task.update(completed=3, info="done")


def test_library_use_reports_on_stderr_with_no_logging_set_up(capsys) -> None:
    """`TRAACTrainer(model="testbed-tiny")` in a plain script: the build's lines reach stderr
    although nothing configured logging (`traac._resolve_model` passes this progress)."""
    from traac.common.progress import to_stderr

    progress = LogProgress(interval=0.0, emit=to_stderr)
    with progress.phase("testbed: writing teacher traces"):
        pass
    with progress.task("testbed SFT", total=4) as task:
        task.advance(2)
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "traac: testbed: writing teacher traces ..."
    assert re.fullmatch(r"traac: testbed: writing teacher traces: done in [0-9.]+ s", err[1])
    assert err[2] == "traac: testbed SFT: started, 4 to do"
    assert err[3].startswith("traac: testbed SFT: 2/4 (50%), ")
