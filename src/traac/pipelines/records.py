"""Kept run records: the evidence behind a results table, in the repository, so that a figure
outlives the machine whose run store made it.

A study directory (`records/<study>/`) holds the recipe every run trained from (`recipe.yaml`)
and, per run, what its figures are computed from:

    base/run.json, base/samples.jsonl.gz
    runs/<variant>/seed<k>/run.json           variant, seed, fields, run key, held-out
                                              settings, wall seconds, provenance (commit, CPU,
                                              command) of each invocation that worked on it
    runs/<variant>/seed<k>/samples.jsonl.gz   the held-out evaluation, one line a sample
    runs/<variant>/seed<k>/metrics.jsonl.gz   the training telemetry, one line a step

`keep` copies the finished runs of an experiment's store in (gzip with no timestamp, so the same
run gives the same bytes); `load` reads them back; `study_tables` recomputes the experiment's
tables from the samples alone: accuracy, length, AUC_OAA (at the held-out response cap, as the
experiment's report) and underthinking need neither the model nor its tokenizer, so a later
traac recomputes the same figures whatever its summary format; `compute_table` reads the kept
metrics for what compression costs a step.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import shutil
import zlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from traac.common.outputs import output_dir
from traac.common.tables import Table
from traac.errors import TraacError, first_line
from traac.evaluation.harness.overthinking import overthink_stats, underthinking
from traac.evaluation.harness.records import EvalSummary, SampleRecord, summarize
from traac.evaluation.harness.runner import SAMPLES_FILE
from traac.pipelines.experiment_results import (
    Effect,
    Stat,
    VariantResult,
    experiment_table,
    paired_effects,
)
from traac.pipelines.experiments import (
    BASE,
    PROVENANCE,
    RUN_SECONDS,
    ExperimentSettings,
)
from traac.pipelines.variants import CONTRASTS
from traac.training.telemetry.metrics_file import METRICS_FILE
from traac.training.telemetry.step_stats import read_metrics

RECIPE = "recipe.yaml"
_RUN_KEY = re.compile(r"(.+)-seed(\d+)-[0-9a-f]{12}")  # a run's store directory (`run_key`)
_EVAL_SIZE = re.compile(r"eval-(\d+)x")  # its evaluation's held-out problems a tier (`eval_dir`)
RUN = "run.json"
SAMPLES = "samples.jsonl.gz"
METRICS = "metrics.jsonl.gz"


def slug(variant: str) -> str:
    """A variant's name as a directory name."""
    return "".join(c if c.isalnum() else "-" for c in variant.lower()).strip("-").replace("--", "-")


def _gzip(source: Path, target: Path) -> None:
    """`source` gzipped into `target`, byte for byte the same for the same input."""
    with (
        source.open("rb") as src,
        target.open("wb") as raw,
        gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as out,
    ):
        shutil.copyfileobj(src, out)


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def keep(settings: ExperimentSettings, into: Path) -> list[str]:
    """Copy every finished run of `settings` (trained and evaluated in its store) and the base
    model's evaluation into the study directory `into`, whose `recipe.yaml` must be the
    experiment's recipe; returns the runs kept (a run already kept is written again)."""
    recipe = into / RECIPE
    if not recipe.is_file() or recipe.read_bytes() != settings.recipe.read_bytes():
        raise TraacError(f"records: {recipe} must be a copy of --config {settings.recipe}, the "
                         "recipe the runs trained from; copy it there first")  # fmt: skip
    held = asdict(settings.held_out)
    kept = []
    base_eval = settings.base_eval_dir
    if (base_eval / SAMPLES_FILE).is_file():
        target = output_dir(into / "base")
        _gzip(base_eval / SAMPLES_FILE, target / SAMPLES)
        run = {"variant": BASE, "model": settings.model, "held_out": held}
        (target / RUN).write_text(json.dumps(run, indent=1) + "\n")
    for run in settings.plan():
        samples = settings.eval_dir(run.directory) / SAMPLES_FILE
        summary = settings.eval_dir(run.directory) / "summary.json"
        if not (summary.is_file() and samples.is_file()):
            continue  # not finished: kept when it is
        target = output_dir(into / "runs" / slug(run.variant) / f"seed{run.seed}")
        _gzip(samples, target / SAMPLES)
        metrics = run.directory / "model" / METRICS_FILE
        if metrics.is_file():
            _gzip(metrics, target / METRICS)
        record = {
            "variant": run.variant,
            "seed": run.seed,
            "fields": dict(run.fields),
            "run_key": run.directory.name,
            "recipe_sha256": hashlib.sha256(recipe.read_bytes()).hexdigest(),
            "held_out": held,
            "seconds": (_json(run.directory / RUN_SECONDS) or {}).get("seconds"),
            "legs": (_json(run.directory / PROVENANCE) or {}).get("legs", []),
        }
        (target / RUN).write_text(json.dumps(record, indent=1, default=str) + "\n")
        kept.append(f"{run.variant}, seed {run.seed}")
    return kept


