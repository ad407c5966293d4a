"""Continuing an experiment's runs to more steps: `traac experiment ... --continue-from RECIPE`.

A recipe that differs from another only in `max_steps` keys its runs apart in the store, so
raising the steps would train every run again from step 0. With `--continue-from` each new run
starts where the other recipe's run of the same variant and seed stopped: its newest complete
checkpoint and its `metrics.jsonl` are copied into the new run's directory (the source stays as
it was) and training resumes from there. Under a learning-rate schedule that does not depend on
`max_steps` (constant, or constant after a warm-up counted in steps) that is the run trained
straight through: on the testbed the weights came out bitwise equal (docs/workbench.md#continuing).
Which recipes may continue which: `traac.pipelines.recipe.check_continuable`.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from traac.errors import TraacError
from traac.pipelines.stages import Recipe
from traac.pipelines.train import resume_checkpoint
from traac.training.telemetry.metrics_file import METRICS_FILE

if TYPE_CHECKING:
    from traac.training.planning.traac_config import TRAACConfig

STEP_FREE_SCHEDULES = ("constant", "constant_with_warmup")


@dataclass(frozen=True)
class Continuation:
    """A run to start from another run's checkpoint."""

    target: Path  # the new run's model directory
    checkpoint: Path  # the source run's newest complete checkpoint

    def seed(self) -> None:
        """Copy the checkpoint (under a temporary name, renamed when whole: a copy cut short
        is never taken for a checkpoint) and the source's metrics into the new run."""
        self.target.mkdir(parents=True, exist_ok=True)
        partial = self.target / f".partial-{self.checkpoint.name}"
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(self.checkpoint, partial)
        metrics = self.checkpoint.parent / METRICS_FILE
        if metrics.is_file():  # the resumed run cuts it back to the checkpoint's step
            shutil.copy2(metrics, self.target / METRICS_FILE)
        os.replace(partial, self.target / self.checkpoint.name)


def check_steps(source: Path, ours: TRAACConfig, theirs: TRAACConfig) -> None:
    """More steps than the source's, under a schedule the step count does not shape."""
    if theirs.max_steps >= ours.max_steps:
        raise TraacError(
            f"--continue-from {source}: its runs train {theirs.max_steps} steps, this recipe "
            f"{ours.max_steps}; continue only to more steps"
        )
    schedule, warmup = str(ours.lr_scheduler_type), ours.warmup_steps
    if schedule.split(".")[-1].lower() not in STEP_FREE_SCHEDULES or 0 < warmup < 1:
        raise TraacError(
            f"--continue-from {source}: lr_scheduler_type {schedule} with warmup_steps "
            f"{warmup:g} depends on max_steps, so a continued run would not be the run trained "
            "straight through; use constant_with_warmup with warm-up in steps, or drop "
            "--continue-from"
        )


def plan_continuations(runs: Sequence[tuple[str, Path, Path]], source: Path) -> list[Continuation]:
    """For each (run name, model directory, source run's model directory) whose run is neither
    trained nor under way, the source's newest complete checkpoint; a source without one fails
    here, before any work."""
    out = []
    for name, model, origin in runs:
        if Recipe.trained(model):
            continue  # trained: the store keeps it
        if resume_checkpoint("auto", str(model)) is not None:
            continue  # under way: it resumes from its own checkpoint
        found = resume_checkpoint("auto", str(origin))
        if found is None:
            raise TraacError(
                f"--continue-from {source}: {name} has no complete checkpoint in "
                f"{origin}; train it with that recipe first (save_strategy: steps), "
                "or drop --continue-from"
            )
        out.append(Continuation(model, Path(found)))
    return out
