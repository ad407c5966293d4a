"""`traac train --config RECIPE.yaml [--any-field value ...]`: TRAAC on TRL's GRPO.

Every field of the recipe (`traac.pipelines.train.TrainScriptArguments` and `TRAACConfig`, so every
`GRPOConfig` field) can be set in the YAML or on the command line (`--field-name` or
`--field_name`); a method's settings sit in its block (`alp: {beta: 1.0}`; `--alp.beta 1.0`).
`--dry-run` checks the recipe and prints the plan without loading weights or needing a GPU.
SIGINT/SIGTERM checkpoint at the end of the current step and exit with 128 + the signal number
(130, 143); `--resume-from-checkpoint auto` continues from the newest checkpoint.
`--help` lists traac's own fields; `--help-all` adds TRL's and transformers' (hundreds).
The recipe's file, YAML, counts and model name are checked (`traac.pipelines.recipe`) before
torch, transformers and TRL are imported.
"""

from __future__ import annotations

import argparse
import atexit
import dataclasses
import inspect
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from traac.pipelines.recipe import config_path, precheck

if TYPE_CHECKING:
    from traac.pipelines.plan import Plan


def main(argv: list[str]) -> int:
    if "--help-all" in argv:
        print_full_help()
        return 0
    if any(a in ("-h", "--help") for a in argv):
        print_short_help()
        return 0
    precheck(argv)  # before the imports below, which take seconds
    from accelerate import PartialState

    from traac.console import make_console, make_progress, print_lines
    from traac.pipelines.plan import make_plan
    from traac.pipelines.train import parse_recipe, train
    from traac.training.telemetry.metrics_file import METRICS_FILE

    dry_run = _asks_dry_run(argv)
    script, config, device_note = parse_recipe(argv, dry_run)
    if script.dry_run:
        recipe = config_path(argv) or "command line"
        print_plan(make_plan(script, config, device_note), title=f"traac train plan: {recipe}")
        return 0
    console = make_console()
    result = train(script, config, make_progress(console))
    # ZeRO-3 gathers parameters with asynchronous all-gathers, and gloo frees each on its worker
    # thread; a process exiting while that thread still holds one aborts at interpreter exit
    # (SIGABRT, "terminate called without an active exception") after a run that succeeded.
    # Every process has returned from `train` here, so they can leave together.
    PartialState().wait_for_everyone()
    if PartialState().is_main_process:  # one closing line per run, not one per process
        if result.interrupted is None:
            outcome = (
                f"traac train: {result.steps} steps; model in {result.output_dir}, "
                f"per-step metrics in {Path(result.output_dir) / METRICS_FILE}"
            )
        else:
            outcome = (
                f"traac train: stopped by {signal.Signals(result.interrupted).name} after step "
                f"{result.steps}; checkpoint in {result.checkpoint}; continue with "
                "--resume-from-checkpoint auto"
            )
        print_lines(console, [outcome])
    atexit.unregister(_leave_process_group)  # once, after the process's last run
    atexit.register(_leave_process_group)
    return 0 if result.interrupted is None else 128 + result.interrupted


def _leave_process_group() -> None:
    """Leave the process group as the process exits, before the interpreter is finalised: gloo's
    worker threads are joined here, not during finalisation, where a ZeRO-2 rank aborted as
    above once (a CI run, 2026-11-30), after a run that succeeded. NCCL asks for it too."""
    from accelerate import PartialState

    PartialState().destroy_process_group()


def _asks_dry_run(argv: list[str]) -> bool:
    for at, arg in enumerate(argv):
        if arg in ("--dry_run", "--dry-run"):
            after = argv[at + 1].lower() if at + 1 < len(argv) else ""
            return after not in ("false", "0", "no")
    return False


def print_plan(plan: Plan, title: str) -> None:
    """The plan on stdout: a table on a terminal, else one `setting  value` line each (never
    folded, so it can be grepped and diffed)."""
    from rich.table import Table as RichTable

    from traac.console import make_console, print_lines

    console = make_console(stderr=False)
    lines = [
        *(f"note: {note}" for note in plan.notes),
        "dry run: recipe valid; nothing was trained",
    ]
    if not console.is_terminal:
        width = max(len(name) for name, _ in plan.rows)
        print("\n".join([title, *(f"{n:<{width}}  {v}" for n, v in plan.rows), *lines]))
        return
    table = RichTable(title=title, show_header=False, title_justify="left")
    table.add_column("setting", style="bold", no_wrap=True)
    table.add_column("value", overflow="fold")
    for name, value in plan.rows:
        table.add_row(name, value)
    console.print(table)
    print_lines(console, lines)


# --- `--help` (traac's own fields) and `--help-all` (TRL's and transformers' too) ---

