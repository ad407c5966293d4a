"""`traac train --config RECIPE.yaml [--any_field value ...]`: TRAAC on TRL's GRPO.

TRL's parser conventions: every field of `TrainScriptArguments` and `TRAACConfig` (so every
`GRPOConfig`/`TrainingArguments` field) can be set in the YAML recipe or on the command line,
the command line winning; an `env:` mapping in the recipe sets environment variables.

`--dry-run` checks the recipe and prints the plan (`traac.plan`) without loading weights or
needing a GPU. The problems are loaded before the model, so a bad row fails in seconds.
SIGINT/SIGTERM checkpoint at the end of the current step and exit with 128 + the signal
number (130, 143); `--resume_from_checkpoint auto` continues from the newest checkpoint.
"""

from __future__ import annotations

import re
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from traac.errors import TraacError


@dataclass
class TrainScriptArguments:
    """What to train and on which problems (the rest is `TRAACConfig`)."""

    model_name_or_path: str = field(
        default="testbed",
        metadata={"help": "Model directory, hub id, or testbed (the embedded CPU model)."},
    )
    dataset: str = field(
        default="testbed:all",
        metadata={"help": "Training problems: testbed[:TIER][?n=N&seed=S] or a dataset name."},
    )
    prompt_suffix: str = field(
        default="", metadata={"help": "Text appended to every question (the paper's DAPO suffix)."}
    )
    num_threads: int | None = field(
        default=None,
        metadata={"help": "torch CPU threads (unset: torch's default). Tiny models generate "
                  "fastest on 1, and far faster on a machine other jobs share."},
    )  # fmt: skip
    dry_run: bool = field(
        default=False,
        metadata={"help": "Check the recipe, print the plan and exit 0 (no weights loaded, no "
                  "GPU needed); an invalid field exits 2."},
    )  # fmt: skip
    dry_run_processes: int | None = field(
        default=None,
        metadata={"help": "With --dry-run: plan for this many training processes (GPUs) "
                  "instead of this launch's."},
    )  # fmt: skip


RESUME_LATEST = ("auto", "true", "latest")
_NO_RESUME = ("", "false", "no", "none")


def build_parser() -> Any:
    """TRL's parser over both dataclasses (imported here: `traac --help` stays instant)."""
    from trl import TrlParser

    from traac.config import TRAACConfig

    return TrlParser((TrainScriptArguments, TRAACConfig), prog="traac train")


def parse(argv: list[str]) -> tuple[TrainScriptArguments, object]:
    """Recipe + overrides -> (script arguments, TRAACConfig); bad values -> TraacError."""
    if "--config" in argv:
        at = argv.index("--config")
        if at + 1 >= len(argv):
            raise TraacError("--config needs a recipe path")
        from pathlib import Path

        if not Path(argv[at + 1]).is_file():
            raise TraacError(f"--config {argv[at + 1]}: no such recipe file")
    try:
        script, config = build_parser().parse_args_and_config(list(argv))
    except ValueError as err:
        raise TraacError(str(err).splitlines()[0]) from err
    return script, config


def resume_checkpoint(value: str | None, output_dir: str, announce: bool = True) -> str | None:
    """The checkpoint `--resume_from_checkpoint` names: a path, or `auto`/`true` for the newest
    complete `checkpoint-N` in `output_dir` (none yet: a fresh start, said when `announce`)."""
    from traac.trainer import STATE_FILE

    text = (value or "").strip()
    if text.lower() in _NO_RESUME:
        return None
    if text.lower() not in RESUME_LATEST:
        if not (Path(text) / "trainer_state.json").is_file():
            raise TraacError(f"resume_from_checkpoint: {text} is not a checkpoint directory "
                             "(no trainer_state.json); pass one, or auto")  # fmt: skip
        return text
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

    pattern = re.compile(rf"{PREFIX_CHECKPOINT_DIR}-(\d+)")
    folder = Path(output_dir)
    found = sorted(
        (int(m.group(1)), path)
        for path in (folder.iterdir() if folder.is_dir() else ())
        if (m := pattern.fullmatch(path.name)) and path.is_dir()
    )
    # A save cut short by a crash lacks the state files, which are written last.
    complete = [
        p for _, p in found if (p / "trainer_state.json").is_file() and (p / STATE_FILE).is_file()
    ]
    if complete:
        return str(complete[-1])
    if announce:
        print(f"traac train: no checkpoint in {output_dir} yet; starting fresh", file=sys.stderr)
    return None


