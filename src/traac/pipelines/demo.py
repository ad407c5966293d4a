"""The demo: TRAAC end to end on the CPU testbed, reported in the paper's layout.

Stages: build the testbed (cached) -> evaluate the base model on held-out problems of the three
tiers -> train it with TRAAC (`recipes/testbed.yaml`) -> evaluate the trained model on the same
problems -> tables, plots, example compressions. Every stage is resumable: rerunning the demo
into the same directory keeps what finished. The recipe is parsed before any work starts.
"""

from __future__ import annotations

import json
import logging
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from traac.common.models import load_model, load_tokenizer
from traac.common.outputs import output_dir
from traac.common.progress import NullProgress, Progress
from traac.common.tables import Table, fmt, signed
from traac.errors import TraacError
from traac.evaluation.plots import write_plots
from traac.evaluation.records import TIER_ORDER
from traac.evaluation.report import load_models
from traac.evaluation.runner import SAMPLES_FILE, SamplesFile
from traac.evaluation.viewer import render_html
from traac.method.compression import Compressor
from traac.method.difficulty import DifficultyConfig
from traac.method.formats import ChatFormat
from traac.method.scoring import AttentionScorer
from traac.method.settings import CompressionSettings
from traac.pipelines.stages import QUICK_TRAINING, HeldOut, Recipe, Stages, TierRow, tier_rows
from traac.testbed.build import ensure_testbed
from traac.training.telemetry import read_metrics

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DemoSettings:
    """What the demo runs; `quick` shrinks every stage for a smoke test (minutes -> one)."""

    output: Path
    recipe: Path = Path("recipes/testbed.yaml")
    quick: bool = False
    held_out: HeldOut = field(default_factory=HeldOut)
    train_overrides: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def make(
        cls,
        output: Path,
        quick: bool,
        recipe: Path = Path("recipes/testbed.yaml"),
        eval_n: int | None = None,
        num_samples: int | None = None,
        max_new_tokens: int | None = None,
    ) -> DemoSettings:
        held = HeldOut(10, 1, 160) if quick else HeldOut()
        held = HeldOut(
            eval_n or held.per_tier,
            num_samples or held.num_samples,
            max_new_tokens or held.max_new_tokens,
        )
        return cls(output, recipe, quick, held, dict(QUICK_TRAINING) if quick else {})

    @property
    def recipe_with_overrides(self) -> Recipe:
        if not self.recipe.is_file():
            raise TraacError(
                f"--config {self.recipe}: no such recipe (run from the repository root)"
            )
        return Recipe(self.recipe, self.train_overrides)


@dataclass(frozen=True)
class BinCompression:
    """Compression during training in one difficulty bin, means over the steps."""

    prompts: int
    compressed_frac: float | None
    steps_removed: float | None
    tokens_removed: float | None


@dataclass(frozen=True)
class Target:
    measured: str
    met: bool
    value: float | None


@dataclass
class DemoResult:
    """What the demo measured and wrote."""

    base: dict[str, TierRow]
    traac: dict[str, TierRow]
    compression: dict[str, BinCompression]
    targets: dict[str, Target]
    tables: list[Table]
    plots: list[str]
    stage_seconds: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "models": {
                "base": {k: asdict(v) for k, v in self.base.items()},
                "traac": {k: asdict(v) for k, v in self.traac.items()},
            },
            "training_compression": {k: asdict(v) for k, v in self.compression.items()},
            "targets": {k: asdict(v) for k, v in self.targets.items()},
            "plots": self.plots,
            "stage_seconds": self.stage_seconds,
            "total_seconds": sum(self.stage_seconds.values()),
        }


