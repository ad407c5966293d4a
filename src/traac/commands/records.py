"""`traac records show STUDY [--markdown] [--tables NAME ...]`, `traac records plot STUDY
--output FILE.png`, `traac records keep STUDY --runs STORE [--seeds N ...] [--variants NAME ...]
[--held-out N] [--eval-batching refill]` and `traac records verify STUDY [--pages PAGE ...]`: the
kept run records behind a results table (`traac.pipelines.records`)."""

from __future__ import annotations

import sys
from pathlib import Path

from traac.commands import ArgumentParser
from traac.errors import TraacError
from traac.evaluation.inference.engines import BATCHINGS
from traac.pipelines.variants import DEFAULT_SEEDS, check_variants

DESCRIPTION = """\
A study directory (records/<study>) keeps, per run of a `traac experiment compare`, its
held-out samples, its training metrics and its provenance (commit, CPU, command), beside the
recipe every run trained from (STUDY/recipe.yaml; where a change of traac's spelling migrated it,
STUDY/recipe.as-run.yaml keeps the bytes the runs trained from). `keep` copies the finished runs
of a run store in; `show` recomputes the study's tables from the kept samples alone: per variant,
accuracy and length per tier, AUC_OAA (t_max = the held-out response cap) and underthinking,
mean ± s.e. over seeds; per contrast, each seed's paired effect and a seed-level 95% t-interval
(docs/evaluation.md#seed-level), and what the seeds resolve: the 90% interval, the p of no
effect adjusted by Holm across the contrasts, the mean with each seed left out, the minimum
detectable effect at 80% power, the equivalence test (TOST) at the margin the study states in
STUDY/study.yaml (`margin: 3`; none without it) and a verdict word from those numbers; the
problem bootstrap with the trained models held fixed, labelled within-model; from the kept
training metrics, what the probe and the re-answers cost a step beside the rollouts' decoding,
and how much the copies were cut (the share of right rollouts compressed, the steps and tokens
a copy lost). `plot` draws the contrasts: each seed-level effect on accuracy and length with its
90% and 95% intervals, the stated margin shaded and each verdict beside its contrast.
`verify` recomputes each kept run's key from the recipe and its recorded overrides, checks each
kept file's lines and sha256, each run's samples and that a migrated recipe.yaml holds
recipe.as-run.yaml's values, and checks that every `<!-- records: STUDY -->` block and every
figure between `<!-- cites: STUDY -->` and `<!-- /cites -->` of the pages (the repository's
README.md and docs/results.md) is what `show` prints; it exits 2 with one line per problem."""

# `show`'s, in its order
TABLES = ("variants", "effects", "bounds", "within-model", "compute", "copies")
PLOT_FORMATS = (".png", ".svg", ".pdf")


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog="traac records", description=DESCRIPTION)
    sub = p.add_subparsers(dest="action", required=True, metavar="{show,plot,keep,verify}")
    show = sub.add_parser("show", help="the study's tables, from its kept records")
    show.add_argument("study", type=Path, help="a study directory (records/<study>)")
    show.add_argument("--markdown", action="store_true", help="markdown tables (for the docs)")
    show.add_argument("--tables", nargs="+", choices=TABLES, default=list(TABLES), metavar="NAME",
                      help=f"which tables, of {', '.join(TABLES)} (default: all)")  # fmt: skip
    plot = sub.add_parser("plot", help="the study's contrasts as a figure, from its kept records")
    plot.add_argument("study", type=Path, help="a study directory (records/<study>)")
    plot.add_argument("--output", type=Path, required=True,
                      help=f"the figure's file ({', '.join(PLOT_FORMATS)})")  # fmt: skip
    keep = sub.add_parser("keep", help="copy the finished runs of a run store into the study")
    keep.add_argument("study", type=Path, help="a study directory holding recipe.yaml")
    keep.add_argument("--runs", type=Path, required=True, help="the run store the runs are in")
    keep.add_argument("--seeds", type=int, nargs="+", default=list(DEFAULT_SEEDS))
    keep.add_argument("--variants", nargs="+", help="compare's variants (default: all)")
    keep.add_argument(
        "--held-out",
        type=int,
        help="held-out problems per tier (default 100, experiment compare's)",
    )
    keep.add_argument(
        "--eval-batching",
        choices=BATCHINGS,
        default="padded",
        help="how the runs' evaluations decoded (experiment compare --eval-batching)",
    )
    verify = sub.add_parser("verify", help="check the records and the figures the docs cite")
    verify.add_argument("study", type=Path, help="a study directory (records/<study>)")
    verify.add_argument("--pages", type=Path, nargs="+", help="the pages whose blocks and cited "
                        "figures to check (default: README.md and docs/results.md of the "
                        "repository the study is in)")  # fmt: skip
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
    if args.action == "plot":
        if args.output.suffix not in PLOT_FORMATS:
            raise TraacError(f"--output: {args.output} is not a {', '.join(PLOT_FORMATS)} file; "
                             "name the figure FILE.png")  # fmt: skip
        from traac.common.outputs import output_dir
        from traac.pipelines.study_figure import study_plot

        output_dir(args.output.parent)
        print(study_plot(args.study, args.output))
        return 0
    if args.action == "verify":
        root = args.study.resolve().parent.parent
        pages = args.pages or [p for p in (root / "README.md", root / "docs" / "results.md")
                               if p.is_file()]  # fmt: skip
        missing = [str(p) for p in pages if not p.is_file()]
        if missing:
            raise TraacError(f"--pages: {', '.join(missing)} not found; give existing pages")
        from traac.pipelines.records import verify

        problems, summary = verify(args.study, pages)
        for problem in problems:
            print(problem, file=sys.stderr)
        if problems:
            return 2
        print(summary)
        return 0
    from traac.console import make_console, print_table

    console = make_console(stderr=False)
    if args.action == "keep":
        from traac.pipelines.experiments import ExperimentSettings
        from traac.pipelines.records import keep, nothing_kept

        settings = ExperimentSettings.make(
            "compare", args.study / "report", recipe, False, args.variants, args.seeds,
            args.runs, args.held_out, eval_batching=args.eval_batching,
        )  # fmt: skip
        kept = keep(settings, args.study)
        if not kept:
            raise TraacError(f"records keep: kept nothing: {nothing_kept(settings)}")
        console.print(f"kept {len(kept)} run(s): {'; '.join(kept)}")
        return 0
    from traac.pipelines.records import shown_markdown, shown_tables

    shown = shown_tables(args.study)
    if not shown:
        print("No run is kept yet.")
        return 0
    if args.markdown:
        print(shown_markdown(shown, args.tables))
        return 0
    for name, (_, table) in shown.items():
        if name in args.tables:
            print_table(console, table)
    console.print(f"{shown['variants'][0]} Intervals over seeds (Student's t).")
    return 0
