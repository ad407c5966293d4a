"""The report's figures (matplotlib, PNG, no display needed).

- `accuracy_vs_length.png`: each model's datasets as points, its average as a large marker;
  up and to the left is better.
- `difficulty.png`: mean length and accuracy per difficulty tier, one bar per model; the
  paper's claim is that TRAAC thinks less on easy tiers and keeps accuracy on hard ones.
- `oaa_curves.png`: OAA_t against the think budget t, one panel per dataset (for
  OptimalThinkingBench, its overthinking half); the area under each curve over t_max is AUC_OAA.
- `pareto_plot`: the experiments' figure, accuracy against length per tier, one point per
  variant with standard-error bars, the Pareto front of each panel drawn as a line.
- `equivalence_plot`: a study's figure (`traac records plot`), each contrast's seed-level
  effect with its 90% and 95% intervals beside the margin the study stated, and its verdict.
- `lengths.png`: response lengths of right and wrong samples, one pair of boxes per model, one
  panel per dataset.
- `overthinking.png` (runs whose summary holds it): think tokens after the first correct step
  and their share of the think block, per tier, one bar per model.
- `budget_sweep.png` (runs with `--think-budget`): accuracy against the think budget, per
  model, truncating against compressing, each model's accuracy without a budget dotted.

Every figure is laid out by matplotlib's constrained layout with titles that fit its width, so
no label is cut at an edge.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from traac.data.datasets import OTB_OVERTHINK
from traac.evaluation.harness.paper_metrics import oaa
from traac.evaluation.harness.results import SampleRecord
from traac.evaluation.reports.report import (
    Model,
    averages,
    datasets_of,
    pooled_tiers,
    sweep_modes,
    sweep_points,
    tiers_of,
    unit_of,
)

# Per figure file: a heading and the sentence that tells a reader what to look for.
CAPTIONS: dict[str, tuple[str, str]] = {
    "accuracy_vs_length.png": (
        "Accuracy against length",
        "Each model's datasets as points, its average as a star: up and to the left is better.",
    ),
    "difficulty.png": (
        "By difficulty tier",
        "Mean response length and accuracy per tier: a model that thinks right is short on "
        "easy tiers and keeps its accuracy on hard ones.",
    ),
    "oaa_curves.png": (
        "OAA_t curves",
        "The share of samples that are right within t think tokens, against t; AUC_OAA (in "
        "the legend) is the area under the curve over t_max. A curve that rises early belongs "
        "to a model that is right without overthinking.",
    ),
    "lengths.png": (
        "Lengths of right and wrong samples",
        "Response lengths per verdict: wrong samples that run long point to loops or late "
        "guesses, short ones to giving up early.",
    ),
    "overthinking.png": (
        "Overthinking by tier",
        "Think tokens written after the first step that already states the right answer, and "
        "their share of the think block, per tier: what TRAAC claims to remove on easy "
        "problems while keeping the reasoning of hard ones.",
    ),
    "budget_sweep.png": (
        "Think budget sweep",
        "Accuracy when think blocks are interrupted at the budget, answered from the reasoning "
        "as written (truncate) or after the attention probe pruned it (compress); dotted: "
        "the model without a budget.",
    ),
}
MARKERS = "osD^vP*X<>"
CURVE_POINTS = 200
PANEL = (4.8, 3.8)  # inches per panel of the per-dataset figures
MIN_WIDTH = 7.0  # inches: a figure's title fits even over one panel
LINESTYLES = ("--", "-", "-.", ":")


def _colors(n: int) -> list[Any]:
    cmap = colormaps["tab10"]
    return [cmap(i % 10) for i in range(n)]


def _styles(n: int) -> list[tuple[Any, str]]:
    """A colour and marker per series, every pair distinct: past tab10's ten colours the marker
    changes, so the eleventh series is not mistaken for the first."""
    return [(color, MARKERS[i // 10 % len(MARKERS)]) for i, color in enumerate(_colors(n))]


def accuracy_vs_length(models: Sequence[Model], path: Path) -> Path:
    datasets = datasets_of(models)
    fig = Figure(figsize=(8.5, 5.0), layout="constrained")
    ax = fig.subplots()
    lengths = []
    for model, color in zip(models, _colors(len(models)), strict=True):
        for k, dataset in enumerate(datasets):
            run = model.runs.get(dataset)
            if run is None:
                continue
            s = run.summary.overall
            lengths.append(s.mean_response_tokens)
            ax.scatter(
                s.mean_response_tokens,
                s.accuracy,
                color=color,
                marker=MARKERS[k % len(MARKERS)],
                s=45,
                alpha=0.8,
            )
        avg = averages(model, datasets)
        if avg:
            ax.scatter(avg[1], avg[0], color=color, marker="*", s=320, edgecolor="black", zorder=3)
            ax.annotate(
                model.name, (avg[1], avg[0]), xytext=(8, 6), textcoords="offset points", fontsize=9
            )
    # Legends: colours are models, marker shapes are datasets, the star is the average.
    handles = [
        Line2D([], [], color=c, marker="o", linestyle="", label=m.name)
        for m, c in zip(models, _colors(len(models)), strict=True)
    ]
    shapes = [
        Line2D([], [], color="gray", marker=MARKERS[k % len(MARKERS)], linestyle="", label=d)
        for k, d in enumerate(datasets)
    ]
    shapes.append(
        Line2D([], [], color="gray", marker="*", markersize=12, linestyle="", label="average")
    )
    # Outside the axes, so no point hides under them.
    first = ax.legend(
        handles=handles, title="model", loc="upper left", bbox_to_anchor=(1.02, 1), fontsize=8
    )
    ax.add_artist(first)
    ax.legend(
        handles=shapes, title="dataset", loc="lower left", bbox_to_anchor=(1.02, 0), fontsize=8
    )
    ax.set_xlabel(f"mean response length ({unit_of(models)})")
    ax.set_ylabel("accuracy (%)")
    ax.set_title("Accuracy against length (up and left is better)")
    ax.grid(alpha=0.3)
    # Room around the points and the labels beside the stars: none sits on an edge.
    ax.set_ylim(bottom=min(-5, ax.get_ylim()[0]), top=max(100, ax.get_ylim()[1]) + 5)
    ax.set_xlim(left=0, right=1.2 * max(lengths, default=1.0))
    fig.savefig(path, dpi=130)
    return path


def tier_bars(models: Sequence[Model], path: Path) -> Path | None:
    """None when no run carries difficulty tiers."""
    tiers = tiers_of(models)
    if not tiers:
        return None
    fig = Figure(figsize=(10, 4.2), layout="constrained")
    left, right = fig.subplots(1, 2)
    width = 0.8 / len(models)
    for k, (model, color) in enumerate(zip(models, _colors(len(models)), strict=True)):
        pooled = pooled_tiers(model)
        xs = [i + (k - (len(models) - 1) / 2) * width for i in range(len(tiers))]
        lengths = [pooled[t].mean_response_tokens if t in pooled else 0.0 for t in tiers]
        accs = [pooled[t].accuracy if t in pooled else 0.0 for t in tiers]
        left.bar(xs, lengths, width, color=color, label=model.name)
        right.bar(xs, accs, width, color=color, label=model.name)
    _tier_axes(left, tiers, f"mean response length ({unit_of(models)})", "Length by difficulty")
    _tier_axes(right, tiers, "accuracy (%)", "Accuracy by difficulty")
    right.set_ylim(0, 105)
    left.legend(fontsize=8)
    fig.savefig(path, dpi=130)
    return path


def _tier_axes(ax: Any, tiers: Sequence[str], label: str, title: str) -> None:
    """One panel of bars per difficulty tier: ticks, labels, title and a light grid."""
    ax.set_xticks(range(len(tiers)), tiers)
    ax.set_xlabel("difficulty tier")
    ax.set_ylabel(label)
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)


def pooled_overthinking(model: Model) -> dict[str, tuple[float, float]]:
    """Per tier, (think tokens after the first correct step, their share in %) over the model's
    runs, weighted by the right responses with a first correct step."""
    sums: dict[str, list[tuple[int, float, float]]] = {}
    for run in model.runs.values():
        for tier, s in run.summary.overthinking_by_tier.items():
            if s.found and s.tokens_after is not None:
                sums.setdefault(tier, []).append((s.found, s.tokens_after, s.share_after or 0.0))
    return {
        tier: (
            sum(n * t for n, t, _ in rows) / sum(n for n, _, _ in rows),
            sum(n * f for n, _, f in rows) / sum(n for n, _, _ in rows),
        )
        for tier, rows in sums.items()
    }


def overthinking_bars(models: Sequence[Model], path: Path) -> Path | None:
    """None when no run's summary holds overthinking per tier."""
    pooled = [pooled_overthinking(m) for m in models]
    tiers = [t for t in tiers_of(models) if any(t in p for p in pooled)]
    if not tiers:
        return None
    fig = Figure(figsize=(10, 4.2), layout="constrained")
    left, right = fig.subplots(1, 2)
    width = 0.8 / len(models)
    for k, (model, color) in enumerate(zip(models, _colors(len(models)), strict=True)):
        xs = [i + (k - (len(models) - 1) / 2) * width for i in range(len(tiers))]
        left.bar(xs, [pooled[k].get(t, (0.0, 0.0))[0] for t in tiers], width, color=color,
                 label=model.name)  # fmt: skip
        right.bar(xs, [pooled[k].get(t, (0.0, 0.0))[1] for t in tiers], width, color=color)
    _tier_axes(left, tiers, f"think {unit_of(models)} after it", "After the first correct step")
    _tier_axes(right, tiers, "share of the think block (%)", "Share of the think block")
    left.legend(fontsize=8)
    fig.savefig(path, dpi=130)
    return path


