"""Kept run records: the evidence behind a results table, in the repository, so that a figure
outlives the machine whose run store made it.

A study directory (`records/<study>/`) holds the recipe every run trained from (`recipe.yaml`;
where a change of the parser's spelling migrated it, the bytes the runs trained from stay beside
it as `recipe.as-run.yaml`, `as_run`) and, per run, what its figures are computed from:

    base/run.json, base/samples.jsonl.gz      the base model's evaluation and its legs
    runs/<variant>/seed<k>/run.json           variant, seed, the overrides its run key hashed
                                              (and its fields: those less the seed), run key,
                                              held-out settings, wall seconds, the legs that
                                              worked on it (each as it started and ended:
                                              commit, versions, CPU, machine, command, the
                                              starting weights' sha256), and each kept file's
                                              lines and sha256 (`verify` checks them)
    runs/<variant>/seed<k>/samples.jsonl.gz   the held-out evaluation, one line a sample
    runs/<variant>/seed<k>/metrics.jsonl.gz   the training telemetry, one line a step

`keep` copies the finished runs of an experiment's store in (gzip with no timestamp, so the same
run gives the same bytes), each with the overrides its run key was found under, never the
variant's later name for them; `load` reads them back; `study_tables` recomputes the experiment's
tables from the samples alone: accuracy, length, AUC_OAA (at the held-out response cap, as the
experiment's report) and underthinking need neither the model nor its tokenizer, so a later
traac recomputes the same figures whatever its summary format; `compute_table` reads the kept
metrics for what compression costs a step.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import re
import shutil
import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from traac.common.outputs import output_dir
from traac.common.tables import Table
from traac.errors import TraacError, first_line
from traac.evaluation.harness.overthinking import overthink_stats, underthinking
from traac.evaluation.harness.results import EvalSummary, SampleRecord, summarize
from traac.evaluation.harness.runner import SAMPLES_FILE
from traac.pipelines.experiment_results import (
    Effect,
    Stat,
    VariantResult,
    bounds_table,
    effects_table_of,
    experiment_table,
    paired_effects,
    stated_margin,
    within_model_table,
)
from traac.pipelines.experiments import (
    BASE,
    PROVENANCE,
    RUN_SECONDS,
    ExperimentSettings,
    Run,
    run_directory,
    run_key,
    run_keys,
)
from traac.pipelines.recipe import read_recipe
from traac.pipelines.variants import COMPARE, CONTRASTS
from traac.training.methods.registry import flat_form
from traac.training.telemetry.metrics_file import METRICS_FILE
from traac.training.telemetry.step_stats import StepStats, read_metrics

RECIPE = "recipe.yaml"
AS_RUN = "recipe.as-run.yaml"  # a migrated study's recipe as its runs trained from it (`as_run`)
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


def file_record(path: Path) -> dict[str, Any]:
    """A kept gzip file's lines (not blank) and the sha256 of its text, as `verify` checks them."""
    text = gzip.decompress(path.read_bytes())
    return {"lines": sum(1 for line in text.splitlines() if line.strip()),
            "sha256": hashlib.sha256(text).hexdigest()}  # fmt: skip


def as_run(study: Path) -> Path:
    """The recipe file of `study` whose bytes its runs trained from (their `recipe_sha256`, and
    the text their old keys hashed): `recipe.as-run.yaml` where a change of spelling migrated
    `recipe.yaml` (the same values, `migration_problems`), else `recipe.yaml`."""
    kept = study / AS_RUN
    return kept if kept.is_file() else study / RECIPE


def migration_problems(study: Path) -> list[str]:
    """What a migration of `study`'s recipe changed beyond its spelling: the fields whose value
    differs between `recipe.as-run.yaml` and `recipe.yaml`, both read in the flat form run keys
    hash (`flat_form`: a block's settings under their names from before the blocks), in one line;
    none without an as-run file."""
    if as_run(study).name != AS_RUN:
        return []
    was, now = (flat_form(read_recipe(study / name)) for name in (AS_RUN, RECIPE))
    fields = sorted(k for k in was.keys() | now.keys() if was.get(k, ...) != now.get(k, ...))
    differ = [f"{k} ({was.get(k, 'unset')}; {now.get(k, 'unset')})" for k in fields]
    if not differ:
        return []
    return [f"{AS_RUN} and {RECIPE} differ in {', '.join(differ)}: a migration respells the "
            "recipe and keeps every value (settings compared under their flat names)"]  # fmt: skip


