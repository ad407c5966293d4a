"""The demo: TRAAC end to end on the CPU testbed, reported in the paper's layout.

Stages: build the testbed (cached) -> train it with TRAAC (`recipes/testbed.yaml`), evaluating
the base model on held-out problems of the three tiers beside it (on a second core, where there
is one) -> evaluate the trained model on the same problems -> (with `--budget-sweep` only)
sweep think budgets over both models on a subset of those problems, interrupting the think
block the paper's way and answering from the reasoning as written (truncate) or pruned by the
probe (compress) -> tables, plots, example compressions.
The sweep is not in the default demo: at the testbed's budgets a think block holds 2-5 steps,
of which tau 0.4 evicts floor(n x 0.4 x (1 - u)) = 0, so it would print a table of zeros
(docs/results.md#demo). Every stage is resumable: rerunning the demo into the same directory
keeps what finished. The recipe is parsed before any work starts.

Layout: `eval/<model>/held-out` (the evaluation) and `eval/<model>/budget-<B>-<mode>` (the
sweep), so that `traac report eval/base eval/traac` finds both.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from traac.common.models import load_model, load_tokenizer
from traac.common.outputs import output_dir
from traac.common.progress import NullProgress, Progress
from traac.common.tables import Table, fmt, signed
from traac.compression.compression import uniformity_rank
from traac.compression.factory import build_compressor
from traac.compression.formats import ChatFormat
from traac.compression.settings import TEST_TIME_TAU, CompressionSettings
from traac.errors import TraacError
from traac.evaluation.harness.results import TIER_ORDER
from traac.evaluation.harness.runner import SAMPLES_FILE, SamplesFile
from traac.evaluation.reports.plots import write_plots
from traac.evaluation.reports.report import (
    Model,
    SweepPoint,
    budget_table,
    field_tables,
    load_models,
    paired_rows,
    sweep_points,
)
from traac.evaluation.reports.viewer import render_html
from traac.pipelines.stages import (
    QUICK_TRAINING,
    BinCompression,
    HeldOut,
    Recipe,
    Stages,
    TierRow,
    compression_table,
    evaluating_beside,
    tier_rows,
    training_compression,
)
from traac.testbed.build import ensure_testbed
from traac.training.planning.traac_config import TRAACConfig

logger = logging.getLogger(__name__)
CALIBRATION_SAMPLE = 64  # correct base responses the step viewer ranks uniformities among


MODELS = {"base": "base", "traac": "TRAAC"}  # directory under eval/ -> name in the report
HELD_OUT_RUN = "held-out"


def budget_at(fraction: float, mean_think_tokens: float) -> int:
    """The think budget at a fraction of a mean think length (at least one token)."""
    return max(1, round(fraction * mean_think_tokens))


@dataclass(frozen=True)
class BudgetSweep:
    """Think budgets at fractions of the base model's mean think length (one of them half, the
    point the demo compares at), each run truncating and compressing at `compress_tau`, on the
    first `per_tier` held-out problems of each tier: 2 models x 3 budgets x 2 modes, kept
    small so that the demo stays within its time budget."""

    fractions: tuple[float, ...] = (0.25, 0.5, 0.75)
    per_tier: int = 25
    num_samples: int = 2
    compress_tau: float = TEST_TIME_TAU

    def budgets(self, mean_think_tokens: float) -> list[int]:
        return sorted({budget_at(f, mean_think_tokens) for f in self.fractions})

    def run(
        self,
        models: dict[str, Path],
        output: Path,
        held_out: HeldOut,
        mean_think_tokens: float,
        compression: CompressionSettings,
        progress: Progress | None = None,
    ) -> list[int]:
        """Evaluate every model at every budget, both modes (compressing with `compression`),
        into `output/<model>/budget-B-<mode>` (resuming); returns the budgets."""
        subset = held_out.subset(self.per_tier, self.num_samples)
        budgets = self.budgets(mean_think_tokens)
        for name, model in models.items():
            for budget in budgets:
                for mode, tau in (("truncate", None), ("compress", self.compress_tau)):
                    subset.evaluate(
                        model, output / name / f"budget-{budget}-{mode}", progress,
                        think_budget=budget, compress_tau=tau, compression=compression,
                    )  # fmt: skip
        return budgets


@dataclass(frozen=True)
class DemoSettings:
    """What the demo runs; `quick` shrinks every stage for a smoke test (minutes -> one)."""

    output: Path
    recipe: Path = Path("recipes/testbed.yaml")
    quick: bool = False
    held_out: HeldOut = field(default_factory=HeldOut)
    train_overrides: dict[str, Any] = field(default_factory=dict)
    sweep: BudgetSweep | None = None  # `--budget-sweep`

    @classmethod
    def make(
        cls,
        output: Path,
        quick: bool,
        recipe: Path = Path("recipes/testbed.yaml"),
        eval_n: int | None = None,
        num_samples: int | None = None,
        max_new_tokens: int | None = None,
        budget_sweep: bool = False,
    ) -> DemoSettings:
        held = HeldOut(10, 1, 160, t_max=160) if quick else HeldOut()
        held = replace(
            held,
            per_tier=eval_n or held.per_tier,
            num_samples=num_samples or held.num_samples,
            max_new_tokens=max_new_tokens or held.max_new_tokens,
            batching="refill",  # 2.8x faster than padded batches on the testbed, same samples
        )
        sweep = BudgetSweep(per_tier=3, num_samples=1) if quick else BudgetSweep()
        sweep = sweep if budget_sweep else None
        return cls(output, recipe, quick, held, dict(QUICK_TRAINING) if quick else {}, sweep)

    @property
    def recipe_with_overrides(self) -> Recipe:
        if not self.recipe.is_file():
            raise TraacError(
                f"--config {self.recipe}: no such recipe (run from the repository root)"
            )
        return Recipe(self.recipe, self.train_overrides)


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
    sweep: list[SweepPoint] = field(default_factory=list)
    stage_seconds: dict[str, float] = field(default_factory=dict)
    closing: list[str] = field(default_factory=list)  # the "In short" lines

    def to_json(self) -> dict[str, Any]:
        return {
            "models": {
                "base": {k: asdict(v) for k, v in self.base.items()},
                "traac": {k: asdict(v) for k, v in self.traac.items()},
            },
            "training_compression": {k: asdict(v) for k, v in self.compression.items()},
            "budget_sweep": [asdict(p) for p in self.sweep],
            "targets": {k: asdict(v) for k, v in self.targets.items()},
            "plots": self.plots,
            "closing": self.closing,
            "stage_seconds": self.stage_seconds,
            "total_seconds": sum(self.stage_seconds.values()),
        }


def run_demo(settings: DemoSettings, progress: Progress | None = None) -> DemoResult:
    """All stages; writes report.md, summary.json, plots and steps.html into the output."""
    progress = progress or NullProgress()
    recipe = settings.recipe_with_overrides
    out = settings.output
    trained = out / "train"
    _, config = recipe.parse(Path("testbed"), trained)  # a bad recipe fails now
    output_dir(out)
    stages = Stages()
    with stages.stage("testbed"):
        base = ensure_testbed(quick=settings.quick, progress=progress)
        logger.info(f"testbed model: {base}")
    base_eval = out / "eval" / "base" / HELD_OUT_RUN
    with stages.stage("train TRAAC"), evaluating_beside(settings.held_out, base, base_eval):
        recipe.train(base, trained, progress)
    with stages.stage("evaluate base"):  # what the evaluation beside training left, if any
        summary = settings.held_out.evaluate(base, base_eval, progress)
    with stages.stage("evaluate TRAAC"):
        settings.held_out.evaluate(trained, out / "eval" / "traac" / HELD_OUT_RUN, progress)
    if settings.sweep is not None:
        with stages.stage("think budget sweep"):
            think = summary.overall.mean_think_tokens
            models = {"base": base, "traac": trained}
            model_type = json.loads((Path(base) / "config.json").read_text()).get("model_type")
            compression = config.compression_settings(model_type)  # prune as training did
            settings.sweep.run(
                models, out / "eval", settings.held_out, think, compression, progress
            )
    with stages.stage("report"):
        result = write_report(settings, base, trained)
    result.stage_seconds = stages.seconds
    (out / "summary.json").write_text(json.dumps(result.to_json(), indent=2) + "\n")
    return result


# What the project asked of TRAAC on the testbed and the 3-seed runs do not support
# (docs/results.md#compare): not the demo's goals, each said in one line instead.
NOT_GOALS = {
    "overall length -40% (the paper's cut)": "3 seeds give -33% (49.8 -> 33.3 tokens), and "
    "every length reward of the compare stops at 32-33 tokens: the computation the chains need",
    "compress beats truncate under a think budget": "a think block cut at the testbed's "
    "budgets holds 2-5 steps and tau 0.4 evicts floor(n x 0.4 x (1 - u)) = 0 of them, so both "
    "answer from the same reasoning (`--budget-sweep` runs it)",
}


def targets(base: dict[str, TierRow], traac: dict[str, TierRow]) -> dict[str, Target]:
    """The demo's goals, each what the 3-seed runs of docs/results.md#compare support (TRAAC:
    +8.5 points overall, +16.5 on hard, -33% length, easy cut 3.6x the hard cut), with its
    measured value and whether it is met. Cuts are fractions of the base length (0.3 = 30%
    shorter)."""

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
        "overall accuracy >= base + 2 points": Target(
            f"{acc_change:+.1f} points", acc_change >= 2.0, acc_change
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


def sweep_target(models: Sequence[Model], budget: int) -> Target:
    """Compressing against truncating at `budget` think tokens (half the base model's mean think
    length), per model, with the tokens the probe pruned: met where compressing is the more
    accurate for every model; the value is the first (base) model's change in points."""
    points = [p for p in sweep_points(models) if p.budget == budget]
    changes, texts = {}, []
    for model in models:
        mine = {p.mode.split()[0]: p for p in points if p.model == model.name}
        if {"truncate", "compress"} <= set(mine):
            change = mine["compress"].accuracy - mine["truncate"].accuracy
            changes[model.name] = change
            texts.append(
                f"{model.name} {change:+.1f} points ({mine['compress'].tokens_pruned or 0:.1f} "
                "reasoning tokens pruned per sample)"
            )
    met = bool(changes) and all(change > 0 for change in changes.values())
    measured = f"compress - truncate at {budget} think tokens: {', '.join(texts) or 'no runs'}"
    return Target(measured, met, changes.get(models[0].name))


