"""StopOnSignal: the first SIGINT/SIGTERM asks the Trainer to save and stop at the step's end, a
second acts at once, and the previous handlers come back afterwards."""

from __future__ import annotations

import signal
import subprocess
import sys
from typing import Any

import pytest
from transformers import TrainerControl, TrainerState

from traac.interrupt import StopOnSignal


def step_end(callback: StopOnSignal) -> TrainerControl:
    return callback.on_step_end(None, TrainerState(), TrainerControl())


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_first_signal_saves_and_stops_at_the_end_of_the_step(sig: int, capsys: Any) -> None:
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
    assert "saving a checkpoint at the end of this step" in capsys.readouterr().err


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
        "from traac.interrupt import StopOnSignal\n"
        "with StopOnSignal().installed():\n"
        "    signal.raise_signal(signal.SIGTERM)\n"
        "    print('first handled', flush=True)\n"
        "    signal.raise_signal(signal.SIGTERM)\n"
        "    time.sleep(5)\n"
        "    print('still running')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == -signal.SIGTERM
    assert done.stdout.strip() == "first handled"