def keyed_overrides(
    settings: ExperimentSettings, run: Run, parsed: dict[str, Any], text: str
) -> tuple[str, dict[str, Any]]:
    """How `run`'s key hashed the recipe (`mapping`, the `parsed` recipe, or `text`, the as-run
    recipe's) and the overrides it hashed: what the run trained with, whatever its variant names
    now."""
    keys = run_keys(parsed, text, run.recipe.overrides, settings.model)
    found = [(form, overrides) for form, overrides, key in keys if key == run.directory.name]
    if not found:
        raise TraacError(f"records: {run.directory} is under no key of {run.variant}, seed "
                         f"{run.seed}; keep it from the store it trained in")  # fmt: skip
    return found[0]


def keep(settings: ExperimentSettings, into: Path) -> list[str]:
    """Copy every finished run of `settings` (trained and evaluated in its store) and the base
    model's evaluation into the study directory `into`, whose `recipe.yaml` must be the
    experiment's recipe; returns the runs kept (a run already kept is written again). A run of
    an old key is found under the text of the study's as-run recipe (`as_run`), whose sha256
    each run records."""
    recipe = into / RECIPE
    if not recipe.is_file() or recipe.read_bytes() != settings.recipe.read_bytes():
        raise TraacError(f"records: {recipe} must be a copy of --config {settings.recipe}, the "
                         "recipe the runs trained from; copy it there first")  # fmt: skip
    held = asdict(settings.held_out)
    trained = as_run(into).read_bytes()
    text, parsed = trained.decode(), read_recipe(settings.recipe)
    kept = []
    base_eval = settings.base_eval_dir
    if (base_eval / SAMPLES_FILE).is_file():
        target = output_dir(into / "base")
        _gzip(base_eval / SAMPLES_FILE, target / SAMPLES)
        base = {"variant": BASE, "model": settings.model, "held_out": held,
                "legs": (_json(base_eval / PROVENANCE) or {}).get("legs", []),
                "files": {SAMPLES: file_record(target / SAMPLES)}}  # fmt: skip
        (target / RUN).write_text(json.dumps(base, indent=1) + "\n")
    for planned in settings.plan():  # its directory found under the as-run text's old keys too
        keys = settings.runs, parsed, text, planned.recipe.overrides, settings.model
        run = replace(planned, directory=run_directory(*keys))
        samples = settings.eval_dir(run.directory) / SAMPLES_FILE
        summary = settings.eval_dir(run.directory) / "summary.json"
        if not (summary.is_file() and samples.is_file()):
            continue  # not finished: kept when it is
        target = output_dir(into / "runs" / slug(run.variant) / f"seed{run.seed}")
        _gzip(samples, target / SAMPLES)
        metrics = run.directory / "model" / METRICS_FILE
        if metrics.is_file():
            _gzip(metrics, target / METRICS)
        form, overrides = keyed_overrides(settings, run, parsed, text)
        fields = {k: v for k, v in overrides.items() if k != "seed"}
        record = {
            "variant": run.variant,
            "seed": run.seed,
            "fields": {k: v for k, v in fields.items() if k not in settings.train_overrides},
            "overrides": overrides,
            "key_recipe": form,
            "run_key": run.directory.name,
            "recipe_sha256": hashlib.sha256(trained).hexdigest(),
            "held_out": held,
            "seconds": (_json(run.directory / RUN_SECONDS) or {}).get("seconds"),
            "legs": (_json(run.directory / PROVENANCE) or {}).get("legs", []),
            "files": {name: file_record(target / name) for name in (SAMPLES, METRICS)
                      if (target / name).is_file()},
        }  # fmt: skip
        (target / RUN).write_text(json.dumps(record, indent=1, default=str) + "\n")
        kept.append(f"{run.variant}, seed {run.seed}")
    return kept


