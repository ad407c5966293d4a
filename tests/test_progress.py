"""The training progress bar: what it shows, and that it replaces transformers' printed logs."""

from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console
from transformers import Trainer, TrainingArguments
from transformers.trainer_callback import PrinterCallback, ProgressCallback

from tiny import tiny_model
from traac.commands.train import show_progress
from traac.progress import RichProgressCallback


def test_the_bar_shows_loss_reward_and_length_and_keeps_the_loss_history() -> None:
    out = io.StringIO()
    bar = RichProgressCallback(Console(file=out, width=160, force_terminal=False), "TRAAC steps")
    args, control = SimpleNamespace(), SimpleNamespace()
    bar.on_train_begin(args, SimpleNamespace(max_steps=2), control)
    for step, logs in enumerate(
        [{"loss": 0.25, "reward": 4.5, "completions/mean_length": 41.0}, {"learning_rate": 1e-6}],
        start=1,
    ):
        state = SimpleNamespace(global_step=step)
        bar.on_step_end(args, state, control)
        bar.on_log(args, state, control, logs=logs)
    bar.on_train_end(args, state, control)
    assert bar.history == [(1, 0.25)]
    assert bar.last_loss == 0.25
    assert "loss 0.25  reward 4.5  length 41" in out.getvalue()
    assert "2/2" in out.getvalue()


@pytest.mark.parametrize("disable_tqdm", [False, True])
def test_show_progress_replaces_the_printed_logs_unless_bars_are_off(
    tmp_path: Path, disable_tqdm: bool
) -> None:
    args = TrainingArguments(
        output_dir=str(tmp_path), use_cpu=True, report_to="none", disable_tqdm=disable_tqdm
    )
    trainer = Trainer(model=tiny_model(), args=args)
    show_progress(trainer)
    kinds = {type(c) for c in trainer.callback_handler.callbacks}
    if disable_tqdm:  # log files keep transformers' printed log dicts
        assert PrinterCallback in kinds and RichProgressCallback not in kinds
    else:
        assert RichProgressCallback in kinds
        assert not kinds & {ProgressCallback, PrinterCallback}
