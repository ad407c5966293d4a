"""What the step driver needs from a live run, as a `typing.Protocol`: `StepHost`.

The TRAAC step (`traac.training.step.driver`) samples, verifies, resamples, scores, re-answers and
pools; every piece of that which needs the run itself (a generation backend, the other
processes, the training set, the scoring model's mode) goes through these few members, which
`TRAACTrainer` implements over TRL and a test can implement with scripted answers and no model.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Protocol

from traac.training.telemetry.step_stats import StepClock


class StepHost(Protocol):
    """The run a step executes in, seen from one process."""

    @property
    def rank(self) -> int:
        """This process's index; its rows come after those of the lower ranks."""

    @property
    def training(self) -> bool:
        """The policy is in training mode: compression and dynamic sampling run only then."""

    @property
    def global_step(self) -> int:
        """The optimizer steps done: seeds the step's draws (pooling, resampling)."""

    @property
    def collective_forwards(self) -> bool:
        """Each scoring forward is a collective (FSDP, ZeRO-3): all processes run as many."""

    @property
    def generation_group(self) -> int:
        """How many consecutive processes must hand the backend as many prompts each
        (`traac.training.step.rounds.generation_group`)."""

    @property
    def dataset_size(self) -> int:
        """The number of training rows dynamic sampling draws replacement prompts from."""

    def dataset_row(self, index: int) -> dict[str, Any]:
        """Training row `index`, as a new dict."""

    def prompt_ids(self, prompts: list[Any]) -> list[list[int]]:
        """Token ids of dataset prompts, exactly as the backend tokenizes them for generation."""

    def sample_answers(
        self, prompts: list[list[int]], budget: int
    ) -> tuple[list[list[int]], list[list[float]] | None]:
        """One completion per prompt (token ids), up to `budget` new tokens, with its sampling
        log-probs where the backend reports them. Every process calls it in each round."""

    def gather(self, values: list[Any]) -> list[Any]:
        """Every process's `values`, concatenated in rank order (a collective)."""

    def scoring(self, clock: StepClock) -> AbstractContextManager[Any]:
        """Entered around the scoring forwards: their time on `clock`, the scoring model's
        mode."""
