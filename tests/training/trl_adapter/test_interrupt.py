"""StopOnSignal: the first SIGINT/SIGTERM asks the Trainer to save and stop at the step's end, a
second acts at once, the previous handlers come back afterwards, and a signal the process
inherited as ignored stays ignored.

Every test sets the dispositions it starts from (`python_defaults`), so the suite passes
however it is launched (`nohup`, a background job, `trap '' INT`)."""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from transformers import TrainerControl, TrainerState

from traac.training.trl_adapter.interrupt import StopOnSignal


@pytest.fixture(autouse=True)
def python_defaults() -> Iterator[None]:
    """What an interactive Python starts with: SIGINT raises KeyboardInterrupt, SIGTERM ends."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def step_end(callback: StopOnSignal) -> TrainerControl:
    return callback.on_step_end(None, TrainerState(), TrainerControl())


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_first_signal_saves_and_stops_at_the_end_of_the_step(sig: int, caplog: Any) -> None:
    caplog.set_level(logging.WARNING)
    before = signal.getsignal(sig)
    callback = StopOnSignal()
    with callback.installed():
        control = step_end(callback)
        assert not control.should_save and not control.should_training_stop
        signal.raise_signal(sig)
        assert callback.received == sig and callback.stopped is None  # nothing stops mid-step
        control = step_end(callback)
        assert control.should_save and control.should_training_stop and callback.stopped == sig
    assert signal.getsignal(sig) is before
    assert "saving a checkpoint at the end of this step" in caplog.text


def test_the_launchers_sigterm_after_a_ctrl_c_keeps_the_checkpoint() -> None:
    callback = StopOnSignal()
    with callback.installed():
        signal.raise_signal(signal.SIGINT)
        signal.raise_signal(signal.SIGTERM)  # torchrun forwards SIGTERM to its workers
        assert callback.received == signal.SIGINT
        assert step_end(callback).should_save and callback.stopped == signal.SIGINT


def test_second_sigint_interrupts_at_once() -> None:
    callback = StopOnSignal()
    with pytest.raises(KeyboardInterrupt), callback.installed():
        signal.raise_signal(signal.SIGINT)
        signal.raise_signal(signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_second_sigterm_ends_the_process() -> None:
    script = (
        "import signal, time\n"
        "from traac.training.trl_adapter.interrupt import StopOnSignal\n"
        "with StopOnSignal().installed():\n"
        "    signal.raise_signal(signal.SIGTERM)\n"
        "    print('first handled', flush=True)\n"
        "    signal.raise_signal(signal.SIGTERM)\n"
        "    time.sleep(5)\n"
        "    print('still running')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == -signal.SIGTERM
    assert done.stdout.strip() == "first handled"


def test_an_inherited_sigint_ignore_is_respected() -> None:
    """Launched under `nohup` or as a background job, SIGINT arrives ignored: training keeps
    running through it (as Python does), while SIGTERM still checkpoints and stops."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    callback = StopOnSignal()
    with callback.installed():
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        signal.raise_signal(signal.SIGINT)
        assert callback.received is None and not step_end(callback).should_save
        signal.raise_signal(signal.SIGTERM)
        assert step_end(callback).should_training_stop and callback.stopped == signal.SIGTERM
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def test_the_suite_itself_runs_with_sigint_ignored() -> None:
    """This file passes when pytest starts with SIGINT ignored (`trap '' INT`), the way a
    background job starts."""
    done = subprocess.run(
        ["bash", "-c", f"trap '' INT; exec {sys.executable} -m pytest -q -p no:cacheprovider "
         f"{__file__} -k 'not suite_itself'"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:]
