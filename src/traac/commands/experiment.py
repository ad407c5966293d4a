"""`traac experiment ablations [--config RECIPE] [--output DIR] [--quick]`."""

from __future__ import annotations

from pathlib import Path

from traac.commands import ArgumentParser
from traac.console import make_console, make_progress, print_table
from traac.pipelines.experiments import VARIANTS, AblationSettings, run_ablations


def build_parser() -> ArgumentParser:
    p = ArgumentParser(
        prog="traac experiment",
        description="The paper's ablations on the testbed: base, CR, CR+LR, CR+LR+compression "
        "without difficulty, TRAAC, TRAAC with random and confidence scorers; same seed and "
        "step budget; one table (ablations.md in --output). Reruns resume.",
    )
    p.add_argument("name", choices=["ablations"], help="the experiment")
    p.add_argument("--config", type=Path, default=Path("recipes/testbed.yaml"), help="recipe")
    p.add_argument("--output", type=Path, default=Path("outputs/ablations"), help="run directory")
    p.add_argument("--quick", action="store_true", help="tiny settings: a smoke test")
    p.add_argument("--variants", nargs="+", choices=list(VARIANTS), help="a subset (default: all)")
    return p


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    settings = AblationSettings.make(args.output, args.config, args.quick, args.variants)
    console = make_console()
    table = run_ablations(settings, make_progress(console))
    print_table(console, table)
    return 0
