"""`traac report`: evaluation directories -> the paper's tables (and the data for the plots).

Models are rows and datasets column groups (Acc % / mean length), with the average over the
datasets; a second table gives each model's change against the first one (accuracy in points,
length in percent, as the paper states its gains). Runs that hold both OptimalThinkingBench
halves add the OTB table (AUC_OAA, UnderthinkingBench accuracy, F1). Every run adds, per tier,
the numbers of `evaluation.metrics` (avg@k with its interval, pass@k, maj@k, lengths of right
and wrong samples; from samples.jsonl) and of `evaluation.overthinking` (from summary.json);
each model after the first adds its paired comparison against it (`evaluation.paired`).

Runs made with `traac eval --think-budget B` are found by their run.json settings, wherever
they sit among a model's run directories (e.g. runs/base/budget-64-truncate), and form the
budget sweep: accuracy against B, truncating (no `--compress-tau`) against compressing (with
it), beside the model's run without a budget on the same dataset.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from traac.common.tables import Table, fmt, signed
from traac.errors import TraacError
from traac.evaluation.harness.metrics import (
    SamplingStats,
    length_table,
    sampling_stats,
    sampling_table,
)
from traac.evaluation.harness.overthinking import OverthinkStats, overthinking_table
from traac.evaluation.harness.paired import MARK, Comparison, compare, paired_table
from traac.evaluation.harness.paper_metrics import GroupStats
from traac.evaluation.harness.results import (
    MAJ_RULE,
    TIER_ORDER,
    field_samples,
    tiers_in,
)
from traac.evaluation.reports.runs import Model, Run
from traac.evaluation.reports.runs import load_models as load_models  # where callers find it


def unit_of(models: Sequence[Model]) -> str:
    """'tokens', or 'words' when every run counted whitespace words (no tokenizer)."""
    units = {r.summary.length_unit for m in models for r in m.runs.values()}
    return "words" if units and all(u.startswith("whitespace") for u in units) else "tokens"


def datasets_of(models: Sequence[Model]) -> list[str]:
    """Column order: datasets in order of first appearance."""
    order: list[str] = []
    for model in models:
        order += [d for d in model.runs if d not in order]
    return order


def _length(tokens: float) -> str:
    """Lengths as the paper prints them: thousands as '9.2k', small counts as integers."""
    return f"{tokens / 1000:.1f}k" if tokens >= 1000 else f"{tokens:.0f}"


def averages(model: Model, datasets: Sequence[str]) -> tuple[float, float] | None:
    """(mean accuracy, mean length) over the datasets the model has; None if it has none."""
    runs = [model.runs[d].summary.overall for d in datasets if d in model.runs]
    if not runs:
        return None
    return (
        sum(s.accuracy for s in runs) / len(runs),
        sum(s.mean_response_tokens for s in runs) / len(runs),
    )


def main_table(models: Sequence[Model]) -> Table:
    """Acc / Len per dataset and the average; a model lacking a dataset shows '-' there and
    averages over the datasets it has (marked *)."""
    datasets = datasets_of(models)
    columns = [c for d in datasets for c in (f"{d} Acc", f"{d} Len")]
    table = Table(["Model", *columns, "Avg Acc", "Avg Len"])
    for model in models:
        cells = []
        for d in datasets:
            s = model.runs[d].summary.overall if d in model.runs else None
            cells += [fmt(s.accuracy, 2), _length(s.mean_response_tokens)] if s else ["-", "-"]
        avg = averages(model, datasets)
        mark = "*" if len(model.runs) < len(datasets) else ""
        cells += [f"{avg[0]:.2f}{mark}", _length(avg[1]) + mark] if avg else ["-", "-"]
        table.add(model.name, *cells)
    return table


def change_table(models: Sequence[Model]) -> Table:
    """Each model against the first: accuracy in points, length in percent."""
    datasets = datasets_of(models)
    base = models[0]
    columns = [c for d in datasets for c in (f"{d} dAcc", f"{d} dLen")]
    table = Table(["Model", *columns, "Avg dAcc", "Avg dLen"])
    for model in models[1:]:
        cells = []
        for d in datasets:
            if d in model.runs and d in base.runs:
                a, b = model.runs[d].summary.overall, base.runs[d].summary.overall
                cells += [
                    _points(a.accuracy - b.accuracy),
                    _percent(a.mean_response_tokens, b.mean_response_tokens),
                ]
            else:
                cells += ["-", "-"]
        shared = [d for d in datasets if d in model.runs and d in base.runs]
        mine, theirs = averages(model, shared), averages(base, shared)
        if mine and theirs:
            cells += [_points(mine[0] - theirs[0]), _percent(mine[1], theirs[1])]
        else:
            cells += ["-", "-"]
        table.add(model.name, *cells)
    return table


def _points(delta: float) -> str:
    return f"{delta:+.2f}"


def _percent(value: float, base: float) -> str:
    return f"{100.0 * (value - base) / base:+.1f}%" if base else "-"


def otb_table(models: Sequence[Model]) -> Table | None:
    """OverthinkingBench / UnderthinkingBench / F1 for runs that hold both halves."""
    table = Table(
        ["Model", "Dataset", "Footing", "Overthink Acc", "Overthink Len", "O", "Underthink Acc",
         "Underthink Len", "U", "F1"],
        left=frozenset({0, 1, 2}),
    )  # fmt: skip
    for model in models:
        for dataset, run in model.runs.items():
            otb = run.summary.otb
            if not otb:
                continue
            src = run.summary.by_source
            over, under = src["otb-overthink"], src["otb-underthink"]
            table.add(
                model.name, dataset, otb.footing, fmt(over.accuracy, 2),
                _length(over.mean_response_tokens), fmt(otb.overthink, 2),
                fmt(under.accuracy, 2), _length(under.mean_response_tokens),
                fmt(otb.underthink, 2), fmt(otb.f1, 2),
            )  # fmt: skip
    return table if table.rows else None


OTB_CAPTION = (
    "OptimalThinkingBench: O and U on each run's footing: paper (O = AUC_OAA at t_max = "
    "{t_max} {unit} over responses, U = accuracy) or official (the official code's: per question "
    "mean(correct) x max(0, 1000 - mean think tokens) / 1000, U with reasoning-gym's partial "
    "credit), with the official math rows (the leaderboard's footing) or without them; "
    "F1 = 2OU / (O + U):"
)


def t_max_of(models: Sequence[Model]) -> str:
    """The t_max the runs' AUC_OAA are at (several, comma-separated, where they differ)."""
    found = sorted({r.summary.t_max for m in models for r in m.runs.values()})
    return ", ".join(map(str, found))