def nothing_kept(settings: ExperimentSettings) -> str:
    """Why `keep` found no finished run of `settings` in its store, in words: what it looked for
    and what the store holds instead (no run at all, runs at other seeds, evaluations at another
    held-out size or batching, or runs not evaluated yet)."""
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
    other = "padded" if held.batching == "refill" else "refill"
    flipped = replace(settings, held_out=replace(held, batching=other)).eval_dir(Path()).name
    if done and all(e.name == flipped for e in done):
        return (f"{wanted}; found {len(done)} finished run(s) whose evaluations decoded "
                f"{other}: pass --eval-batching {other}")  # fmt: skip
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

    @functools.cached_property
    def steps(self) -> list[StepStats]:
        """The run's training steps from its kept metrics (none if none were kept), read once
        for every table that needs them."""
        try:
            return read_metrics(self.directory / METRICS)
        except (OSError, ValueError) as err:
            raise TraacError(f"records: {self.directory / METRICS} is not a kept metrics file "
                             f"({err})") from None  # fmt: skip


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
    """A kept run's seconds a training step in each of `PHASES` (means over its steps; empty if
    none were kept). A phase the run's mode never enters is 0."""
    steps = run.steps
    if not steps:
        return {}
    return {p: sum(step.seconds.get(p, 0.0) for step in steps) / len(steps) for p in PHASES}


def copies_made(run: KeptRun) -> tuple[float, float, float, float] | None:
    """What a kept run's compression made over its training (None: no copy): the share of the
    candidates (right, well-formed rollouts) that lost steps, %; the steps and reasoning tokens
    a copy lost, on average over copies; the pooled rollouts' mean response tokens."""
    scopes = [step.scopes["all"] for step in run.steps if "all" in step.scopes]
    made = [s for s in scopes if s.compressed_rollouts]
    copies = sum(s.compressed_rollouts for s in made)
    if not copies:
        return None
    lengths = [s.response_tokens for s in scopes if s.response_tokens is not None]
    return (
        100 * copies / sum(s.candidates for s in scopes),
        sum((s.steps_removed or 0.0) * s.compressed_rollouts for s in made) / copies,
        sum((s.tokens_removed or 0.0) * s.compressed_rollouts for s in made) / copies,
        sum(lengths) / len(lengths),
    )


def _by_variant(
    runs: Sequence[KeptRun], measure: Callable[[KeptRun], Any], order: Sequence[str]
) -> dict[str, list[Any]]:
    """Each variant's measures of its runs (a run measured None is left out), the variants of
    `order` first, in its order."""
    grouped: dict[str, list[Any]] = {}
    for run in runs:
        if (value := measure(run)) is not None:
            grouped.setdefault(run.variant, []).append(value)
    names = [n for n in order if n in grouped] + [n for n in grouped if n not in order]
    return {name: grouped[name] for name in names}


def compute_table(runs: Sequence[KeptRun], order: Sequence[str] = ()) -> Table:
    """What compression costs a training step, per variant (mean ± s.e. over seeds): the
    rollouts' decoding, the probe and the re-answers, and the last two as a share of the first,
    a ratio taken within each run, so that it holds across the loads the runs shared a machine
    with (the seconds themselves do not)."""

    def timed(run: KeptRun) -> dict[str, float] | None:  # runs that logged no decoding: no row
        seconds = phase_seconds(run)
        return seconds if seconds.get("generate") else None

    by_variant = _by_variant(runs, timed, order)
    columns = ["variant", "seeds", "decoding s a step", "probe s a step", "re-answers s a step",
               "probe + re-answers, % of decoding"]  # fmt: skip
    table = Table(columns, title="What compression costs a training step (mean ± s.e. over seeds)")
    for name, seeds in by_variant.items():
        share = [100 * (s["score"] + s["regenerate"]) / s["generate"] for s in seeds]
        table.add(name, str(len(seeds)), *(Stat.of([s[p] for s in seeds]).cell() for p in PHASES),
                  Stat.of(share).cell())  # fmt: skip
    return table