def oaa_curve(records: Sequence[SampleRecord], t_max: int) -> tuple[list[float], list[float]]:
    """OAA_t (%) at evenly spaced budgets t in [0, t_max]."""
    correct = [r.correct for r in records]
    think = [r.think_or_none for r in records]
    ts = [t_max * i / (CURVE_POINTS - 1) for i in range(CURVE_POINTS)]
    return ts, [100.0 * oaa(correct, think, t) for t in ts]


def _panels(n: int) -> tuple[Figure, list[Any]]:
    """A figure of n panels, at most 3 a row, at least `MIN_WIDTH` wide; the spare axes go."""
    cols = max(1, min(3, n))
    rows = max(1, math.ceil(n / cols))
    fig = Figure(figsize=(max(PANEL[0] * cols, MIN_WIDTH), PANEL[1] * rows), layout="constrained")
    axes = [ax for row in fig.subplots(rows, cols, squeeze=False) for ax in row]
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes[:n]


def oaa_curves(models: Sequence[Model], path: Path) -> Path:
    datasets = datasets_of(models)
    fig, axes = _panels(len(datasets))
    for ax, dataset in zip(axes, datasets, strict=True):
        for model, color in zip(models, _colors(len(models)), strict=True):
            run = model.runs.get(dataset)
            records = run.records() if run else []
            auc = run.summary.overall.auc_oaa if run else 0.0
            if run and run.summary.otb:  # OptimalThinkingBench: OAA is the overthinking half's
                records = [r for r in records if r.data_source == OTB_OVERTHINK]
                auc = run.summary.by_source[OTB_OVERTHINK].auc_oaa
            if not records:
                continue
            ts, values = oaa_curve(records, run.summary.t_max)
            label = f"{model.name} (AUC {auc:.1f}, t_max {run.summary.t_max})"
            ax.plot(ts, values, color=color, label=label)
        ax.set_title(dataset)
        ax.set_xlabel(f"think budget t ({unit_of(models)})")
        ax.set_ylabel("OAA_t (%): right within t")
        ax.set_ylim(0, 102)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    fig.suptitle("Overthinking-adjusted accuracy OAA_t (AUC_OAA: area / t_max)")
    fig.savefig(path, dpi=130)
    return path