def main(argv: list[str]) -> int:
    if any(a in ("-h", "--help") for a in argv):
        build_parser().print_help()
        return 0
    script, config, device_note = parse_for(argv)
    if script.dry_run:
        from traac.plan import make_plan, print_plan

        recipe = argv[argv.index("--config") + 1] if "--config" in argv else "command line"
        print_plan(make_plan(script, config, device_note), title=f"traac train plan: {recipe}")
        return 0
    return train(script, config)


def parse_for(argv: list[str]) -> tuple[TrainScriptArguments, Any, str | None]:
    """`parse`, except that a dry run on a machine without a GPU validates a GPU recipe with
    `use_cpu` set (transformers refuses bf16 without a GPU); the note says so."""
    try:
        script, config = parse(argv)
        return script, config, None
    except TraacError:
        if not _asks_dry_run(argv) or _has_gpu():
            raise
    script, config = parse([*argv, "--use_cpu", "true"])
    note = ("the recipe trains on GPUs and none is visible here: validated as on the CPU; "
            "bf16 support and the GPU count are checked at run time")  # fmt: skip
    return script, config, note


def _asks_dry_run(argv: list[str]) -> bool:
    for at, arg in enumerate(argv):
        if arg in ("--dry_run", "--dry-run"):
            after = argv[at + 1].lower() if at + 1 < len(argv) else ""
            return after not in ("false", "0", "no")
    return False


def _has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def show_progress(trainer: Any) -> None:
    """A rich bar on the main process in place of transformers' bar, which prints every step's
    log dict (the same numbers are in `metrics.jsonl`); `--disable_tqdm true` keeps the printed
    logs, for log files."""
    from transformers.trainer_callback import ProgressCallback

    from traac.progress import RichProgressCallback, make_console

    if trainer.args.disable_tqdm:
        return
    trainer.remove_callback(ProgressCallback)
    if trainer.accelerator.is_local_main_process:
        trainer.add_callback(RichProgressCallback(make_console(), "TRAAC steps"))


def train(script: TrainScriptArguments, config: Any) -> int:
    """Train; 0 when done, 128 + signal number when a signal stopped it (checkpoint saved)."""
    import torch

    from traac.data import items_to_dataset, load_items
    from traac.models import load_tokenizer, resolve_model_path
    from traac.progress import quiet_libraries
    from traac.trainer import METRICS_FILE, TRAACTrainer

    if script.num_threads is not None:
        if script.num_threads < 1:
            raise TraacError(f"num_threads: {script.num_threads} must be at least 1")
        torch.set_num_threads(script.num_threads)
    items = load_items(script.dataset)  # bad rows fail here, before any model is loaded
    resume = resume_checkpoint(config.resume_from_checkpoint, config.output_dir)
    model_path = resolve_model_path(script.model_name_or_path)
    tokenizer = load_tokenizer(model_path)
    tokenizer.padding_side = "left"
    dataset = items_to_dataset(
        items,
        prompt_suffix=script.prompt_suffix,
        conversational=bool(getattr(tokenizer, "chat_template", None)),
    )
    with quiet_libraries():  # our bar instead of the libraries' load/save/map bars
        trainer = TRAACTrainer(
            model_path, args=config, train_dataset=dataset, processing_class=tokenizer
        )
        show_progress(trainer)
        trainer.train(resume_from_checkpoint=resume)
        step = trainer.state.global_step
        if trainer.interrupted is None:
            trainer.save_model(config.output_dir)
            outcome = (
                f"traac train: {step} steps; model in {config.output_dir}, "
                f"per-step metrics in {config.output_dir}/{METRICS_FILE}"
            )
        else:
            outcome = (
                f"traac train: stopped by {signal.Signals(trainer.interrupted).name} after step "
                f"{step}; checkpoint in {config.output_dir}/checkpoint-{step}; continue with "
                "--resume_from_checkpoint auto"
            )
        if trainer.is_world_process_zero():  # one line per run, not one per process
            print(outcome, file=sys.stderr)
        return 0 if trainer.interrupted is None else 128 + trainer.interrupted
