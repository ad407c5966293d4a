"""`traac demo [--output DIR] [--quick] [--budget-sweep]`: TRAAC end to end on the CPU testbed.

The think-budget sweep is opt-in: at the testbed's budgets compression evicts nothing, so by
default the demo leaves it out; `traac eval --think-budget B [--compress-tau T]` runs one
budget on any model."""

from __future__ import annotations

from pathlib import Path

from traac.commands import ArgumentParser, check_count
from traac.pipelines.recipe import read_recipe


def build_parser() -> ArgumentParser:
    p = ArgumentParser(
        prog="traac demo",
        description="Build the testbed, evaluate it, train it with TRAAC, evaluate again, and "
        "report per tier (report.md, summary.json, plots, steps.html in --output). Rerunning "
        "into the same --output resumes.",
    )
    p.add_argument("--output", type=Path, default=Path("outputs/demo"), help="run directory")
    p.add_argument("--quick", action="store_true", help="tiny settings: a one-minute smoke test")
    p.add_argument("--config", type=Path, default=Path("recipes/testbed.yaml"), help="recipe")
    p.add_argument("--eval-n", type=int, help="held-out problems per tier (default 100)")
    p.add_argument("--num-samples", type=int, help="samples per problem (default 4)")
    p.add_argument("--max-new-tokens", type=int, help="response budget (default 256)")
    p.add_argument(
        "--budget-sweep",
        action="store_true",
        help="also sweep think budgets, truncating and compressing (on the testbed the probe "
        "evicts nothing at those budgets: docs/results.md#demo)",
    )
    return p


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    for name in ("eval_n", "num_samples", "max_new_tokens"):
        check_count(f"--{name.replace('_', '-')}", getattr(args, name))
    read_recipe(args.config)  # the file and its YAML, before the training stack loads
    from traac.console import make_console, make_progress, print_lines, print_table
    from traac.pipelines.demo import NOT_GOALS, DemoSettings, run_demo

    settings = DemoSettings.make(
        args.output,
        args.quick,
        recipe=args.config,
        eval_n=args.eval_n,
        num_samples=args.num_samples,
        max_new_tokens=args.max_new_tokens,
        budget_sweep=args.budget_sweep,
    )
    console = make_console()
    result = run_demo(settings, make_progress(console))
    for table in result.tables:
        print_table(console, table)
    print_lines(
        console,
        [
            *(f"{'met' if t.met else 'NOT met'}: {n} (measured {t.measured})"
              for n, t in result.targets.items()),
            *(f"not a goal: {n}: {why}" for n, why in NOT_GOALS.items()),
            *result.closing,
            f"total {sum(result.stage_seconds.values()):.0f} s; wrote "
            f"{args.output / 'report.md'}, {args.output / 'summary.json'}",
        ],
    )  # fmt: skip
    return 0
