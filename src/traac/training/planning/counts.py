"""The counts of a training recipe that TRL and transformers take without a check: a zero or a
negative there ends in a traceback (a division by zero in the batch arithmetic) or, for
`max_steps`, a silent fall back to the epochs. One table, read twice: by the command line's
check before anything heavy is imported (`traac.pipelines.recipe`) and by `TRAACConfig`, so the
Python API refuses the same values. Importable without torch."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from traac.errors import TraacError
from traac.training.methods.base import typed


@dataclass(frozen=True)
class Count:
    """A field's smallest value; `integer` (else any finite number); `optional` (None allowed)."""

    minimum: float
    integer: bool = True
    optional: bool = False
    strict: bool = False  # the value must exceed `minimum`, not merely reach it


COUNTS: dict[str, Count] = {
    "num_train_epochs": Count(0, integer=False, strict=True),
    "per_device_train_batch_size": Count(1),
    "per_device_eval_batch_size": Count(1),
    "gradient_accumulation_steps": Count(1),
    "num_generations": Count(2, optional=True),
    "num_generations_eval": Count(1, optional=True),
    "steps_per_generation": Count(1, optional=True),
    "generation_batch_size": Count(1, optional=True),
    "num_iterations": Count(1),
    "max_prompt_length": Count(1, optional=True),
    "max_completion_length": Count(1, optional=True),
    "logging_steps": Count(0, integer=False, strict=True),
    "save_steps": Count(0, integer=False, strict=True),
    "eval_steps": Count(0, integer=False, strict=True, optional=True),
    "warmup_steps": Count(0, integer=False),
    "seed": Count(0),
    "data_seed": Count(0, optional=True),
    "dataloader_num_workers": Count(0),
    "num_threads": Count(1, optional=True),
    "dry_run_processes": Count(1, optional=True),
    "lora_r": Count(1),
    "lora_alpha": Count(0, integer=False, strict=True),
}
# transformers' `max_steps`: a number of optimizer steps, or -1 for "train num_train_epochs".
EPOCHS = -1


def _number(name: str, value: Any, integer: bool) -> float:
    """A recipe or command-line value as a number (a command line gives text: `typed`)."""
    value = typed(name, value, int if integer else float)
    kind = "an integer" if integer else "a number"
    ok = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok or not math.isfinite(value):
        raise TraacError(f"{name}: {value!r} must be {kind}")
    return value


def check_max_steps(value: Any) -> None:
    """`max_steps`: at least 1, or -1 (transformers' "use the epochs")."""
    steps = _number("max_steps", value, integer=True)
    if steps != EPOCHS and steps < 1:
        raise TraacError(
            f"max_steps: {value} must be a number of steps >= 1, or -1 to train for "
            "num_train_epochs"
        )


def check_counts(values: dict[str, Any]) -> None:
    """Each field of `COUNTS` (and `max_steps`) in `values`, named with its bound in one line."""
    if "max_steps" in values:
        check_max_steps(values["max_steps"])
    for name, count in COUNTS.items():
        if name not in values:
            continue
        value = values[name]
        if value is None or (isinstance(value, str) and value.lower() in ("none", "null")):
            if count.optional:
                continue
            raise TraacError(f"{name}: must be set (a number >= {count.minimum:g})")
        number = _number(name, value, count.integer)
        if number < count.minimum or (count.strict and number == count.minimum):
            bound = f"{'>' if count.strict else '>='} {count.minimum:g}"
            kind = "an integer" if count.integer else "a number"
            raise TraacError(f"{name}: {value} must be {kind} {bound}")