def run_demo(settings: DemoSettings, progress: Progress | None = None) -> DemoResult:
    """All stages; writes report.md, summary.json, plots and steps.html into the output."""
    progress = progress or NullProgress()
    recipe = settings.recipe_with_overrides
    out = settings.output
    trained = out / "train"
    recipe.parse(Path("testbed"), trained)  # a bad recipe fails now, not after the base eval
    output_dir(out)
    stages = Stages()
    with stages.stage("testbed"):
        base = ensure_testbed(quick=settings.quick, progress=progress)
        logger.info(f"testbed model: {base}")
    with stages.stage("evaluate base"):
        settings.held_out.evaluate(base, out / "eval" / "base", progress)
    with stages.stage("train TRAAC"):
        recipe.train(base, trained, progress)
    with stages.stage("evaluate TRAAC"):
        settings.held_out.evaluate(trained, out / "eval" / "traac", progress)
    with stages.stage("report"):
        result = write_report(settings, base, trained)
    result.stage_seconds = stages.seconds
    (out / "summary.json").write_text(json.dumps(result.to_json(), indent=2) + "\n")
    return result


def training_compression(metrics_path: Path) -> dict[str, BinCompression]:
    """Per difficulty bin, means over the run's steps: compressed share of the pooled group,
    steps and tokens removed per compressed rollout; and the prompts seen."""
    steps = read_metrics(metrics_path)
    if not steps:
        return {}
    out = {}
    for tier in TIER_ORDER:
        scopes = [s.scopes[tier] for s in steps if tier in s.scopes]

        def mean(name: str, scopes: list = scopes) -> float | None:
            values = [getattr(s, name) for s in scopes if getattr(s, name) is not None]
            return statistics.fmean(values) if values else None

        out[tier] = BinCompression(
            prompts=sum(s.prompts for s in scopes),
            compressed_frac=mean("compressed_frac"),
            steps_removed=mean("steps_removed"),
            tokens_removed=mean("tokens_removed"),
        )
    return out


def targets(base: dict[str, TierRow], traac: dict[str, TierRow]) -> dict[str, Target]:
    """The demo's targets, each with its measured value and whether it is met. Cuts are
    fractions of the base length (0.3 = 30% shorter)."""

    def change(tier: str) -> float:
        before = base[tier].mean_length
        return traac[tier].mean_length / before - 1.0 if before else 0.0

    acc_change = traac["overall"].accuracy - base["overall"].accuracy
    hard_change = traac["hard"].accuracy - base["hard"].accuracy
    overall_cut, easy_cut, hard_cut = -change("overall"), -change("easy"), -change("hard")
    # Easy must be cut, and by at least 1.5x what hard is cut (a hard tier that grows counts as
    # a cut of 0: the easy cut alone then decides).
    adaptive = easy_cut > 0 and easy_cut >= 1.5 * max(hard_cut, 0.0)
    ratio = easy_cut / hard_cut if hard_cut > 0 else None
    ratio_text = f", ratio {ratio:.2f}" if ratio is not None else ""
    return {
        "overall accuracy >= base - 1 point": Target(
            f"{acc_change:+.1f} points", acc_change >= -1.0, acc_change
        ),
        "hard accuracy >= base": Target(
            f"{hard_change:+.1f} points", hard_change >= 0.0, hard_change
        ),
        "overall length -30% or more": Target(
            f"{change('overall'):+.1%}", overall_cut >= 0.3, -overall_cut
        ),
        "easy length cut >= 1.5x hard cut": Target(
            f"easy {change('easy'):+.1%}, hard {change('hard'):+.1%}{ratio_text}", adaptive, ratio
        ),
    }


def comparison_table(base: dict[str, TierRow], traac: dict[str, TierRow]) -> Table:
    table = Table(
        ["tier", "base Acc", "base Len", "TRAAC Acc", "TRAAC Len", "Δ Acc (pts)", "Δ Len"],
        title="TRAAC vs base on held-out testbed problems (Acc %, Len tokens)",
    )
    for tier in (*TIER_ORDER, "overall"):
        b, t = base[tier], traac[tier]
        change = (t.mean_length / b.mean_length - 1.0) * 100 if b.mean_length else 0.0
        table.add(
            tier, fmt(b.accuracy), fmt(b.mean_length), fmt(t.accuracy), fmt(t.mean_length),
            signed(t.accuracy - b.accuracy), signed(change, suffix="%"),
        )  # fmt: skip
    return table