def length_distributions(models: Sequence[Model], path: Path) -> Path:
    """Boxes of response lengths, right (green) and wrong (red) samples side by side per model."""
    datasets = datasets_of(models)
    fig, axes = _panels(len(datasets))
    right, wrong = "#55a868", "#c44e52"
    for ax, dataset in zip(axes, datasets, strict=True):
        names = []
        for k, model in enumerate(m for m in models if dataset in m.runs):
            records = model.runs[dataset].records()
            names.append(model.name)
            for offset, color, verdict in ((-0.2, right, True), (0.2, wrong, False)):
                lengths = [r.response_tokens for r in records if r.correct == verdict]
                if lengths:
                    box = ax.boxplot(
                        [lengths], positions=[k + offset], widths=0.35, patch_artist=True,
                        showfliers=False, medianprops={"color": "black"},
                    )  # fmt: skip
                    box["boxes"][0].set_facecolor(color)
        ax.set_xticks(range(len(names)), names)
        ax.set_xlim(-0.6, len(names) - 0.4)
        ax.set_title(dataset)
        ax.set_ylabel(f"response length ({unit_of(models)})")
        ax.grid(axis="y", alpha=0.3)
    handles = [
        Line2D([], [], color=c, marker="s", linestyle="", markersize=9, label=label)
        for c, label in ((right, "right"), (wrong, "wrong"))
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=2, fontsize=8)
    fig.suptitle("Response lengths of right and wrong samples (boxes: quartiles, whiskers 1.5 IQR)")
    fig.savefig(path, dpi=130)
    return path


