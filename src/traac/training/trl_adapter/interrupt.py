"""Stop training cleanly on SIGINT or SIGTERM: checkpoint at the end of the current step, exit.

A cluster's pre-emption notice (SIGTERM) or a Ctrl-C (SIGINT) must not cost the work since the
last periodic checkpoint. `StopOnSignal` is a transformers `TrainerCallback`: while
`StopOnSignal.installed()` is active, the first signal only sets a flag; at the end of the step
under way the callback asks the Trainer to save a checkpoint (`control.should_save`, honoured
whatever the `save_strategy`) and to stop (`control.should_training_stop`). A signal the
process inherited as ignored (SIG_IGN: `nohup`, a shell's background job) stays ignored, as
Python itself leaves it. The same signal a second time restores the previous handlers and
re-delivers itself, so it acts at once (SIGINT raises `KeyboardInterrupt`, SIGTERM ends the
process). The other signal does not: on Ctrl-C,
torchrun and `accelerate launch` forward SIGTERM to their workers (and kill them 30 s later),
which must not cancel the checkpoint the Ctrl-C asked for.

Under several processes the ranks agree before stopping: a rank that got the signal tells the
others at the end of the step, and all of them save and stop together (a rank stopping alone
would leave the rest blocked in a collective).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from accelerate import PartialState
from accelerate.logging import get_logger
from accelerate.utils import gather_object
from transformers import TrainerCallback

logger = get_logger(__name__)

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopOnSignal(TrainerCallback):
    """Save and stop at the end of the step during which SIGINT or SIGTERM arrived."""

    def __init__(self) -> None:
        self.received: int | None = None  # the first signal seen by this process
        self.stopped: int | None = None  # the signal training stopped for (any rank's)
        self._seen: set[int] = set()
        self._previous: dict[int, Any] = {}

    @contextmanager
    def installed(self) -> Iterator[StopOnSignal]:
        """Handle the signals for the duration (main thread only; elsewhere a no-op), then put
        back whatever handlers were there before."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        PartialState()  # the logger prints once per run, on the main process
        self.received = self.stopped = None
        self._seen = set()
        # A signal the launch ignores stays ignored, as Python leaves it: `nohup` and a shell's
        # background job ignore SIGINT so that the terminal's Ctrl-C does not reach the job.
        self._previous = {
            sig: signal.signal(sig, self._handle)
            for sig in SIGNALS
            if signal.getsignal(sig) is not signal.SIG_IGN
        }
        try:
            yield self
        finally:
            self._restore()

    def _restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}

    def _handle(self, signum: int, frame: Any) -> None:
        if signum not in self._seen:
            self._seen.add(signum)
            if self.received is None:
                self.received = signum
                logger.warning(
                    f"{signal.Signals(signum).name} received; saving a checkpoint at the end of "
                    "this step, then stopping (send it again to stop at once)"
                )
            return
        self._restore()
        signal.raise_signal(signum)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        signum = _agreed(self.received)
        if signum is not None:
            self.stopped = signum
            control.should_save = True
            control.should_training_stop = True
        return control


def _agreed(received: int | None) -> int | None:
    """The signal any rank received (every rank calls this once per step, so they agree)."""
    if PartialState().num_processes == 1:
        return received
    seen = [s for s in gather_object([received]) if s is not None]
    return seen[0] if seen else None