def compression_table(rows: dict[str, BinCompression]) -> Table:
    table = Table(
        ["difficulty bin (pass rate)", "prompts", "compressed share", "steps removed",
         "tokens removed"],
        title="Compression during training, per difficulty bin (means over steps)",
    )  # fmt: skip
    for tier, s in rows.items():
        share = None if s.compressed_frac is None else 100 * s.compressed_frac
        table.add(
            tier, str(s.prompts), fmt(share, suffix="%"), fmt(s.steps_removed, 2),
            fmt(s.tokens_removed),
        )  # fmt: skip
    return table


def write_report(settings: DemoSettings, base_model: Path, trained_model: Path) -> DemoResult:
    """report.md + plots + step viewer, and the result (per model, per tier)."""
    out = settings.output
    models = load_models([out / "eval" / "base", out / "eval" / "traac"], ["base", "TRAAC"])
    base, traac = (tier_rows(m.runs[next(iter(m.runs))].summary) for m in models)
    compression = training_compression(trained_model / "metrics.jsonl")
    goals = targets(base, traac)
    plots = [p.name for p in write_plots(models, out)]
    plots.append(compression_plot(compression, out / "compression_by_bin.png").name)
    examples = example_viewer(base_model, out / "eval" / "base", out / "steps.html")
    tables = [comparison_table(base, traac), compression_table(compression)]
    goal_lines = "\n".join(
        f"- {'met' if g.met else 'NOT met'}: {name} (measured {g.measured})"
        for name, g in goals.items()
    )
    images = "\n".join(f"![{p}]({p})" for p in plots)
    held = settings.held_out
    report = (
        f"# traac demo\n\nHeld-out testbed problems: `{held.dataset}`, "
        f"{held.num_samples} samples each, temperature 1.0, at most "
        f"{held.max_new_tokens} new tokens. Acc in %, Len = mean response tokens.\n\n"
        f"{tables[0].markdown()}\n\n## Compression during training (means over steps)\n\n"
        f"{tables[1].markdown()}\n\n## Targets\n\n{goal_lines}\n\n## Plots\n\n{images}\n\n"
        f"Example trajectories with their steps scored and pruned: [steps.html](steps.html) "
        f"({examples} traces).\n"
    )
    (out / "report.md").write_text(report)
    return DemoResult(base, traac, compression, goals, tables, plots)


def compression_plot(rows: dict[str, BinCompression], path: Path) -> Path:
    """Bars per difficulty bin: share of the group compressed and tokens removed."""
    tiers = list(rows)
    fig = Figure(figsize=(9, 3.6), layout="constrained")
    left, right = fig.subplots(1, 2)
    left.bar(tiers, [100 * (rows[t].compressed_frac or 0.0) for t in tiers], color="#4c72b0")
    left.set_ylabel("compressed share of the group (%)")
    right.bar(tiers, [rows[t].tokens_removed or 0.0 for t in tiers], color="#dd8452")
    right.set_ylabel("tokens removed per compressed rollout")
    for ax in (left, right):
        ax.set_xlabel("difficulty bin (pass rate)")
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("Compression during TRAAC training")
    fig.savefig(path, dpi=130)
    return path


def example_viewer(model_path: Path, eval_dir: Path, path: Path, per_tier: int = 2) -> int:
    """Score and prune a few of the base model's correct responses with the attention probe at
    each tier's tau, into the step viewer; returns how many traces it shows."""
    records = list(SamplesFile(eval_dir / SAMPLES_FILE).read().values())
    chosen = []
    for tier in TIER_ORDER:
        good = [r for r in records if r.difficulty == tier and r.correct and r.closed]
        chosen.extend(good[:per_tier])
    if not chosen:
        path.write_text("<p>No correct, well-formed base responses to show.</p>")
        return 0
    difficulty = DifficultyConfig()
    fmt_ = ChatFormat()
    scorer = AttentionScorer(load_model(str(model_path)), load_tokenizer(str(model_path)))
    reasonings = [fmt_.parse(r.response).reasoning for r in chosen]
    taus = [difficulty.tau_of(str(r.difficulty)) for r in chosen]
    compressor = Compressor(scorer, fmt_, CompressionSettings(uniformity_gate=1.0))
    results = compressor(reasonings, taus)
    titles = [f"{r.difficulty} · {r.id} · tau {t}" for r, t in zip(chosen, taus, strict=True)]
    path.write_text(render_html(results, titles))
    return len(results)