def tier_table(models: Sequence[Model]) -> Table | None:
    """Accuracy and length per difficulty tier, pooled over each model's runs."""
    tiers = tiers_of(models)
    if not tiers:
        return None
    table = Table(["Model", *[c for t in tiers for c in (f"{t} Acc", f"{t} Len")]])
    for model in models:
        pooled = pooled_tiers(model)
        cells = []
        for t in tiers:
            s = pooled.get(t)
            cells += [fmt(s.accuracy, 2), _length(s.mean_response_tokens)] if s else ["-", "-"]
        table.add(model.name, *cells)
    return table


def tiers_of(models: Sequence[Model]) -> list[str]:
    seen: set[str] = set()
    for model in models:
        for run in model.runs.values():
            seen.update(run.summary.by_tier)
    return sorted(seen, key=lambda t: (TIER_ORDER.index(t) if t in TIER_ORDER else 9, t))


@dataclass(frozen=True)
class TierStats:
    """A tier pooled over a model's runs (weighted by samples)."""

    accuracy: float
    mean_response_tokens: float


def pooled_tiers(model: Model) -> dict[str, TierStats]:
    """Per tier, accuracy and mean length over all of a model's runs (weighted by samples)."""
    sums: dict[str, list[GroupStats]] = {}
    for run in model.runs.values():
        for tier, s in run.summary.by_tier.items():
            sums.setdefault(tier, []).append(s)
    out = {}
    for tier, groups in sums.items():
        n = sum(g.n_samples for g in groups)
        out[tier] = TierStats(
            accuracy=sum(g.accuracy * g.n_samples for g in groups) / n,
            mean_response_tokens=sum(g.mean_response_tokens * g.n_samples for g in groups) / n,
        )
    return out


@dataclass(frozen=True)
class SweepPoint:
    """A model on a dataset at a think budget (None: its run without one), in one mode."""

    model: str
    dataset: str
    budget: int | None
    mode: str  # "truncate" or "compress <tau>"
    accuracy: float
    mean_response_tokens: float
    interrupted_rate: float | None  # % of think blocks the budget closed
    tokens_pruned: float | None  # reasoning tokens the probe removed per sample (compress)


def mode_label(run: Run) -> str:
    return run.mode if run.compress_tau is None else f"compress {run.compress_tau:g}"


def sweep_points(models: Sequence[Model]) -> list[SweepPoint]:
    """Every think-budget run, and each model's run without a budget on the swept datasets."""
    points = []
    for model in models:
        runs = list(model.budget_runs)
        runs += [model.runs[d] for d in {r.dataset for r in runs} if d in model.runs]
        for run in runs:
            s = run.summary.overall
            point = SweepPoint(
                model.name, run.dataset, run.think_budget, mode_label(run), s.accuracy,
                s.mean_response_tokens, run.summary.interrupted_rate, _tokens_pruned(run),
            )  # fmt: skip
            points.append(point)
    return points