def cut_table(runs: Sequence[KeptRun], order: Sequence[str] = ()) -> Table:
    """How much compression cut in training, per variant that made copies (mean ± s.e. over
    seeds, `copies_made`): what a contrast of a compressing arm tested is copies this much
    shorter, not the cut the probe could make at another rule or tau."""
    by_variant = _by_variant(runs, copies_made, order)
    columns = ["variant", "seeds", "candidates compressed (%)", "steps removed a copy",
               "tokens removed a copy", "pooled response tokens"]  # fmt: skip
    table = Table(columns, title="What compression cut in training (mean ± s.e. over seeds)")
    for name, seeds in by_variant.items():
        table.add(name, str(len(seeds)),
                  *(Stat.of([s[i] for s in seeds]).cell() for i in range(4)))  # fmt: skip
    return table


def shown_tables(study: Path) -> dict[str, tuple[str, Table]]:
    """What `traac records show` prints of `study`, by name (variants, effects, bounds,
    within-model, compute, copies, in that order, each where there is one): each table with the line
    that captions it; empty when no run is kept. The study's stated margin is read first, so that
    a mistake in it costs nothing."""
    margin = stated_margin(study)
    base, runs = load(study)
    if not runs:
        return {}
    tables = study_tables(base, runs, f"{study.name} (kept records)", order=list(COMPARE))
    shown = {"variants": (f"AUC_OAA at t_max {tables.t_max}.", tables.table)}
    if tables.effects:
        within = within_model_table(tables.effects)
        shown["effects"] = ("", effects_table_of(tables.effects))
        shown["bounds"] = ("", bounds_table(tables.effects, margin))
        if within.rows:
            shown["within-model"] = ("", within)
    compute = compute_table(runs, order=list(COMPARE))
    if compute.rows:
        shown["compute"] = ("", compute)
    copies = cut_table(runs, order=list(COMPARE))
    if copies.rows:
        shown["copies"] = ("", copies)
    return {name: (caption or f"{table.title}.", table) for name, (caption, table) in shown.items()}


def shown_markdown(shown: dict[str, tuple[str, Table]], names: Sequence[str] = ()) -> str:
    """The tables of `shown` that `names` selects (all without), each under its caption."""
    return "\n\n".join(f"{caption}\n\n{table.markdown()}" for name, (caption, table)
                       in shown.items() if not names or name in names)  # fmt: skip


# ------------------------------------------------------------------------------------ verify

# In the docs: a block of `traac records show DIR --markdown [--tables NAME...]`'s output, and
# prose whose every decimal figure is one that `show` prints for DIR (to the figure's precision).
BLOCK = re.compile(r"<!-- records: (\S+)((?: \S+)*?) -->\n(.*?)\n<!-- /records -->", re.S)
CITES = re.compile(r"<!-- cites: (\S+) -->\n(.*?)\n<!-- /cites -->", re.S)
DECIMAL = re.compile(r"[+−-]?\d+\.\d+")


