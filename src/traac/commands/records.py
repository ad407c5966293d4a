"""`traac records show STUDY [--markdown]` and `traac records keep STUDY --runs STORE [--seeds N
...] [--variants NAME ...] [--held-out N]`: the kept run records behind a results table
(`traac.pipelines.records`)."""

from __future__ import annotations

from pathlib import Path

from traac.commands import ArgumentParser
from traac.errors import TraacError
from traac.pipelines.variants import COMPARE, DEFAULT_SEEDS, check_variants

DESCRIPTION = """\
A study directory (records/<study>) keeps, per run of a `traac experiment compare`, its
held-out samples, its training metrics and its provenance (commit, CPU, command), beside the
recipe every run trained from (STUDY/recipe.yaml). `keep` copies the finished runs of a run
store in; `show` recomputes the study's tables from the kept samples alone: per variant,
accuracy and length per tier, AUC_OAA (t_max = the held-out response cap) and underthinking,
mean ± s.e. over seeds; per contrast, each seed's paired effect and a seed-level 95% t-interval
(docs/evaluation.md#seed-level); from the kept training metrics, what the probe and the
re-answers cost a step beside the rollouts' decoding."""


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog="traac records", description=DESCRIPTION)
    sub = p.add_subparsers(dest="action", required=True, metavar="{show,keep}")
    show = sub.add_parser("show", help="the study's tables, from its kept records")
    show.add_argument("study", type=Path, help="a study directory (records/<study>)")
    show.add_argument("--markdown", action="store_true", help="markdown tables (for the docs)")
    keep = sub.add_parser("keep", help="copy the finished runs of a run store into the study")
    keep.add_argument("study", type=Path, help="a study directory holding recipe.yaml")
    keep.add_argument("--runs", type=Path, required=True, help="the run store the runs are in")
    keep.add_argument("--seeds", type=int, nargs="+", default=list(DEFAULT_SEEDS))
    keep.add_argument("--variants", nargs="+", help="compare's variants (default: all)")
    keep.add_argument("--held-out", type=int, default=40, help="held-out problems per tier")
    return p


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    recipe = args.study / "recipe.yaml"
    if not recipe.is_file() and args.action == "keep":
        raise TraacError(
            f"records: {args.study} holds no recipe.yaml; a study starts as a directory holding "
            f"the recipe its runs trained from: mkdir -p {args.study} && cp RECIPE {recipe}"
        )
    if not recipe.is_file():
        raise TraacError(f"records: {args.study} holds no recipe.yaml; give records/<study>")
    if args.action == "keep":
        check_variants("compare", args.variants, args.seeds, args.held_out)
        if not args.runs.is_dir():
            raise TraacError(f"--runs: {args.runs} is not a directory; give the run store")
    from traac.console import make_console, print_table

    console = make_console(stderr=False)
    if args.action == "keep":
        from traac.pipelines.experiments import ExperimentSettings
        from traac.pipelines.records import keep, nothing_kept

        settings = ExperimentSettings.make(
            "compare", args.study / "report", recipe, False, args.variants, args.seeds,
            args.runs, args.held_out,
        )  # fmt: skip
        kept = keep(settings, args.study)
        if not kept:
            raise TraacError(f"records keep: kept nothing: {nothing_kept(settings)}")
        console.print(f"kept {len(kept)} run(s): {'; '.join(kept)}")
        return 0
    from traac.pipelines.experiment_results import effects_table_of
    from traac.pipelines.records import compute_table, load, study_tables

    base, runs = load(args.study)
    if not runs:
        print("No run is kept yet.")
        return 0
    tables = study_tables(base, runs, f"{args.study.name} (kept records)", order=list(COMPARE))
    effects = [effects_table_of(tables.effects)] if tables.effects else []
    compute = compute_table(runs, order=list(COMPARE))
    extra = [*effects, compute] if compute.rows else effects
    if args.markdown:
        print(f"AUC_OAA at t_max {tables.t_max}.\n\n{tables.table.markdown()}\n")
        for table in extra:
            print(f"{table.title}.\n\n{table.markdown()}\n")
        return 0
    print_table(console, tables.table)
    for table in extra:
        print_table(console, table)
    console.print(f"AUC_OAA at t_max {tables.t_max}; intervals over seeds (Student's t, 95%).")
    return 0
