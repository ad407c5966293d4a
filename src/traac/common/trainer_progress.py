"""A `Progress` driven by a transformers `Trainer` (SFT and GRPO alike): its own module, so
that what only reports (`traac.common.progress`, a re-report) does not import transformers'
trainer stack."""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback

from traac.common.progress import Progress, Task


class TrainerProgress(TrainerCallback):
    """One progress task over a Trainer's optimizer steps, showing the latest loss (and, under
    GRPO, mean reward and completion length); keeps the loss history for reports."""

    SHOWN = (("loss", "loss"), ("reward", "reward"), ("completions/mean_length", "length"))

    def __init__(self, progress: Progress, label: str) -> None:
        self.progress = progress
        self.label = label
        self._context: Any = None
        self._task: Task | None = None
        self.last_loss: float | None = None
        self.history: list[tuple[int, float]] = []  # (step, loss) at every log

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_local_process_zero:
            self._context = self.progress.task(self.label, state.max_steps, state.global_step)
            self._task = self._context.__enter__()

    def on_step_end(self, args, state, control, **kwargs):
        if self._task is not None:
            self._task.update(completed=state.global_step)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs:
            return
        if "loss" in logs:
            self.last_loss = round(float(logs["loss"]), 4)
            self.history.append((state.global_step, self.last_loss))
        shown = [f"{name} {float(logs[k]):.3g}" for k, name in self.SHOWN if k in logs]
        if shown and self._task is not None:
            self._task.update(info="  ".join(shown))

    def on_train_end(self, args, state, control, **kwargs):
        if self._context is not None:
            self._context.__exit__(None, None, None)
            self._context = self._task = None