def budget_sweep(models: Sequence[Model], path: Path) -> Path | None:
    """Accuracy against think budget, one panel per swept dataset; None without budget runs."""
    points = sweep_points(models)
    budgeted = [p for p in points if p.budget is not None]
    if not budgeted:
        return None
    datasets = list(dict.fromkeys(p.dataset for p in budgeted))
    modes = sweep_modes(points)
    colors = dict(zip([m.name for m in models], _colors(len(models)), strict=True))
    fig, axes = _panels(len(datasets))
    for ax, dataset in zip(axes, datasets, strict=True):
        for model in models:
            mine = [p for p in points if p.model == model.name and p.dataset == dataset]
            for k, mode in enumerate(modes):
                line = sorted(
                    (p.budget, p.accuracy) for p in mine if p.mode == mode and p.budget is not None
                )
                if line:
                    ax.plot(
                        *zip(*line, strict=True), color=colors[model.name],
                        linestyle=LINESTYLES[k % len(LINESTYLES)], marker=MARKERS[k % len(MARKERS)],
                    )  # fmt: skip
            for p in mine:
                if p.budget is None:
                    ax.axhline(p.accuracy, color=colors[model.name], linestyle=":", alpha=0.8)
        ax.set_title(dataset)
        ax.set_xlabel(f"think budget ({unit_of(models)})")
        ax.set_ylabel("accuracy (%)")
        ax.set_ylim(-3, 103)  # points at 0 or 100 % stay whole
        ax.set_xlim(0, 1.1 * max(p.budget for p in budgeted if p.dataset == dataset))
        ax.grid(alpha=0.3)
    handles = [Line2D([], [], color=c, label=name) for name, c in colors.items()]
    handles += [
        Line2D([], [], color="gray", linestyle=LINESTYLES[k % len(LINESTYLES)],
               marker=MARKERS[k % len(MARKERS)], label=mode)
        for k, mode in enumerate(modes)
    ]  # fmt: skip
    handles.append(Line2D([], [], color="gray", linestyle=":", label="no budget"))
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), fontsize=8)
    fig.suptitle("Accuracy against think budget: truncate vs compress")
    fig.savefig(path, dpi=130)
    return path


def write_plots(models: Sequence[Model], output: Path) -> list[Path]:
    """All figures that the runs have data for; returns the files written."""
    written = [
        accuracy_vs_length(models, output / "accuracy_vs_length.png"),
        tier_bars(models, output / "difficulty.png"),
        oaa_curves(models, output / "oaa_curves.png"),
        length_distributions(models, output / "lengths.png"),
        overthinking_bars(models, output / "overthinking.png"),
        budget_sweep(models, output / "budget_sweep.png"),
    ]
    return [p for p in written if p is not None]


