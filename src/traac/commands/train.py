"""`traac train --config RECIPE.yaml [--any-field value ...]`: TRAAC on TRL's GRPO.

Every field of the recipe (`traac.pipelines.train.TrainScriptArguments` and `TRAACConfig`, so every
`GRPOConfig` field) can be set in the YAML or on the command line (`--field-name` or
`--field_name`). `--dry-run` checks the recipe and prints the plan without loading weights or
needing a GPU. SIGINT/SIGTERM checkpoint at the end of the current step and exit with 128 + the
signal number (130, 143); `--resume-from-checkpoint auto` continues from the newest checkpoint.
`--help` lists traac's own fields; `--help-all` adds TRL's and transformers' (hundreds).
The recipe's file, YAML, counts and model name are checked (`traac.pipelines.recipe`) before
torch, transformers and TRL are imported.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import TYPE_CHECKING

from traac.pipelines.recipe import precheck

if TYPE_CHECKING:
    from traac.pipelines.plan import Plan


def main(argv: list[str]) -> int:
    if "--help-all" in argv:
        from traac.commands.train_help import print_full_help

        print_full_help()
        return 0
    if any(a in ("-h", "--help") for a in argv):
        from traac.commands.train_help import print_short_help

        print_short_help()
        return 0
    precheck(argv)  # before the imports below, which take seconds
    from accelerate import PartialState

    from traac.console import make_console, make_progress, print_lines
    from traac.pipelines.plan import make_plan
    from traac.pipelines.train import parse_recipe, train
    from traac.training.telemetry import METRICS_FILE

    dry_run = _asks_dry_run(argv)
    script, config, device_note = parse_recipe(argv, dry_run)
    if script.dry_run:
        recipe = argv[argv.index("--config") + 1] if "--config" in argv else "command line"
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
                "--resume_from_checkpoint auto"
            )
        print_lines(console, [outcome])
    return 0 if result.interrupted is None else 128 + result.interrupted


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