def comparison_table(base: dict[str, TierRow], traac: dict[str, TierRow]) -> Table:
    table = Table(
        ["tier", "base Acc", "base Len", "TRAAC Acc", "TRAAC Len", "Δ Acc (pts)", "Δ Len"],
        title="TRAAC vs base on held-out testbed problems (Acc %, Len tokens; Δ of unrounded)",
    )
    for tier in (*TIER_ORDER, "overall"):
        b, t = base[tier], traac[tier]
        change = (t.mean_length / b.mean_length - 1.0) * 100 if b.mean_length else 0.0
        table.add(
            tier, fmt(b.accuracy), fmt(b.mean_length), fmt(t.accuracy), fmt(t.mean_length),
            signed(t.accuracy - b.accuracy), signed(change, suffix="%"),
        )  # fmt: skip
    return table


def closing_note(models: Sequence[Model]) -> list[str]:
    """TRAAC against base on the held-out problems: the paired accuracy and length changes with
    their intervals, and the think tokens written after the first correct step, per tier."""
    lines = []
    for model, against, _, c in paired_rows(models):
        lines.append(
            f"{model} against {against}, paired over {c.accuracy.items} problems: accuracy "
            f"{c.accuracy.cell(1)} points, response length {c.response_tokens.cell(1)} tokens "
            f"(95% bootstrap intervals; * where the interval excludes 0)."
        )
    runs = {m.name: next(iter(m.runs.values())).summary for m in models if m.runs}
    for tier in TIER_ORDER:
        cells = []
        for name, summary in runs.items():
            s = summary.overthinking_by_tier.get(tier)
            if s is not None and s.tokens_after is not None:
                cells.append(
                    f"{name} {s.tokens_after:.1f} tokens ({s.share_after or 0.0:.0f}% of the "
                    f"think block, {s.rechecks_after or 0.0:.2f} re-checks)"
                )
        if cells:
            lines.append(
                f"Overthinking on the {tier} tier (think tokens after the first correct step, "
                f"right responses): {'; '.join(cells)}."
            )
    return lines