def verify(study: Path, pages: Sequence[Path]) -> tuple[list[str], str]:
    """Every problem with the kept records of `study`, one line each, and a one-line summary:
    each run's key recomputed from the study's recipe and the overrides it records (its fields
    those less the seed; a key of the recipe's text, and the run's `recipe_sha256`, from the
    bytes it trained from, `as_run`, whose values a migrated recipe.yaml keeps), each kept file's
    lines and sha256 against its record, each run's samples counted (every held-out problem of
    every tier, each sampled as often as the settings say), and every block and cited figure of
    `pages` that names the study against what `traac records show` prints (a page names the
    study from the repository's root, the directory above `records/`)."""
    base, runs = load(study)
    trained = as_run(study)
    text, parsed = trained.read_text(), read_recipe(study / RECIPE)
    model = str(yaml.safe_load(text).get("model_name_or_path", "testbed"))
    recipe_sha = hashlib.sha256(trained.read_bytes()).hexdigest()
    problems = migration_problems(study)
    for run in ([base] if base is not None else []) + list(runs):
        where = run.directory.relative_to(study)
        problems += [
            f"{where}: {p}"
            for p in _run_problems(run, parsed, text, model, recipe_sha, trained.name)
        ]
    shown = shown_tables(study)
    blocks = figures = 0
    root = study.resolve().parent.parent  # blocks name a study from the repository's root
    for page in pages:
        content = page.read_text()
        for match in BLOCK.finditer(content):
            if (root / match.group(1)).resolve() != study.resolve():
                continue
            blocks += 1
            options = match.group(2).split()
            if options[:1] not in ([], ["--tables"]) or not set(options[1:]) <= set(shown):
                problems.append(f"{page.name}: records block options {options} are not "
                                f"--tables of {', '.join(shown)}")  # fmt: skip
            elif match.group(3).strip() != shown_markdown(shown, options[1:]):
                problems.append(f"{page.name}: the records block of {match.group(1)} is not what "
                                f"`traac records show {match.group(1)} --markdown "
                                f"{' '.join(options)}` prints; paste its output")  # fmt: skip
        for match in CITES.finditer(content):
            if (root / match.group(1)).resolve() != study.resolve():
                continue
            cited = DECIMAL.findall(match.group(2))
            figures += len(cited)
            printed = shown_markdown(shown)
            for figure in cited:
                if not _printed(figure, printed):
                    problems.append(f"{page.name}: {figure} is cited from {match.group(1)} but "
                                    "`traac records show` prints no such figure")  # fmt: skip
    samples = sum(len(run.samples) for run in runs)
    summary = (f"{study}: {len(runs)} runs{' and the base' if base else ''} as kept (keys, "
               f"checksums, {samples:,} samples), {blocks} records block(s) and {figures} cited "
               "figure(s) as `show` prints them")  # fmt: skip
    return problems, summary


def _run_problems(
    run: KeptRun, parsed: dict[str, Any], text: str, model: str, recipe_sha: str, trained: str
) -> list[str]:
    """What is wrong with one kept run (or the base): its key, its files, its samples (`text`
    and `recipe_sha` those of the recipe file named `trained`, the study's `as_run`)."""
    record, problems = run.record, []
    if run.variant != BASE:
        overrides = record.get("overrides")
        if not isinstance(overrides, dict):
            return ["no overrides recorded, so its key cannot be recomputed; keep it again"]
        form = parsed if record.get("key_recipe") == "mapping" else text
        if run_key(form, overrides, model) != record.get("run_key"):
            problems.append(f"run key {record.get('run_key')} is not the key of the recipe and "
                            f"its overrides {overrides}")  # fmt: skip
        if record.get("fields") != {k: v for k, v in overrides.items() if k != "seed"}:
            problems.append(f"fields {record.get('fields')} are not the overrides its key "
                            f"hashed, less the seed ({overrides})")  # fmt: skip
        if overrides.get("seed") != run.seed:
            problems.append(f"seed {run.seed} is not its overrides' {overrides.get('seed')}")
        if record.get("recipe_sha256") != recipe_sha:
            problems.append(f"recipe_sha256 is not the study's {trained}'s")
    files = record.get("files")
    if not isinstance(files, dict) or SAMPLES not in files:
        problems.append("no checksums of its files recorded; keep it again")
        files = {}
    for name, kept in files.items():
        path = run.directory / name
        found = file_record(path) if path.is_file() else {"lines": 0, "sha256": "missing"}
        if found != kept:
            problems.append(f"{name} holds {found['lines']} lines (sha256 {found['sha256'][:12]})"
                            f", its record {kept.get('lines')} (sha256 "
                            f"{str(kept.get('sha256'))[:12]})")  # fmt: skip
    held = record["held_out"]
    samples = Counter(s.id for s in run.samples)
    short = sorted(k for k, n in samples.items() if n != held["num_samples"])
    if short:
        problems.append(f"{len(short)} problem(s) without {held['num_samples']} samples "
                        f"(first {short[0]})")  # fmt: skip
    return problems


def _printed(figure: str, printed: str) -> bool:
    """Is `figure` (its sign aside) a figure of `printed`, rounded to its own decimals?"""
    value, digits = abs(float(figure.replace("−", "-"))), len(figure.partition(".")[2])
    return any(abs(round(abs(float(f)), digits) - value) < 1e-9 for f in DECIMAL.findall(printed))
