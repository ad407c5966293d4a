"""`traac copies RUN_DIR [RUN_DIR ...] [--names NAME ...] [--every N]`: what the compressed
copies of training runs did to their groups, read from each run's `metrics.jsonl`
(docs/telemetry.md, "The compressed copies")."""

from __future__ import annotations

from pathlib import Path

from traac.commands import ArgumentParser
from traac.common.inputs import check_distinct
from traac.console import make_console, print_lines, print_table
from traac.errors import TraacError
from traac.training.telemetry.copy_stats import copies_table, pass_rate_table
from traac.training.telemetry.metrics_file import check_metrics_file

DESCRIPTION = """\
Per run: the compressed copies that lost a computation step (problems whose steps carry labels,
e.g. the testbed's), the other copies, and the originals pooled beside them: how many, the
share right, the mean advantage and rank in the group (1: the highest), and the share at rank 1;
then whether the imitation hypothesis H1 holds (compute-evicted copies right >= 80% and mean
advantage > +1); last, the originals' pass rate (the sampled rollouts' share right), for any
mode, CR+LR included. Each RUN_DIR is a `traac train` output directory (its metrics.jsonl)."""


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog="traac copies", description=DESCRIPTION)
    p.add_argument("dirs", nargs="+", type=Path, metavar="RUN_DIR", help="training run outputs")
    p.add_argument("--names", nargs="+", help="one name per RUN_DIR (default: directory names)")
    p.add_argument("--every", type=int, help="a row per this many steps (default: the whole run)")
    return p


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    names = args.names or [str(d) for d in args.dirs]
    if len(names) != len(args.dirs):
        raise TraacError(f"--names: {len(names)} names for {len(args.dirs)} run directories")
    if args.every is not None and args.every < 1:
        raise TraacError(f"--every: {args.every} steps; use 1 or more")
    check_distinct("copies", args.dirs, args.names)
    for directory in args.dirs:
        check_metrics_file(directory)
    runs = dict(zip(names, args.dirs, strict=True))
    table, verdicts = copies_table(runs, args.every)
    console = make_console(stderr=False)
    if table.rows:
        print_table(console, table)
    print_lines(console, verdicts)
    print_table(console, pass_rate_table(runs, args.every))
    return 0