def write_report(settings: DemoSettings, base_model: Path, trained_model: Path) -> DemoResult:
    """report.md + plots + step viewer, and the result (per model, per tier)."""
    out = settings.output
    models = load_models([out / "eval" / name for name in MODELS], list(MODELS.values()))
    held_out = [m.runs[next(iter(m.runs))].summary for m in models]
    base, traac = map(tier_rows, held_out)
    compression = training_compression(trained_model / "metrics.jsonl")
    goals = targets(base, traac)
    if settings.sweep is not None:
        half = budget_at(0.5, held_out[0].overall.mean_think_tokens)
        goals["compress beats truncate at half the base think length"] = sweep_target(models, half)
    plots = [p.name for p in write_plots(models, out)]
    plots.append(compression_plot(compression, out / "compression_by_bin.png").name)
    _, config = settings.recipe_with_overrides.parse(base_model, trained_model)
    probe = config.traac_settings
    examples = example_viewer(
        base_model, out / "eval" / "base" / HELD_OUT_RUN, out / "steps.html", config
    )
    sweep = budget_table(models) if settings.sweep is not None else None
    tables = [comparison_table(base, traac), compression_table(compression)]
    found = field_tables(models, "tokens")
    field_text = "\n\n".join(f"{t.caption}\n\n{t.table.markdown()}" for t in found)
    closing = closing_note(models)
    goal_lines = "\n".join(
        [f"- {'met' if g.met else 'NOT met'}: {name} (measured {g.measured})"
         for name, g in goals.items()]
        + [f"- not a goal: {name}: {why}" for name, why in NOT_GOALS.items()]
    )  # fmt: skip
    images = "\n".join(f"![{p}]({p})" for p in plots)
    held = settings.held_out
    report_head = (
        f"# traac demo\n\nHeld-out testbed problems: `{held.dataset}`, "
        f"{held.num_samples} samples each, temperature 1.0, at most "
        f"{held.max_new_tokens} new tokens; AUC_OAA at t_max = {held.t_max} tokens. Acc in %, "
        "Len = mean response tokens; each Δ is "
        "computed from the unrounded values, so it can differ by 0.1 from the difference of "
        "the rounded columns.\n\n"
    )
    if settings.sweep is not None:
        held = held.subset(settings.sweep.per_tier, settings.sweep.num_samples)
    sweep_text = (
        f"\n\n## Think budget sweep\n\nThe first {held.per_tier} problems of each tier, "
        f"{held.num_samples} sample(s) each; think blocks interrupted at the budget (auxiliary "
        "prompt and closer appended) and answered from the reasoning as written (truncate) or "
        f"after the attention probe pruned it at tau {settings.sweep.compress_tau} (compress: "
        f"the recipe's probe, layers {probe.probe_layers or 'as the preset says'}, heads "
        f"{probe.probe_heads}, gate {probe.uniformity_gate}, no calibration). "
        "Budgets are fractions of the base model's mean think length "
        f"({held_out[0].overall.mean_think_tokens:.1f} tokens); budget 'none' is the model's "
        f"run above, on all the held-out problems.\n\n{sweep.markdown()}"
        if sweep is not None
        else ""
    )
    report = (
        report_head
        + f"{tables[0].markdown()}\n\n## avg@k, pass@k, maj@k, lengths, overthinking\n\n"
        f"{field_text}\n\n## Compression during training (means over steps)\n\n"
        f"{tables[1].markdown()}{sweep_text}\n\n## Goals\n\n{goal_lines}\n\n"
        f"## Plots\n\n{images}\n\n"
        f"Example trajectories with their steps scored and pruned: [steps.html](steps.html) "
        f"({examples} traces).\n\n## In short\n\n"
        + "\n".join(f"- {line}" for line in closing)
        + "\n"
    )
    (out / "report.md").write_text(report)
    if sweep is not None:  # titled for the console (markdown leaves titles out)
        title = (
            f"Think budget sweep (Acc %, Len tokens; compress at tau {settings.sweep.compress_tau})"
        )
        tables.append(replace(sweep, title=title))
    titles = {"sampling": "avg@k (95% CI), pass@k, maj@k", "overthinking": "Overthinking",
              "paired": "Paired against base (* : the 95% interval excludes 0)"}  # fmt: skip
    tables += [replace(t.table, title=titles[t.key]) for t in found if t.key in titles]
    result = DemoResult(base, traac, compression, goals, tables, plots, sweep_points(models))
    result.closing = closing
    return result


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