USAGE = "traac train --config RECIPE.yaml [--field-name VALUE ...] [--mode.name VALUE] [--dry-run]"
DESCRIPTION = (
    "TRAAC on TRL's GRPO. A recipe is a YAML mapping of field: value, a method's settings in its "
    "block (alp: {beta: 1.0}); every field can be given on the command line too, which wins "
    "(--field-name, --alp.beta; underscores work as dashes). SIGINT/SIGTERM save a "
    "checkpoint; --resume-from-checkpoint auto continues it."
)
# TRL's and transformers' fields a recipe sets most, named where the short help points at them.
COMMON_TRL = (
    "learning_rate", "max_steps", "per_device_train_batch_size", "num_generations",
    "gradient_accumulation_steps", "output_dir", "bf16", "use_vllm", "report_to",
)  # fmt: skip


def _option(block: str, name: str) -> str:
    """A field's option: `--field-name`, or in a method's block `--block.field-name`."""
    return "--" + (f"{block}." if block else "").replace("_", "-") + name.replace("_", "-")


def _add(group: Any, f: dataclasses.Field, block: str = "") -> None:
    default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default  # type: ignore[misc]
    text = f.metadata.get("help", "") or ""
    group.add_argument(
        _option(block, f.name),
        metavar=f.name.upper(),
        help=f"{text} (default: {default})".replace("%", "%%"),
    )


def short_parser() -> argparse.ArgumentParser:
    """The short help as a parser (used for its help text only)."""
    from trl import GRPOConfig

    from traac.compression.settings import CompressionSettings, FormatSettings
    from traac.pipelines.train import TrainScriptArguments
    from traac.training.methods.registry import METHODS, blocks
    from traac.training.methods.traac import TraacSettings
    from traac.training.planning.traac_config import TRAACConfig

    p = argparse.ArgumentParser(
        prog="traac train", usage=USAGE, description=DESCRIPTION, add_help=False,
        epilog=f"TRL's GRPOConfig and transformers' TrainingArguments fields ("
        f"{', '.join(COMMON_TRL)}, ...): `traac train --help-all` lists all "
        f"{len(dataclasses.fields(GRPOConfig))} of them.",
    )  # fmt: skip
    own = p.add_argument_group("options")
    own.add_argument("-h", "--help", action="store_true", help="this help")
    own.add_argument("--help-all", action="store_true", help="every field, TRL's included")
    own.add_argument("--config", metavar="RECIPE", help="the recipe, e.g. recipes/testbed.yaml")
    trl = {f.name for f in dataclasses.fields(GRPOConfig)}
    shared = {
        f.name for cls in (CompressionSettings, FormatSettings) for f in dataclasses.fields(cls)
    }
    script = p.add_argument_group("what to train, on which problems (TrainScriptArguments)")
    for f in dataclasses.fields(TrainScriptArguments):
        _add(script, f)
    traac = p.add_argument_group("TRAAC (TRAACConfig; docs/method.md)")
    settings = p.add_argument_group("think format and step phrases (as on traac eval, generate)")
    compressing = " and ".join(n for n, m in METHODS.items() if m.settings is TraacSettings)
    methods = p.add_argument_group(
        f"the compression settings of {compressing}: the recipe's traac block"
    )
    for f in dataclasses.fields(TraacSettings):
        _add(methods, f, TraacSettings.BLOCK)
    # The peers' settings by name only, each class once under the modes that read it (`dler,
    # dler_difficulty`): described in full by --help-all (one group per method would grow this
    # help by a screen for every method added).
    peers = [
        f"{', '.join(n for n, m in METHODS.items() if m.settings is cls)} "
        f"({', '.join(_option(cls.BLOCK, n) for n in cls.names())})"
        for cls in blocks().values()
        if cls is not TraacSettings
    ]
    p.add_argument_group(
        "the peers' settings, each in its block (`traac train --help-all` describes each; "
        "docs/peer_methods.md)",
        "; ".join(peers) + ".",
    )
    changed = p.add_argument_group("GRPO fields whose defaults follow the paper, not TRL")
    own_fields = inspect.get_annotations(TRAACConfig)
    for f in dataclasses.fields(TRAACConfig):
        if f.name == "method_args":  # a recipe writes the mode's block
            continue
        if f.name in shared:
            _add(settings, f)
        elif f.name not in trl:
            _add(traac, f)
        elif f.name in own_fields:
            _add(changed, f)
    return p


def print_short_help() -> None:
    print(short_parser().format_help())


def print_full_help() -> None:
    from traac.pipelines.train import build_parser
    from traac.training.methods.registry import blocks

    print(short_parser().format_help())
    print("all fields:")
    print(build_parser().format_help())
    own = argparse.ArgumentParser(prog="traac train", usage=USAGE, add_help=False)
    for cls in blocks().values():
        group = own.add_argument_group(f"{cls.BLOCK}: the settings of mode {cls.BLOCK}")
        for f in dataclasses.fields(cls):
            _add(group, f, cls.BLOCK)
    print(own.format_help())