def _tokens_pruned(run: Run) -> float | None:
    """Mean reasoning tokens test-time compression removed per sample; None without it."""
    if run.compress_tau is None:
        return None
    records = run.records()
    saved = [r.extra.get("ttc_tokens_saved", 0) for r in records]
    return statistics.fmean(saved) if saved else None


def sweep_modes(points: Sequence[SweepPoint]) -> list[str]:
    """Modes in column order: truncate first, then each compression tau."""
    return sorted({p.mode for p in points}, key=lambda m: (m != "truncate", m))


def budget_table(models: Sequence[Model]) -> Table | None:
    """Accuracy against think budget per model and dataset, one column per mode, the change
    compressing brings over truncating, the share of think blocks interrupted, and the tokens
    the probe pruned (a compress column equal to truncate's may simply have pruned nothing)."""
    points = sweep_points(models)
    if not points:
        return None
    modes = sweep_modes(points)
    compress = [m for m in modes if m != "truncate"]
    deltas = compress if "truncate" in modes else []
    table = Table(
        ["Model", "Dataset", "Think budget", "interrupted (%)",
         *[f"{m} Acc" for m in modes], *[f"Δ Acc {m} (pts)" for m in deltas],
         *[f"{m} Len" for m in modes], *[f"{m} pruned" for m in compress]],
        left=frozenset({0, 1}),
    )  # fmt: skip
    rows: dict[tuple[str, str, int | None], dict[str, SweepPoint]] = {}
    for point in points:
        rows.setdefault((point.model, point.dataset, point.budget), {})[point.mode] = point
    order = [m.name for m in models]
    for key in sorted(rows, key=lambda k: (order.index(k[0]), k[1], k[2] is None, k[2] or 0)):
        model, dataset, budget = key
        at = rows[key]
        rates = [p.interrupted_rate for p in at.values() if p.interrupted_rate is not None]
        accs = [fmt(at[m].accuracy, 2) if m in at else "-" for m in modes]
        changes = [
            signed(at[m].accuracy - at["truncate"].accuracy, 2)
            if m in at and "truncate" in at
            else "-"
            for m in deltas
        ]
        lengths = [_length(at[m].mean_response_tokens) if m in at else "-" for m in modes]
        pruned = [fmt(at[m].tokens_pruned) if m in at else "-" for m in compress]
        table.add(
            model, dataset, "none" if budget is None else str(budget),
            fmt(rates[0]) if rates else "-", *accs, *changes, *lengths, *pruned,
        )  # fmt: skip
    return table


def run_label(model: Model, dataset: str, tier: str | None = None) -> str:
    """A row label of the per-run tables: model · dataset [· tier]."""
    return " · ".join([model.name, dataset, *([tier] if tier else [])])


def sampling_groups(models: Sequence[Model]) -> tuple[dict[str, SamplingStats], list[str]]:
    """avg@k, pass@k, maj@k and the length split of every run, overall and per tier, computed
    from its samples.jsonl (runs made before these numbers existed get them too), maj@k with the
    verifier's votes its summary keeps; and the runs whose summary keeps none, or none for some
    sample (maj@k of answer strings there: rerun `traac eval` into them)."""
    out, strings = {}, []
    for model in models:
        for dataset, run in model.runs.items():
            records = run.records()
            if not records:
                continue
            votes = run.summary.votes
            if votes is not None and any(r.sample not in votes.get(r.id, {}) for r in records):
                votes = None  # a stale summary: samples were added after it
            if votes is None:
                strings.append(str(run.path))
            out[run_label(model, dataset)] = sampling_stats(field_samples(records, votes))
            for tier in tiers_in(records):
                mine = [r for r in records if r.tier == tier]
                out[run_label(model, dataset, tier)] = sampling_stats(field_samples(mine, votes))
    return out, strings


def overthinking_groups(models: Sequence[Model]) -> tuple[dict[str, OverthinkStats], list[str]]:
    """Overthinking of every run whose summary holds it, overall and per tier; and the runs
    whose summary does not (written before it existed: rerun `traac eval` into them)."""
    out, missing = {}, []
    for model in models:
        for dataset, run in model.runs.items():
            over = run.summary.overthinking
            if over is None:
                missing.append(str(run.path))
                continue
            out[run_label(model, dataset)] = over
            for tier, stats in run.summary.overthinking_by_tier.items():
                out[run_label(model, dataset, tier)] = stats
    return out, missing


def paired_rows(models: Sequence[Model]) -> list[tuple[str, str, str, Comparison]]:
    """Each model against the first on every dataset both have, over their shared problems."""
    base, rows = models[0], []
    for model in models[1:]:
        for dataset, run in model.runs.items():
            if dataset in base.runs:
                found = compare(run.records(), base.runs[dataset].records())
                if found is not None:
                    rows.append((model.name, base.name, dataset, found))
    return rows