def nothing_kept(settings: ExperimentSettings) -> str:
    """Why `keep` found no finished run of `settings` in its store, in words: what it looked for
    and what the store holds instead (no run at all, runs at other seeds, evaluations at another
    held-out size, or runs not evaluated yet)."""
    runs, held = settings.plan(), settings.held_out
    seeds = " ".join(map(str, settings.seeds))
    wanted = (f"looked for {len(runs)} run(s) ({', '.join(settings.variants)}; seeds {seeds}) "
              f"evaluated at held-out {held.per_tier} in {settings.runs}")  # fmt: skip
    stored = sorted(d.name for d in settings.runs.iterdir() if _RUN_KEY.fullmatch(d.name))
    if not stored:
        return (
            f"{wanted}, which holds no experiment run (no MODE-seedN-KEY directory); give "
            "the experiment's run store (its --runs; by default runs/ beside its --output)"
        )
    there = [run for run in runs if run.directory.is_dir()]
    if not there:
        modes = {run.directory.name.partition("-seed")[0] for run in runs}
        found = sorted(
            {int(m[2]) for n in stored if (m := _RUN_KEY.fullmatch(n)) and m[1] in modes}
        )
        return (
            f"{wanted}; it holds none of them, but runs of these modes at seeds "
            f"{' '.join(map(str, found)) or 'none'} (under this recipe or another)"
        )
    done = [e for run in there for e in run.directory.glob("eval-*")
            if (e / "summary.json").is_file() and (e / SAMPLES_FILE).is_file()]  # fmt: skip
    at = {}  # each evaluation's held-out size, where that alone differs from the one asked
    for e in done:
        size = _EVAL_SIZE.match(e.name)
        if size and settings.eval_dir(Path(), int(size[1])).name == e.name:
            at[e.name] = int(size[1])
    if done and len(at) == len({e.name for e in done}):
        sizes = sorted(set(at.values()))
        return (f"{wanted}; found {len(done)} finished run(s) at held-out "
                f"{', '.join(map(str, sizes))}; you asked for {held.per_tier}: pass --held-out "
                f"{sizes[0]}")  # fmt: skip
    if done:
        names = ", ".join(sorted({e.name for e in done}))
        return (f"{wanted} ({settings.eval_dir(Path()).name}); found {len(done)} finished "
                f"run(s) evaluated otherwise ({names}: a --quick study?)")  # fmt: skip
    return (
        f"{wanted}; found {len(there)} of them, none evaluated yet (traac experiment "
        "compare evaluates each run once it has trained)"
    )


@dataclass(frozen=True)
class KeptRun:
    """One kept run: its record (`run.json`), its evaluation samples and where it is kept."""

    variant: str
    seed: int
    record: dict[str, Any]
    samples: list[SampleRecord]
    directory: Path

    @property
    def t_max(self) -> int:
        """AUC_OAA's t_max in the experiment's report (the held-out response cap where the
        record predates `HeldOut.t_max`)."""
        held = self.record["held_out"]
        return int(held.get("t_max", held["max_new_tokens"]))


def read_samples(path: Path) -> list[SampleRecord]:
    """The sample records of a kept `samples.jsonl.gz`."""
    try:
        with gzip.open(path, "rt") as lines:
            return [SampleRecord.from_json(json.loads(line)) for line in lines if line.strip()]
    except (EOFError, zlib.error) as err:  # a copy cut short: no OSError
        raise TraacError(f"records: {path} is cut short or damaged ({first_line(err)}); keep "
                         "the run again (traac records keep)") from None  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise TraacError(f"records: {path} is not a kept samples file ({err})") from None


def _kept(directory: Path) -> KeptRun:
    record = _json(directory / RUN)
    if not isinstance(record, dict) or "variant" not in record or "held_out" not in record:
        raise TraacError(f"records: {directory / RUN} is missing or not a run record")
    samples = read_samples(directory / SAMPLES)
    return KeptRun(record["variant"], int(record.get("seed", 0)), record, samples, directory)