def example_viewer(
    model_path: Path, eval_dir: Path, path: Path, config: TRAACConfig, per_tier: int = 2
) -> int:
    """Prune a few of the base model's correct responses the way training prunes a rollout:
    the recipe's scorer, probe layers, gate, cap and calibration, at each tier's tau, into the
    step viewer (the rule named on the page); returns how many traces it shows.

    Rank calibration ranks each trace's uniformity among the base model's correct responses, as
    training ranks it among the recent correct rollouts."""
    records = list(SamplesFile(eval_dir / SAMPLES_FILE).read().values())
    correct = [r for r in records if r.correct and r.closed]
    chosen = [r for tier in TIER_ORDER for r in [x for x in correct if x.tier == tier][:per_tier]]
    fmt_ = ChatFormat()
    model, tokenizer = load_model(str(model_path)), load_tokenizer(str(model_path))
    settings = config.compression_settings(model.config.model_type)
    ranks = config.traac_settings.ranks_uniformity
    note = rule_text(settings, ranks)
    if not chosen:
        path.write_text(render_html([], [], note=f"{note} No correct base response to show."))
        return 0
    compressor = build_compressor(settings, model, tokenizer, fmt_, seed=config.seed)
    window = correct[:CALIBRATION_SAMPLE] if ranks else []
    traces = compressor.score([fmt_.parse(r.response).reasoning for r in chosen + window])
    difficulty = config.difficulty_config()
    uniformities = [t.uniformity for t in traces[len(chosen) :]]
    results, titles = [], []
    for record, trace in zip(chosen, traces[: len(chosen)], strict=True):
        tau = difficulty.tau_of(str(record.tier))
        rank = uniformity_rank(trace.uniformity, uniformities) if uniformities else None
        results.append(compressor.compress(trace, tau, rank))
        titles.append(f"{record.tier} · {record.id} · tau {tau}")
    path.write_text(render_html(results, titles, note=note))
    return len(results)


def rule_text(settings: CompressionSettings, ranks: bool) -> str:
    """The eviction rule a recipe trains with (its compression settings and whether its
    uniformity calibration `ranks`), in one line."""
    rule = (
        f"scorer {settings.scorer}, probe layers {settings.probe_layers}, heads "
        f"{settings.probe_heads}, step scope "
        f"{settings.step_scope}; evict floor(n·e) lowest steps, e = tau·(1 − u) if u ≤ "
        f"{settings.uniformity_gate} else 0, at most {settings.eviction_cap}"
    )
    if ranks:
        rule += (
            "; u = the trace's uniformity ranked among the base model's correct responses (up "
            f"to {CALIBRATION_SAMPLE}), as training ranks it among recent correct rollouts"
        )
    return f"The training recipe's rule: {rule}."