@dataclass(frozen=True)
class ReportTable:
    """One table of the report: a key (main, change, difficulty, otb, budget, lengths), the
    sentence that introduces it, and the table."""

    key: str
    caption: str
    table: Table


def report_tables(models: Sequence[Model]) -> list[ReportTable]:
    """The report's tables, in order (markdown and HTML alike)."""
    if not models:
        raise TraacError("report: no evaluation directories")
    unit = unit_of(models)
    out = [
        ReportTable("main", f"Accuracy (%) and mean response length ({unit}).", main_table(models))
    ]
    if len(models) > 1:
        caption = (
            f"Change against {models[0].name} (accuracy in points, length in percent; from the "
            "unrounded values, so a change can differ by 0.01 from the rounded columns'):"
        )
        out.append(ReportTable("change", caption, change_table(models)))
    optional = (
        ("difficulty", "By difficulty tier (pooled over datasets):", tier_table(models)),
        ("otb", OTB_CAPTION.format(t_max=t_max_of(models), unit=unit), otb_table(models)),
        (
            "budget",
            "Think budget sweep: accuracy (%) when think blocks are interrupted at the budget "
            "(auxiliary prompt and closer appended), answered as written (truncate) or after "
            "the attention probe pruned them (compress TAU); Δ = compress - truncate, of the "
            "unrounded accuracies; budget "
            f"'none': the run without a budget. Len: mean response length ({unit}); pruned: "
            "reasoning tokens the probe removed per sample (0: compress answered from the same "
            "reasoning as truncate).",
            budget_table(models),
        ),
    )
    out += [ReportTable(k, caption, t) for k, caption, t in optional if t is not None]
    return out + field_tables(models, unit)


def field_tables(models: Sequence[Model], unit: str) -> list[ReportTable]:
    """avg@k / pass@k / maj@k, the length split, overthinking, and the paired comparisons."""
    groups, strings = sampling_groups(models)
    label = "Model · dataset · tier"
    note = (
        f"; in {', '.join(strings)}, whose summary keeps no votes, of the answer strings: "
        "rerun `traac eval` into it"
        if strings
        else ""
    )
    out = [
        ReportTable(
            "sampling",
            "Per problem over its samples: avg@k with a 95% bootstrap interval over problems, "
            f"pass@k (unbiased estimator), maj@k ({MAJ_RULE}{note}):",
            sampling_table(groups, label),
        ),
        ReportTable(
            "lengths",
            f"Lengths of right and wrong samples (mean / median / p90, {unit}; think: before "
            "the closer); cut: responses that hit the token limit; unclosed: think blocks "
            "never closed:",
            length_table(groups, unit, label),
        ),
    ]
    over, missing = overthinking_groups(models)
    if over:
        note = f" (not in {', '.join(missing)}: rerun `traac eval` into it)" if missing else ""
        caption = (
            "Overthinking of right responses: the first step whose answer the verifier accepts, "
            f"the steps and think {unit} after it; underthinking: wrong responses that closed "
            f"with fewer steps than their problem's median right response{note}:"
        )
        out.append(ReportTable("overthinking", caption, overthinking_table(over, unit, label)))
    rows = paired_rows(models) if len(models) > 1 else []
    if rows:
        caption = (
            "Paired on the shared problems (each problem's mean over its samples, A - B): "
            f"mean change with a 95% bootstrap interval over problems; {MARK}: the interval "
            "excludes 0."
        )
        out.append(ReportTable("paired", caption, paired_table(rows, unit)))
    return out


def report_blocks(models: Sequence[Model]) -> list[str | Table]:
    """The report in order: its heading, each table after its caption, a note on mixed units
    (written as markdown into report.md, drawn to fit by `traac report`)."""
    blocks: list[str | Table] = ["# Evaluation report"]
    for entry in report_tables(models):
        blocks += [entry.caption, entry.table]
    units = mixed_units(models)
    if units:
        blocks.append(f"Note: lengths are counted in different units: {'; '.join(units)}.")
    return blocks


def mixed_units(models: Sequence[Model]) -> list[str]:
    """The length units of runs that count in different tokens (none when all agree). Runs are
    told apart by their tokenizer's vocabulary where the summary records it, so a LoRA adapter
    and its base, each reading its own copy of one tokenizer, count in the same unit."""
    summaries = [run.summary for model in models for run in model.runs.values()]
    units = {s.tokenizer_id or s.length_unit: s.length_unit for s in summaries}
    return sorted(set(units.values())) if len(units) > 1 else []


def build_report(models: Sequence[Model]) -> str:
    """The whole markdown report."""
    parts: list[str] = []
    for block in report_blocks(models):
        parts += [block.markdown() if isinstance(block, Table) else block, ""]
    return "\n".join(parts)
