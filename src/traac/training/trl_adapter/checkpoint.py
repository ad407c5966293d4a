"""TRAAC's state in TRL's checkpoints: what a resumed run needs beyond TRL's own (the length
windows of the rewards, the rank calibration's window of uniformities and the peer method's
state, e.g. Laser-D's targets), as JSON; and the settings the run trained with, against which a
resume is checked (`check_resumable`): transformers restores the optimiser and its schedule from
the checkpoint, so an edited learning rate (or any other setting that shapes training) would be
ignored in silence, and the run would be neither the old recipe's nor the new one's.

Rank 0 writes `traac_state.json`; under several processes each rank also writes its own
(as transformers does with the RNG states), which lets anyone check that the ranks agree, and
each rank resumes from its own where there is one.
"""

from __future__ import annotations

import dataclasses
import json
from collections import deque
from pathlib import Path
from typing import Any

from transformers import TrainingArguments

from traac.errors import TraacError

STATE_FILE = "traac_state.json"  # rank 0's
SETTINGS = "settings"  # its key of the run's settings (`run_settings`)
# The fields of transformers' `TrainingArguments` that shape what is trained; the rest say where
# the run writes, logs and saves, how it is placed and launched, and when it stops.
TRAINING_FIELDS = ("learning_rate", "lr_scheduler_type", "lr_scheduler_kwargs", "warmup_steps",
                   "weight_decay", "adam_beta1", "adam_beta2", "adam_epsilon", "max_grad_norm",
                   "optim", "optim_args", "per_device_train_batch_size",
                   "gradient_accumulation_steps", "seed", "data_seed")  # fmt: skip
# Of TRL's GRPO fields and traac's own, those that say how, not what: the generation engine's
# placement, logging, the log-prob chunks, the precision and loading of the weights (as
# `TrainingArguments`' bf16), and the generation batch, which counts this launch's processes.
_NOT_TRAINING = ("vllm_", "log_", "num_completions_to_print", "ds3_gather_for_generation",
                 "num_generations_eval", "logprob_rows", "rollout_batching", "model_init_kwargs",
                 "cast_lm_head_to_fp32", "trust_remote_code", "generation_batch_size")  # fmt: skip


def run_settings(config: Any) -> dict[str, Any]:
    """What a `TRAACConfig` trains, as JSON values: `TRAINING_FIELDS`, TRL's GRPO fields and
    traac's own (the method's settings parsed, every key given), less those of `_NOT_TRAINING`.
    `max_steps` is not among them: a resume may train on to more steps."""
    placement = {f.name for f in dataclasses.fields(TrainingArguments)} - set(TRAINING_FIELDS)
    out = {}
    for f in dataclasses.fields(config):
        if f.name in placement or f.name.startswith(_NOT_TRAINING):
            continue
        value = getattr(config, f.name)
        out[f.name] = json.loads(json.dumps(getattr(value, "value", value), default=str))
    return out


def check_resumable(checkpoint: str, config: Any) -> None:
    """Refuse, in one line naming them, the settings of `config` that differ from those
    `checkpoint` trained with (a checkpoint from before they were saved is not checked)."""
    saved = (load_state(Path(checkpoint), 0) or {}).get(SETTINGS)
    if not isinstance(saved, dict):
        return
    prefix = getattr(config.method_settings, "FLAT_PREFIX", None)
    if prefix and isinstance(saved.get("method_args"), dict):  # saved before the blocks
        saved = {**saved, "method_args": {k.removeprefix(prefix): v
                                          for k, v in saved["method_args"].items()}}  # fmt: skip
    now = run_settings(config)
    changed = [name for name in now if name in saved and saved[name] != now[name]]
    if changed:
        what = ", ".join(f"{name} {saved[name]!r} (now {now[name]!r})" for name in changed)
        raise TraacError(
            f"resume_from_checkpoint: {checkpoint} trained with {what}; a resume goes on with "
            "the checkpoint's settings (only max_steps may change): put the recipe back, or "
            "start afresh in another --output-dir"
        )


def traac_state(
    windows: Any, uniformities: deque[float], method: Any, config: Any
) -> dict[str, Any]:
    """The state of a run's length windows, calibration window and method (`MethodHooks`;
    empty for the methods that keep nothing), each with its `state_dict`, and the settings of
    its `config` (`run_settings`). The method's is saved under "peer", the key older
    checkpoints hold."""
    return {
        "length_windows": windows.state_dict(),
        "uniformities": list(uniformities),
        "peer": method.state_dict(),
        SETTINGS: run_settings(config),
    }


def load_traac_state(
    state: dict[str, Any], windows: Any, uniformities: deque[float], method: Any
) -> None:
    """Restore `traac_state`'s values in place (a checkpoint without the method's loads as
    one whose method keeps nothing)."""
    windows.load_state_dict(state["length_windows"])
    uniformities.clear()
    uniformities.extend(state["uniformities"])
    method.load_state_dict(state.get("peer", {}))


def rank_state_file(rank: int) -> str:
    """The TRAAC state file of one process in a checkpoint of a multi-process run."""
    return f"traac_state_{rank}.json"


def save_state(
    folder: Path, state: dict[str, Any], *, main: bool, rank: int, num_processes: int
) -> None:
    """Write `state` into a checkpoint `folder`: `STATE_FILE` from the process that saves
    (`main`), and each rank's own file when there are several processes."""
    names = [STATE_FILE] if main else []
    if num_processes > 1:
        names.append(rank_state_file(rank))
    text = json.dumps(state)
    for name in names:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)


def load_state(checkpoint: Path, rank: int) -> dict[str, Any] | None:
    """This rank's TRAAC state in a checkpoint, else rank 0's, else None."""
    for name in (rank_state_file(rank), STATE_FILE):
        path = checkpoint / name
        if path.exists():
            return json.loads(path.read_text())
    return None
