"""`traac report`: the paper's tables and figures across `traac eval` directories."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from traac.commands import ArgumentParser, check_count
from traac.common.inputs import check_distinct
from traac.common.outputs import output_dir
from traac.errors import TraacError
from traac.evaluation.harness.paper_metrics import PAPER_T_MAX

DESCRIPTION = """\
Tables (drawn to the terminal's width on stdout, markdown in OUT/report.md), PNG plots (OUT)
and one self-contained page holding both with step examples (OUT/report.html) across
evaluation runs.
Each DIR is one row (a model): a `traac eval --output` directory, or a directory of them, one
subdirectory per dataset (e.g. results/base/aime, results/base/amc -> DIR results/base).
Datasets are column groups; changes are against the first DIR, and each later DIR is paired
against it on the problems both answered (95% bootstrap intervals). Per model, dataset and tier:
avg@k with its interval, pass@k, G-Pass@k, maj@k and lengths of right and wrong samples (from
samples.jsonl), and overthinking after the first correct step (from summary.json). AUC_OAA is
at --t-max; OptimalThinkingBench is scored as each run's `traac eval --otb-scoring` says.
Runs of `traac eval --think-budget B` among a model's subdirectories (e.g.
results/base/budget-64) form the budget sweep: accuracy against B, truncating against
compressing (--compress-tau)."""


def build_parser() -> ArgumentParser:
    p = ArgumentParser(
        prog="traac report",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("dirs", nargs="+", type=Path, metavar="DIR", help="evaluation directories")
    p.add_argument("--output", type=Path, help="write report.md, the plots and report.html here")
    p.add_argument(
        "--names", nargs="+", help="row names, one per DIR (default: the directory names)"
    )
    p.add_argument(
        "--t-max",
        type=int,
        help=f"t_max of AUC_OAA in think tokens (default {PAPER_T_MAX}, the paper's): a run "
        "summarised at another is recomputed from its samples.jsonl; a run counted in words "
        "keeps its own unless this is given, which refuses it",
    )
    return p


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    check_count("--t-max", args.t_max)
    # what `load_models` checks first, said the same way before the report stack is imported
    if args.names is not None and len(args.names) != len(args.dirs):
        raise TraacError(f"report: {len(args.names)} --names for {len(args.dirs)} directories")
    for directory in args.dirs:
        if not directory.is_dir():
            raise TraacError(f"report: {str(directory)!r} is not a directory")
    check_distinct("report", args.dirs, args.names)
    if args.output is not None:
        output_dir(args.output)
    from traac.console import make_console, print_blocks
    from traac.evaluation.reports.html_report import write_report
    from traac.evaluation.reports.report import load_models, report_blocks

    t_max = PAPER_T_MAX if args.t_max is None else args.t_max
    models = load_models(args.dirs, args.names, t_max, words_keep_theirs=args.t_max is None)
    for warning in filter(None, (run.stale() for m in models for run in m.runs.values())):
        print(f"traac report: warning: {warning}", file=sys.stderr)
    print_blocks(make_console(stderr=False), report_blocks(models))
    if args.output is None:
        print("(pass --output OUT to write report.md, the plots and report.html)", file=sys.stderr)
        return 0
    written = write_report(models, args.output)
    print(f"wrote into {args.output}: " + ", ".join(p.name for p in written), file=sys.stderr)
    return 0
