"""`traac experiment {ablations,compare} [--config RECIPE] [--output DIR] [--runs DIR]
[--seeds N ...] [--variants NAME ...] [--held-out N] [--eval-batching refill] [--continue-from
RECIPE] [--quick]`."""

from __future__ import annotations

from pathlib import Path

from traac.commands import ArgumentParser
from traac.evaluation.inference.engines import BATCHINGS
from traac.pipelines.recipe import check_continuable, read_recipe
from traac.pipelines.variants import ABLATIONS, COMPARE, DEFAULT_SEEDS, EXPERIMENTS, check_variants


def build_parser() -> ArgumentParser:
    p = ArgumentParser(
        prog="traac experiment",
        description="Experiments on the testbed's problems, every variant trained from the "
        "recipe's model with the same recipe, steps and sampling, once per seed, and evaluated "
        "on the same held-out problems; the peers' token constants are scaled from the paper's "
        "10k-token cap to the recipe's max_completion_length. ablations: the paper's ("
        + "; ".join(ABLATIONS)
        + "). compare: TRAAC "
        "against its peers (" + "; ".join(COMPARE) + "). Report: <name>.md, <name>.json and "
        "<name>_pareto.png in --output, mean ± standard error over seeds, and the effect of "
        "each single change paired by seed. Runs are kept in "
        "--runs, shared by both experiments; reruns resume.",
    )
    p.add_argument("name", choices=list(EXPERIMENTS), help="the experiment")
    p.add_argument("--config", type=Path, default=Path("recipes/testbed.yaml"), help="recipe")
    p.add_argument("--output", type=Path, help="report directory (default outputs/NAME)")
    p.add_argument("--runs", type=Path, help="run store (default: runs/ beside --output)")
    p.add_argument(
        "--seeds", type=int, nargs="+", default=list(DEFAULT_SEEDS), help="training seeds"
    )
    p.add_argument("--variants", nargs="+", help="a subset of the experiment's (default: all)")
    p.add_argument(
        "--held-out", type=int, help="held-out problems per tier (default 100; --quick 10)"
    )
    p.add_argument(
        "--eval-batching",
        choices=BATCHINGS,
        default="padded",
        help="how the held-out evaluations decode: padded (each batch until its longest "
        "response ends; the default, as every published figure) | refill (a row refilled with "
        "the next request as its response ends, traac eval --batching refill: the same seeded "
        "streams, faster where lengths vary; its floats may differ, so it has directories of "
        "its own)",
    )
    p.add_argument(
        "--continue-from",
        type=Path,
        metavar="RECIPE",
        help="start each run from the newest checkpoint of the same run of RECIPE in --runs, "
        "a recipe alike but for fewer max_steps (under a constant learning rate after warm-up, "
        "the run trained straight through)",
    )
    p.add_argument("--quick", action="store_true", help="tiny settings: a smoke test")
    return p


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    check_variants(args.name, args.variants, args.seeds, args.held_out)
    read_recipe(args.config)  # the file and its YAML, before the training stack loads
    if args.continue_from is not None:
        check_continuable(args.config, args.continue_from)
    from traac.console import make_console, make_progress, print_table
    from traac.pipelines.experiments import ExperimentSettings, run_experiment

    settings = ExperimentSettings.make(
        args.name,
        args.output or Path("outputs") / args.name,
        args.config,
        args.quick,
        args.variants,
        args.seeds,
        args.runs,
        args.held_out,
        args.continue_from,
        args.eval_batching,
    )
    console = make_console()
    result = run_experiment(settings, make_progress(console))
    print_table(console, result.table)
    for table in result.effects_tables:
        print_table(console, table)
    console.print(f"Pareto front: {', '.join(result.pareto_front)}")
    for path in result.files:
        console.print(f"wrote {path}")
    return 0
