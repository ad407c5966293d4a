"""`traac report`: evaluation directories -> the paper's tables (and the data for the plots).

Models are rows and datasets column groups (Acc % / mean length), with the average over the
datasets; a second table gives each model's change against the first one (accuracy in points,
length in percent, as the paper states its gains). Runs that hold both OptimalThinkingBench
halves add the OTB table (AUC_OAA, UnderthinkingBench accuracy, F1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from traac.common.tables import Table, fmt
from traac.errors import TraacError
from traac.evaluation.records import TIER_ORDER, EvalSummary, SampleRecord
from traac.evaluation.runner import SAMPLES_FILE, SUMMARY_JSON, SamplesFile, read_summary
from traac.method.metrics import GroupStats


@dataclass
class Run:
    """One evaluation directory: a model on a dataset."""

    path: Path
    dataset: str  # short label: a file's stem, else the spec
    summary: EvalSummary

    def records(self) -> list[SampleRecord]:
        """The per-sample records (for curves and distributions)."""
        return list(SamplesFile(self.path / SAMPLES_FILE).read().values())

    def stale(self) -> str | None:
        """Why the summary may not describe the samples, if it may not: a rerun that added
        samples and was stopped before its summary leaves the old one beside a longer file."""
        samples, summary = self.path / SAMPLES_FILE, self.path / SUMMARY_JSON
        if not samples.exists() or samples.stat().st_mtime <= summary.stat().st_mtime:
            return None
        held, counted = len(self.records()), self.summary.overall.n_samples
        if held == counted:
            return None
        return (
            f"{self.path}: {SUMMARY_JSON} counts {counted} samples but {SAMPLES_FILE}, written "
            f"after it, holds {held}; rerun `traac eval` into it to bring the summary up to date"
        )


@dataclass
class Model:
    """A row of the table: a name and its runs by dataset label."""

    name: str
    runs: dict[str, Run] = field(default_factory=dict)


def dataset_label(spec: str) -> str:
    """A column title for a dataset spec: a file's stem, else the spec without options."""
    name = spec.split("?", 1)[0]
    if name.endswith((".json", ".jsonl", ".parquet")):
        return Path(name).stem
    return name


def load_models(dirs: Sequence[Path], names: Sequence[str] | None = None) -> list[Model]:
    """One row per directory: a run directory (summary.json) is a model with one dataset; any
    other directory is a model whose subdirectories are its runs, one per dataset."""
    if names and len(names) != len(dirs):
        raise TraacError(f"report: {len(names)} --names for {len(dirs)} directories")
    models = []
    for k, directory in enumerate(dirs):
        if not directory.is_dir():
            raise TraacError(f"report: {str(directory)!r} is not a directory")
        if (directory / SUMMARY_JSON).exists():
            found = [directory]
        else:
            found = sorted(d for d in directory.iterdir() if (d / SUMMARY_JSON).exists())
            if not found:
                raise TraacError(
                    f"report: {str(directory)!r} has no summary.json, nor subdirectories with "
                    "one; pass `traac eval --output` directories"
                )
        model = Model(name=names[k] if names else _row_name(directory))
        for run in map(_load_run, found):
            if run.dataset in model.runs:
                raise TraacError(
                    f"report: {model.name} has two runs on {run.dataset} "
                    f"({model.runs[run.dataset].path} and {run.path}); keep one of them"
                )
            model.runs[run.dataset] = run
        models.append(model)
    return models


def _load_run(directory: Path) -> Run:
    summary = read_summary(directory)
    return Run(path=directory, dataset=dataset_label(summary.dataset), summary=summary)


def _row_name(directory: Path) -> str:
    """A directory's row name: its own name (results/base -> base)."""
    return directory.resolve().name


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
        ["Model", "Dataset", "Overthink Acc", "Overthink Len", "AUC_OAA", "Underthink Acc",
         "Underthink Len", "F1"],
        left=frozenset({0, 1}),
    )  # fmt: skip
    for model in models:
        for dataset, run in model.runs.items():
            otb = run.summary.otb
            if not otb:
                continue
            src = run.summary.by_source
            over, under = src["otb-overthink"], src["otb-underthink"]
            table.add(
                model.name, dataset, fmt(over.accuracy, 2), _length(over.mean_response_tokens),
                fmt(otb.auc_oaa, 2), fmt(under.accuracy, 2), _length(under.mean_response_tokens),
                fmt(otb.f1, 2),
            )  # fmt: skip
    return table if table.rows else None


def difficulty_table(models: Sequence[Model]) -> Table | None:
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
            seen.update(run.summary.by_difficulty)
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
        for tier, s in run.summary.by_difficulty.items():
            sums.setdefault(tier, []).append(s)
    out = {}
    for tier, groups in sums.items():
        n = sum(g.n_samples for g in groups)
        out[tier] = TierStats(
            accuracy=sum(g.accuracy * g.n_samples for g in groups) / n,
            mean_response_tokens=sum(g.mean_response_tokens * g.n_samples for g in groups) / n,
        )
    return out


def build_report(models: Sequence[Model]) -> str:
    """The whole markdown report."""
    if not models:
        raise TraacError("report: no evaluation directories")
    unit = unit_of(models)
    parts = ["# Evaluation report", "", f"Accuracy (%) and mean response length ({unit}).", ""]
    parts += [main_table(models).markdown(), ""]
    if len(models) > 1:
        parts += [
            f"Change against {models[0].name} (accuracy in points, length in percent):",
            "",
            change_table(models).markdown(),
            "",
        ]
    for title, table in (
        ("By difficulty tier (pooled over datasets):", difficulty_table(models)),
        ("OptimalThinkingBench:", otb_table(models)),
    ):
        if table:
            parts += [title, "", table.markdown(), ""]
    units = {run.summary.length_unit for model in models for run in model.runs.values()}
    if len(units) > 1:
        parts += [f"Note: lengths are counted in different units: {'; '.join(sorted(units))}.", ""]
    return "\n".join(parts)