def load(study: Path) -> tuple[KeptRun | None, list[KeptRun]]:
    """The base model's kept evaluation (None if not kept) and every kept run, in the order of
    their directories (variant, then seed)."""
    if not (study / RECIPE).is_file():
        raise TraacError(f"records: {study} is not a study directory (no {RECIPE}); give "
                         "records/<study>")  # fmt: skip
    base = _kept(study / "base") if (study / "base" / RUN).is_file() else None
    runs = [_kept(d.parent) for d in sorted((study / "runs").glob(f"*/seed*/{RUN}"))]
    return base, sorted(runs, key=lambda r: (r.variant, r.seed))


def sample_summary(run: KeptRun) -> EvalSummary:
    """A kept run's summary from its samples alone: accuracy, lengths, AUC_OAA at the
    held-out cap and underthinking (the overthinking that needs the tokenizer is left out)."""
    samples = run.samples
    summary = summarize(samples, dataset=run.record["held_out"].get("dataset", "held-out"),
                        model=run.variant, t_max=run.t_max, length_unit="tokens")  # fmt: skip
    return replace(summary, overthinking=overthink_stats([], *underthinking(samples)))


@dataclass(frozen=True)
class StudyTables:
    """A study's tables, recomputed from its kept records."""

    table: Table
    results: dict[str, VariantResult]
    effects: list[Effect]
    t_max: int


def study_tables(
    base: KeptRun | None,
    runs: Sequence[KeptRun],
    title: str,
    contrasts: Sequence[tuple[str, str, str]] = CONTRASTS["compare"],
    order: Sequence[str] = (),
) -> StudyTables:
    """The experiment's variant table and its effects, seed-level, from kept records; variants
    in `order` first (then as found)."""
    if not runs:
        raise TraacError("records: no kept run to tabulate")
    summaries: dict[str, dict[int, EvalSummary]] = {}
    records: dict[str, dict[int, list[SampleRecord]]] = {}
    if base is not None:
        summaries[BASE] = {0: sample_summary(base)}
    for run in runs:
        summaries.setdefault(run.variant, {})[run.seed] = sample_summary(run)
        records.setdefault(run.variant, {})[run.seed] = run.samples
    names = [n for n in (BASE, *order) if n in summaries]
    names += [n for n in summaries if n not in names]
    results = {name: VariantResult.of(summaries[name]) for name in names}
    t_max = {run.t_max for run in runs}
    if len(t_max) != 1:
        raise TraacError(f"records: runs evaluated at different response caps {sorted(t_max)}")
    effects = paired_effects(contrasts, summaries, records)
    return StudyTables(experiment_table(results, title), results, effects, t_max.pop())


PHASES = ("generate", "score", "regenerate")  # rollouts decoded; the probe; the re-answers


def phase_seconds(run: KeptRun) -> dict[str, float]:
    """A kept run's seconds a training step in each of `PHASES` (means over its steps, from
    its kept metrics; empty if none were kept). A phase the run's mode never enters is 0."""
    try:
        steps = read_metrics(run.directory / METRICS)
    except (OSError, ValueError) as err:
        raise TraacError(f"records: {run.directory / METRICS} is not a kept metrics file "
                         f"({err})") from None  # fmt: skip
    if not steps:
        return {}
    return {p: sum(step.seconds.get(p, 0.0) for step in steps) / len(steps) for p in PHASES}


def compute_table(runs: Sequence[KeptRun], order: Sequence[str] = ()) -> Table:
    """What compression costs a training step, per variant (mean ± s.e. over seeds): the
    rollouts' decoding, the probe and the re-answers, and the last two as a share of the first,
    a ratio taken within each run, so that it holds across the loads the runs shared a machine
    with (the seconds themselves do not)."""
    by_variant: dict[str, list[dict[str, float]]] = {}
    for run in runs:
        seconds = phase_seconds(run)
        if seconds.get("generate"):
            by_variant.setdefault(run.variant, []).append(seconds)
    names = [n for n in order if n in by_variant] + [n for n in by_variant if n not in order]
    columns = ["variant", "seeds", "decoding s a step", "probe s a step", "re-answers s a step",
               "probe + re-answers, % of decoding"]  # fmt: skip
    table = Table(columns, title="What compression costs a training step (mean ± s.e. over seeds)")
    for name in names:
        seeds = by_variant[name]
        share = [100 * (s["score"] + s["regenerate"]) / s["generate"] for s in seeds]
        table.add(name, str(len(seeds)), *(Stat.of([s[p] for s in seeds]).cell() for p in PHASES),
                  Stat.of(share).cell())  # fmt: skip
    return table
