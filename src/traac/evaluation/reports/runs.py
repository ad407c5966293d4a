"""The runs `traac report` reads: each evaluation directory's summary (recomputed at the
report's t_max where it was written at another), its settings and its samples, gathered into one
row per model."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from traac.common.inputs import check_distinct
from traac.errors import TraacError
from traac.evaluation.harness.results import EvalSummary, SampleRecord, at_t_max
from traac.evaluation.harness.runner import (
    RUN_FILE,
    SAMPLES_FILE,
    SUMMARY_JSON,
    SamplesFile,
    read_summary,
)


@dataclass
class Run:
    """One evaluation directory: a model on a dataset, with a think budget and a test-time
    compression tau where run.json says it was made with them."""

    path: Path
    dataset: str  # short label: a file's stem, else the spec
    summary: EvalSummary
    think_budget: int | None = None
    compress_tau: float | None = None

    def records(self) -> list[SampleRecord]:
        """The per-sample records (for curves and distributions)."""
        return list(SamplesFile(self.path / SAMPLES_FILE).read().values())

    @property
    def mode(self) -> str:
        """How the think block ends: `truncate` (plain, or interrupted and answered as
        written) or `compress` (pruned by the probe first)."""
        return "truncate" if self.compress_tau is None else "compress"

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
    """A row of the table: a name, its runs by dataset label, and its think-budget runs."""

    name: str
    runs: dict[str, Run] = field(default_factory=dict)
    budget_runs: list[Run] = field(default_factory=list)


def dataset_label(spec: str) -> str:
    """A column title for a dataset spec: a file's stem, else the spec without options."""
    name = spec.split("?", 1)[0]
    if name.endswith((".json", ".jsonl", ".parquet")):
        return Path(name).stem
    return name


def load_models(
    dirs: Sequence[Path],
    names: Sequence[str] | None = None,
    t_max: int | None = None,
    *,
    words_keep_theirs: bool = False,
) -> list[Model]:
    """One row per directory: a run directory (summary.json) is a model with one dataset; any
    other directory is a model whose subdirectories are its runs, one per dataset. `t_max`:
    AUC_OAA at it (recomputed from samples.jsonl where a summary was written at another);
    None keeps each summary's own (the demo's and the experiments' reports). A run counted in
    words is refused another t_max (it counts tokens), or keeps its own with
    `words_keep_theirs` (`traac report` without --t-max)."""
    if names and len(names) != len(dirs):
        raise TraacError(f"report: {len(names)} --names for {len(dirs)} directories")
    check_distinct("report", dirs, names)
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
        for run in (_load_run(d, t_max, words_keep_theirs) for d in found):
            if run.think_budget is not None:
                _add_budget_run(model, run)
            elif run.dataset in model.runs:
                raise TraacError(
                    f"report: {model.name} has two runs on {run.dataset} "
                    f"({model.runs[run.dataset].path} and {run.path}); keep one of them"
                )
            else:
                model.runs[run.dataset] = run
        models.append(model)
    return models


def _add_budget_run(model: Model, run: Run) -> None:
    for other in model.budget_runs:
        if _sweep_key(other) == _sweep_key(run):
            raise TraacError(
                f"report: {model.name} has two runs on {run.dataset} at think budget "
                f"{run.think_budget} ({run.mode}): {other.path} and {run.path}; keep one of them"
            )
    model.budget_runs.append(run)


def _sweep_key(run: Run) -> tuple[str, int | None, float | None]:
    return run.dataset, run.think_budget, run.compress_tau


def _load_run(directory: Path, t_max: int | None = None, words_keep_theirs: bool = False) -> Run:
    summary = read_summary(directory)
    if words_keep_theirs and not summary.in_tokens:
        t_max = None
    if t_max is not None and t_max != summary.t_max:
        if not summary.in_tokens:
            raise TraacError(
                f"report: --t-max {t_max} counts think tokens, but {directory} counted whitespace "
                "words; rerun `traac eval --tokenizer NAME` into it, or drop --t-max"
            )
        records = list(SamplesFile(directory / SAMPLES_FILE).read().values())
        summary = at_t_max(summary, records, t_max)
    settings = _run_settings(directory)
    return Run(
        path=directory,
        dataset=dataset_label(summary.dataset),
        summary=summary,
        think_budget=settings.get("think_budget"),
        compress_tau=settings.get("compress_tau"),
    )


def _run_settings(directory: Path) -> dict:
    """The settings of run.json ({} where the directory has none, or an unreadable one)."""
    try:
        settings = json.loads((directory / RUN_FILE).read_text())["settings"]
    except (OSError, json.JSONDecodeError, KeyError, TypeError):
        return {}
    return settings if isinstance(settings, dict) else {}


def _row_name(directory: Path) -> str:
    """A directory's row name: its own name (results/base -> base)."""
    return directory.resolve().name