# A variant's point in one panel: (length, length s.e., accuracy, accuracy s.e.); s.e. may be
# None (one seed).
Point = tuple[float, float | None, float, float | None]


def pareto_plot(variants: Mapping[str, Mapping[str, Point]], path: Path, title: str) -> Path:
    """One panel per tier (the keys of each variant's mapping, in order); up and left is better.
    The dashed line joins the panel's Pareto front (no other variant as accurate and shorter)."""
    panels = list(next(iter(variants.values())))
    fig = Figure(figsize=(4.2 * len(panels) + 2.6, 4.2), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    styles = _styles(len(variants))
    for ax, panel in zip(axes, panels, strict=True):
        points = {name: tiers[panel] for name, tiers in variants.items()}
        for (name, (x, xerr, y, yerr)), (color, marker) in zip(points.items(), styles, strict=True):
            ax.errorbar(x, y, xerr=xerr, yerr=yerr, fmt=marker, color=color, capsize=3,
                        markersize=6, label=name)  # fmt: skip
        front = sorted(
            (x, y)
            for x, _, y, _ in points.values()
            if not any(
                (y2 >= y and x2 <= x) and (y2, x2) != (y, x) for x2, _, y2, _ in points.values()
            )
        )
        ax.plot([x for x, _ in front], [y for _, y in front], "--", color="gray", lw=1, zorder=0)
        ax.set_title(panel)
        ax.set_xlabel("mean response length (tokens)")
        ax.set_ylabel("accuracy (%)")
        ax.grid(alpha=0.3)
    axes[-1].legend(loc="upper left", bbox_to_anchor=(1.02, 1), fontsize=8)
    fig.suptitle(title)
    fig.savefig(path, dpi=130)
    return path


@dataclass(frozen=True)
class ContrastBar:
    """One contrast for `equivalence_plot`: its seed-level mean effect, 90% and 95% intervals,
    and the words its bounds allow (empty where a panel tests none)."""

    label: str
    mean: float
    ninety: tuple[float, float]
    ninety_five: tuple[float, float]
    verdict: str = ""


def equivalence_plot(
    panels: Mapping[str, Sequence[ContrastBar]], margin: float | None, path: Path, title: str
) -> Path:
    """A study's contrasts as a forest: one row each, thick its 90% interval (the one the
    equivalence test reads), thin its 95% (the one that earns a `*`), 0 dashed. The first panel
    carries the study's margin, shaded, and each contrast's verdict, so a reader sees an
    interval that crosses 0 inside the margin as *equivalent* and one that reaches past it as
    *not resolved*, not both as "no effect". The panels share the rows, in the same order."""
    rows = len(next(iter(panels.values())))
    fig = Figure(figsize=(4.6 * len(panels) + 3.2, 0.55 * rows + 1.6), layout="constrained")
    axes = fig.subplots(1, len(panels), sharey=True, squeeze=False)[0]
    for k, (ax, (name, bars)) in enumerate(zip(axes, panels.items(), strict=True)):
        ys = range(len(bars))[::-1]  # the first contrast on top
        if k == 0 and margin is not None:
            ax.axvspan(-margin, margin, color="tab:green", alpha=0.12)
            name = f"{name}; shaded: ±{margin:g}, the study's margin"
        ax.axvline(0, color="gray", ls="--", lw=1)
        for y, bar in zip(ys, bars, strict=True):
            ax.plot(bar.ninety_five, (y, y), color="black", lw=1)
            ax.plot(bar.ninety, (y, y), color="tab:blue", lw=4, solid_capstyle="butt")
            ax.plot(bar.mean, y, "o", color="black", markersize=4)
        ax.set_title(name, fontsize=10)
        ax.grid(axis="x", alpha=0.3)
        ax.margins(x=0.05)  # the margin's edges inside the frame
    first = next(iter(panels.values()))
    labels = [f"{bar.label}\n{bar.verdict}" if bar.verdict else bar.label for bar in first]
    axes[0].set_yticks(list(range(rows))[::-1], labels, fontsize=8)
    fig.suptitle(f"{title}\nthick: 90% seed-level interval; thin: 95%; dot: the mean", fontsize=10)
    fig.savefig(path, dpi=130)
    return path
