"""The testbed experiments: `traac experiment ablations` (the paper's ablations) and `traac
experiment compare` (TRAAC against its peer methods, with and without dynamic sampling).

One runner for both. Every variant starts from the same testbed model and trains with the same
recipe, step budget and sampling, once per seed; only the fields of its variant change. All are
evaluated on the same held-out problems (`HeldOut`, as the demo), and the report gives per
variant the accuracy and mean length per tier and overall, and AUC_OAA, each as mean ± standard
error over the seeds, plus a Pareto plot of accuracy against length, and the effect of each one
change the experiment isolates (`CONTRASTS`: one variant minus another, paired by seed, and
paired over the held-out problems with the shared seeds' samples pooled).

Every (variant, seed) configuration is parsed before anything trains, so a bad field fails in
seconds. Runs live in a store shared by the experiments (`--runs`, default `runs/` beside the
output) under a key made of the recipe's text, the overrides and the seed: the same run is
trained once, whichever experiment asks for it first, and a rerun keeps finished runs (and
continues a checkpointed one).
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from traac.common.outputs import output_dir, write_text
from traac.common.progress import NullProgress, Progress
from traac.common.tables import Table, fmt, signed
from traac.errors import TraacError
from traac.evaluation.harness.paired import Comparison, compare
from traac.evaluation.harness.records import TIER_ORDER, EvalSummary, SampleRecord
from traac.evaluation.harness.runner import SAMPLES_FILE
from traac.evaluation.harness.samples import SamplesFile
from traac.evaluation.reports.plots import pareto_plot
from traac.pipelines.continuation import (
    Continuation,
    check_steps,
    plan_continuations,
)
from traac.pipelines.isolating import ISOLATING_CONTRASTS
from traac.pipelines.model_registry import resolve_model
from traac.pipelines.recipe import check_continuable
from traac.pipelines.stages import (
    QUICK_TRAINING,
    HeldOut,
    Recipe,
    Stages,
    compression_table,
    tier_columns,
    tier_rows,
    training_compression,
)
from traac.pipelines.train import check_recipe
from traac.pipelines.variants import (
    DEFAULT_SEEDS,
    EXPERIMENTS,
    PAPER_RESPONSE_CAP,
    check_variants,
)
from traac.training.methods.scale import PaperTokens, PerPaperToken
from traac.training.metrics_file import METRICS_FILE

TIERS = (*TIER_ORDER, "overall")
BASE = "Base"
RUN_SECONDS = "seconds.json"  # in a run's directory: what training and evaluating it took


def variant_overrides(fields: Mapping[str, Any], response_cap: int) -> dict[str, Any]:
    """A variant's fields with its paper-scale token constants scaled to `response_cap`."""
    scale = PAPER_RESPONSE_CAP / response_cap
    return {
        key: value.at(scale) if isinstance(value, PaperTokens | PerPaperToken) else value
        for key, value in fields.items()
    }


# The one change each pair isolates: (what changed, baseline, variant). The report gives the
# variant minus the baseline seed by seed: both runs of a pair start from the same model with
# the same seed, so what varies with the seed alone cancels in their difference.
CONTRASTS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "ablations": (
        ("format and length rewards", "CR", "CR+LR"),
        ("compression, one bin", "CR+LR", "CR+LR+compression (no difficulty)"),
        ("difficulty bins", "CR+LR+compression (no difficulty)", "TRAAC"),
        ("compression with difficulty", "CR+LR", "TRAAC"),
        ("attention, not random", "TRAAC, random scorer", "TRAAC"),
        ("attention, not confidence", "TRAAC, confidence scorer", "TRAAC"),
        ("attention, not the oracle early exit", "TRAAC, early exit (oracle)", "TRAAC"),
        (
            "attention after the oracle prefix",
            "TRAAC, early exit (oracle)",
            "TRAAC, early exit + attention",
        ),
    ),
    "compare": (
        ("format and length rewards", "CR", "CR+LR"),
        ("dynamic sampling, correctness reward alone", "CR", "CR, dynamic sampling"),
        ("dynamic sampling with format and length rewards", "CR+LR", "CR+LR, dynamic sampling"),
        ("dynamic sampling with TRAAC", "TRAAC", "TRAAC, dynamic sampling"),
        ("compression with difficulty", "CR+LR", "TRAAC"),
        ("DLER's optimiser, TRAAC's reward", "TRAAC", "TRAAC, DLER optimiser"),
        ("TRAAC under DLER's optimiser against CR+LR", "CR+LR", "TRAAC, DLER optimiser"),
        ("TRAAC with answer-only copies against CR+LR", "CR+LR", "TRAAC, answer-only copies"),
        ("difficulty-aware truncation", "DLER", "DLER, difficulty-aware"),
        ("step entropy in the probe's place", "TRAAC", "TRAAC, step-entropy scorer"),
        (
            "copies' think blocks masked, step-entropy scorer",
            "TRAAC, step-entropy scorer",
            "TRAAC, step entropy, answer-only copies",
        ),
        *ISOLATING_CONTRASTS,
    ),
}
TITLES = {"ablations": "Ablations", "compare": "TRAAC and its peers"}


@dataclass(frozen=True)
class Run:
    """One (variant, seed): its recipe and the store directory it trains and evaluates in."""

    variant: str
    seed: int
    recipe: Recipe
    directory: Path
    fields: Mapping[str, Any]  # the variant's own fields, scaled to the recipe


@dataclass(frozen=True)
class ExperimentSettings:
    name: str
    output: Path
    runs: Path
    recipe: Path = Path("recipes/testbed.yaml")
    quick: bool = False
    variants: tuple[str, ...] = ()
    seeds: tuple[int, ...] = DEFAULT_SEEDS
    held_out: HeldOut = field(default_factory=HeldOut)
    train_overrides: dict[str, Any] = field(default_factory=dict)
    model: str = "testbed"  # the base model every variant starts from: a name or a path
    continue_from: Path | None = None  # a recipe whose runs these continue (continuation.py)

    @classmethod
    def make(
        cls,
        name: str,
        output: Path,
        recipe: Path,
        quick: bool,
        variants: Sequence[str] | None = None,
        seeds: Sequence[int] | None = None,
        runs: Path | None = None,
        held_out_per_tier: int | None = None,
        continue_from: Path | None = None,
    ) -> ExperimentSettings:
        """The full study, or with `quick` a smoke test of every stage (two steps on eight
        problems, ten held-out problems per tier). The base model is the recipe's
        `model_name_or_path` (`testbed-quick` for the testbed under `quick`)."""
        check_variants(name, variants, seeds, held_out_per_tier)
        table = EXPERIMENTS[name]
        seeds = tuple(DEFAULT_SEEDS if seeds is None else seeds)
        held_out = HeldOut(10, 1, 160) if quick else HeldOut()
        if held_out_per_tier is not None:
            held_out = replace(held_out, per_tier=held_out_per_tier)
        check_recipe(recipe)
        if continue_from is not None:
            check_continuable(recipe, continue_from)
        model = str(yaml.safe_load(recipe.read_text()).get("model_name_or_path", "testbed"))
        return cls(
            name=name,
            output=output,
            runs=runs or output.parent / "runs",
            recipe=recipe,
            quick=quick,
            variants=tuple(variants or table),
            seeds=seeds,
            held_out=held_out,
            train_overrides=dict(QUICK_TRAINING) if quick else {},
            model="testbed-quick" if quick and model == "testbed" else model,
            continue_from=continue_from,
        )

    def plan(self) -> list[Run]:
        """Every (variant, seed) run, each configuration parsed now so that a bad field fails
        before any training."""
        text = self.recipe.read_text()
        _, shared = Recipe(self.recipe, self.train_overrides).parse(Path(self.model), self.runs)
        out = []
        for variant in self.variants:
            for seed in self.seeds:
                fields = variant_overrides(
                    EXPERIMENTS[self.name][variant], shared.max_completion_length
                )
                overrides = {**fields, **self.train_overrides, "seed": seed}
                recipe = Recipe(self.recipe, overrides)
                directory = self.runs / run_key(text, overrides, self.model)
                try:
                    recipe.parse(Path(self.model), directory / "model")
                except TraacError as err:
                    raise TraacError(f"{variant} (seed {seed}): {err}") from None
                out.append(Run(variant, seed, recipe, directory, fields))
        return out

    @property
    def title(self) -> str:
        """The report's title: the experiment and the model every variant starts from."""
        testbed = self.model in ("testbed", "testbed-quick")
        return f"{TITLES[self.name]} on {'the testbed' if testbed else self.model}"

    def continuations(self, runs: Sequence[Run]) -> list[Continuation]:
        """The runs to start from `continue_from`'s runs' checkpoints, checked before any work."""
        if self.continue_from is None:
            return []
        source = replace(self, recipe=self.continue_from, continue_from=None)
        ours, theirs = (Recipe(r, self.train_overrides).parse(Path(self.model), self.runs)[1]
                        for r in (self.recipe, self.continue_from))  # fmt: skip
        check_steps(self.continue_from, ours, theirs)
        sources = {(r.variant, r.seed): r.directory / "model" for r in source.plan()}
        return plan_continuations(
            [(f"{r.variant}, seed {r.seed}", r.directory / "model", sources[r.variant, r.seed])
             for r in runs],
            self.continue_from,
        )  # fmt: skip

    def eval_dir(self, directory: Path) -> Path:
        h = self.held_out
        return directory / f"eval-{h.per_tier}x{h.num_samples}-{h.max_new_tokens}t-{h.seed}"


def _dir_name(model: str) -> str:
    """A model name or path as one directory name."""
    return model.strip("/").replace("/", "--")


def run_key(recipe_text: str, overrides: Mapping[str, Any], base: str) -> str:
    """The store directory of a run: its mode, seed and a digest of what it depends on (the
    recipe's text, every override, the base model), so equal runs share one directory."""
    blob = json.dumps(
        {"recipe": recipe_text, "overrides": dict(overrides), "base": base},
        sort_keys=True,
        default=str,
    )
    digest = hashlib.sha256(blob.encode()).hexdigest()[:12]
    return f"{overrides.get('mode', 'recipe')}-seed{overrides.get('seed', 0)}-{digest}"


@dataclass(frozen=True)
class Stat:
    """Mean and standard error over seeds (None with one seed)."""

    mean: float
    se: float | None

    @classmethod
    def of(cls, values: Sequence[float]) -> Stat:
        se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else None
        return cls(statistics.fmean(values), se)

    def cell(self, sign: bool = False) -> str:
        mean = signed(self.mean) if sign else fmt(self.mean)
        return mean if self.se is None else f"{mean} ± {fmt(self.se)}"


@dataclass(frozen=True)
class VariantResult:
    """One variant over its seeds: accuracy and length per tier, AUC_OAA (overall)."""

    seeds: tuple[int, ...]
    accuracy: dict[str, Stat]
    length: dict[str, Stat]
    auc_oaa: Stat

    @classmethod
    def of(cls, summaries: Mapping[int, EvalSummary]) -> VariantResult:
        return cls._over_seeds({seed: seed_numbers(s) for seed, s in summaries.items()})

    @classmethod
    def difference(
        cls, variant: Mapping[int, EvalSummary], baseline: Mapping[int, EvalSummary]
    ) -> VariantResult | None:
        """`variant` minus `baseline` seed by seed, over the seeds both have (None if none)."""
        seeds = [seed for seed in variant if seed in baseline]
        if not seeds:
            return None
        numbers = {}
        for seed in seeds:
            v, b = seed_numbers(variant[seed]), seed_numbers(baseline[seed])
            numbers[seed] = {key: v[key] - b[key] for key in v}
        return cls._over_seeds(numbers)

    @classmethod
    def _over_seeds(cls, numbers: Mapping[int, Mapping[str, float]]) -> VariantResult:
        def stat(key: str) -> Stat:
            return Stat.of([n[key] for n in numbers.values()])

        return cls(
            seeds=tuple(numbers),
            accuracy={t: stat(f"{t} Acc") for t in TIERS},
            length={t: stat(f"{t} Len") for t in TIERS},
            auc_oaa=stat("AUC_OAA"),
        )


def seed_numbers(summary: EvalSummary) -> dict[str, float]:
    """One evaluation's numbers by column name: Acc and Len per tier and overall, AUC_OAA."""
    rows = tier_rows(summary)
    acc = {f"{t} Acc": rows[t].accuracy for t in TIERS}
    return {**acc, **{f"{t} Len": rows[t].mean_length for t in TIERS},
            "AUC_OAA": summary.overall.auc_oaa}  # fmt: skip


@dataclass(frozen=True)
class Effect:
    """What one change does: `variant` minus `baseline`, paired by seed (`result`), and paired
    over the problems with the shared seeds' samples pooled (`pooled`: overall accuracy and
    length with 95% intervals that resample problems, not seeds; None without samples)."""

    change: str
    baseline: str
    variant: str
    result: VariantResult
    pooled: Comparison | None = None


@dataclass(frozen=True)
class ExperimentResult:
    table: Table
    results: dict[str, VariantResult]
    pareto_front: list[str]
    effects: list[Effect]
    effects_table: Table | None
    seconds: dict[str, dict[int, float | None]]  # variant -> seed -> wall seconds of the run
    files: list[Path]


def run_experiment(
    settings: ExperimentSettings, progress: Progress | None = None
) -> ExperimentResult:
    """Train and evaluate every (variant, seed), resuming what is done; write `<name>.md`,
    `<name>.json` and `<name>_pareto.png` into the output directory."""
    progress = progress or NullProgress()
    runs = settings.plan()
    continuations = settings.continuations(runs)
    output_dir(settings.output)  # writable, before any work
    output_dir(settings.runs, "--runs")  # and the store, before the base model's stage
    for continuation in continuations:
        continuation.seed()
    stages = Stages()
    with stages.stage(settings.model):
        base = Path(resolve_model(settings.model, progress))
    summaries: dict[str, dict[int, EvalSummary]] = {}
    with stages.stage("evaluate base"):
        base_dir = settings.eval_dir(settings.runs / f"base-{_dir_name(settings.model)}")
        summaries[BASE] = {0: settings.held_out.evaluate(base, base_dir, progress)}
    seconds: dict[str, dict[int, float | None]] = {}
    records: dict[str, dict[int, list[SampleRecord]]] = {}
    for run in runs:
        stage = f"{run.variant}, seed {run.seed}"
        trained_before = run.recipe.trained(run.directory / "model")
        try:
            with stages.stage(stage):
                model = run.recipe.train(base, run.directory / "model", progress)
                summary = settings.held_out.evaluate(
                    model, settings.eval_dir(run.directory), progress
                )
        except KeyboardInterrupt:  # the checkpoint is saved; so is the time this leg took
            if not trained_before:
                run_seconds(run.directory, stages.seconds[stage], finished=False)
            raise
        summaries.setdefault(run.variant, {})[run.seed] = summary
        samples = SamplesFile(settings.eval_dir(run.directory) / SAMPLES_FILE).read()
        records.setdefault(run.variant, {})[run.seed] = list(samples.values())
        took = None if trained_before else stages.seconds[stage]
        seconds.setdefault(run.variant, {})[run.seed] = run_seconds(run.directory, took)
    results = {name: VariantResult.of(s) for name, s in summaries.items()}
    front = pareto_front({name: (r.accuracy["overall"].mean, r.length["overall"].mean)
                          for name, r in results.items()})  # fmt: skip
    table = experiment_table(results, settings.title)
    effects = paired_effects(CONTRASTS[settings.name], summaries, records)
    effects_table = effects_table_of(effects) if effects else None
    result = ExperimentResult(table, results, front, effects, effects_table, seconds, [])
    result.files.extend(write_report(settings, runs, result, stages.seconds))
    return result


def run_seconds(directory: Path, took: float | None, finished: bool = True) -> float | None:
    """The wall seconds of training and evaluating a run, recorded in the run's directory: when
    this invocation worked on it, `took` plus the legs of earlier invocations that were stopped
    (recorded unfinished); else what was recorded (None if nothing was). A report of reused or
    resumed runs so still says what each cost in all."""
    path = directory / RUN_SECONDS
    try:
        record = json.loads(path.read_text())
        recorded, done = float(record["seconds"]), bool(record.get("finished", True))
    except (OSError, ValueError, KeyError, TypeError):
        recorded, done = None, True  # a damaged record costs only the time line, never the report
    if took is None:
        return recorded
    earlier = recorded if recorded is not None and not done else 0.0
    total = round(earlier + took, 1)
    output_dir(directory)  # stopped before training made it: the time spent still counts
    write_text(path, json.dumps({"seconds": total, "finished": finished}) + "\n", "run time")
    return total


def paired_effects(
    contrasts: Sequence[tuple[str, str, str]],
    summaries: Mapping[str, Mapping[int, EvalSummary]],
    records: Mapping[str, Mapping[int, Sequence[SampleRecord]]] | None = None,
) -> list[Effect]:
    """Each contrast whose two variants ran with a seed in common, as an `Effect`; with the
    runs' sample `records` (variant -> seed -> records), also paired over problems."""
    effects = []
    for change, baseline, variant in contrasts:
        if baseline in summaries and variant in summaries:
            result = VariantResult.difference(summaries[variant], summaries[baseline])
            if result is not None:
                pooled = pooled_comparison(records or {}, variant, baseline, result.seeds)
                effects.append(Effect(change, baseline, variant, result, pooled))
    return effects


def pooled_comparison(
    records: Mapping[str, Mapping[int, Sequence[SampleRecord]]],
    variant: str,
    baseline: str,
    seeds: Sequence[int],
) -> Comparison | None:
    """`variant` against `baseline` over the problems both answered, each side's samples of
    `seeds` pooled (k samples a problem and seed: k x seeds a problem). Pooling seeds averages
    their noise on each problem; the interval still resamples problems only, so the spread
    between seeds is what the by-seed effect shows."""

    def pool(name: str) -> list[SampleRecord]:
        return [r for seed in seeds for r in records.get(name, {}).get(seed, ())]

    return compare(pool(variant), pool(baseline))


def pareto_front(points: Mapping[str, tuple[float, float]]) -> list[str]:
    """The names no other point beats: none as accurate or more and as short or shorter,
    better on one of the two."""

    def beats(a: tuple[float, float], b: tuple[float, float]) -> bool:
        return a[0] >= b[0] and a[1] <= b[1] and a != b

    return [n for n, p in points.items() if not any(beats(q, p) for q in points.values())]


def experiment_table(results: Mapping[str, VariantResult], title: str) -> Table:
    """One row per variant: Acc and Len per tier and overall, AUC_OAA, mean ± s.e. over seeds."""
    table = Table(["variant", "seeds", *tier_columns(TIERS), "AUC_OAA"], title=title)
    for name, r in results.items():
        table.add(name, str(len(r.seeds)), *result_cells(r))
    return table


def effects_table_of(effects: Sequence[Effect]) -> Table:
    """One row per change: the variant minus its baseline, mean ± s.e. of the paired
    differences (accuracy and AUC_OAA in points, length in tokens)."""
    table = Table(
        ["change", "variant − baseline", "seeds", *tier_columns(TIERS), "AUC_OAA",
         "overall Δ Acc, problems paired [95%]", "overall Δ Len [95%]"],
        title="Effects: variant minus baseline, paired by seed and over problems",
        left=frozenset({0, 1}),
    )  # fmt: skip
    for e in effects:
        r, c = e.result, e.pooled
        pooled = ("–", "–") if c is None else (c.accuracy.cell(2), c.response_tokens.cell(1))
        table.add(e.change, f"{e.variant} − {e.baseline}", str(len(r.seeds)),
                  *result_cells(r, sign=True), *pooled)  # fmt: skip
    return table


def result_cells(r: VariantResult, sign: bool = False) -> list[str]:
    cells = [c for t in TIERS for c in (r.accuracy[t].cell(sign), r.length[t].cell(sign))]
    return [*cells, r.auc_oaa.cell(sign)]


def write_report(
    settings: ExperimentSettings,
    runs: Sequence[Run],
    result: ExperimentResult,
    seconds: Mapping[str, float],
) -> list[Path]:
    """`<name>.md` (the table, the front, the plot, the effects, the time), `<name>.json`
    (every number and run directory, for tools) and `<name>_pareto.png`; returns their paths."""
    out = settings.output
    out.mkdir(parents=True, exist_ok=True)
    plot = pareto_plot(
        {
            name: {t: (r.length[t].mean, r.length[t].se, r.accuracy[t].mean, r.accuracy[t].se)
                   for t in TIERS}
            for name, r in result.results.items()
        },
        out / f"{settings.name}_pareto.png",
        title=f"{settings.title}: accuracy against length (mean ± s.e. over seeds)",
    )  # fmt: skip
    total = sum(seconds.values())
    held = settings.held_out
    md = (
        f"# {settings.title}\n\n"
        f"Recipe `{settings.recipe}`{' (--quick)' if settings.quick else ''}"
        f"{f', runs continued from `{settings.continue_from}`' if settings.continue_from else ''}"
        ", seeds "
        f"{', '.join(map(str, settings.seeds))}; held-out problems `{held.dataset}`, "
        f"{held.num_samples} sample(s) each, at most {held.max_new_tokens} tokens. Cells: mean "
        "± standard error over seeds (the base model is evaluated once). Length in tokens; "
        "AUC_OAA overall, in percent.\n\n"
        f"{result.table.markdown()}\n\n"
        f"Pareto front (overall accuracy against length): {', '.join(result.pareto_front)}.\n\n"
        f"![Pareto plot]({plot.name})\n\n"
        f"{effects_markdown(result.effects_table)}"
        f"{compression_markdown(runs)}"
        f"{seconds_markdown(result.seconds)}"
        f"Time of this invocation (runs found in the store are reused and take about 0 s): "
        f"{total:.0f} s ({', '.join(f'{k} {v:.0f} s' for k, v in seconds.items())})\n"
    )
    md_path = out / f"{settings.name}.md"
    md_path.write_text(md)
    data = {
        "experiment": settings.name,
        "recipe": str(settings.recipe),
        "quick": settings.quick,
        "seeds": list(settings.seeds),
        "held_out": asdict(held),
        "variants": {
            name: {
                "overrides": next((dict(r.fields) for r in runs if r.variant == name), {}),
                "runs": {str(run.seed): str(run.directory) for run in runs if run.variant == name},
                "seconds": {str(k): v for k, v in result.seconds.get(name, {}).items()},
                **asdict(r),
            }
            for name, r in result.results.items()
        },
        "pareto_front": list(result.pareto_front),
        "effects": [asdict(e) for e in result.effects],
        "stage_seconds": dict(seconds),
    }
    path = out / f"{settings.name}.json"
    path.write_text(json.dumps(data, indent=2) + "\n")
    return [md_path, path, plot]


def compression_markdown(runs: Sequence[Run]) -> str:
    """What the probe removed during training, per difficulty bin, for each run that compressed
    anything (read from its `metrics.jsonl`)."""
    tables = []
    for run in runs:
        bins = training_compression(run.directory / "model" / METRICS_FILE)
        if any(b.compressed_frac for b in bins.values()):
            tables.append(
                f"{run.variant}, seed {run.seed}:\n\n{compression_table(bins).markdown()}"
            )
    if not tables:
        return ""
    return (
        "## Compression during training\n\n"
        "Per difficulty bin, means over the training steps: the share of the pooled group that "
        "is compressed copies, steps and tokens removed per compressed rollout and, on the "
        "testbed's problems, the steps of each kind evicted per compressed rollout and the share "
        "of the candidates' computation steps evicted (docs/telemetry.md).\n\n"
        + "\n\n".join(tables)
        + "\n\n"
    )


def seconds_markdown(seconds: Mapping[str, Mapping[int, float | None]]) -> str:
    """Each variant's runs' wall seconds by seed, as recorded when they were trained."""
    if not seconds:
        return ""
    cells = [
        f"{variant} {' / '.join('–' if s is None else f'{s:.0f}' for s in by_seed.values())}"
        for variant, by_seed in seconds.items()
    ]
    return (
        "Wall seconds of each run, training and evaluation, seed by seed as recorded when it "
        "was trained (– where not recorded); what else ran on the machine then changes them: "
        f"{'; '.join(cells)}.\n\n"
    )


def effects_markdown(table: Table | None) -> str:
    if table is None:
        return ""
    return (
        "## Effects, paired by seed and over problems\n\n"
        "Each row is one change: the variant minus its baseline, seed by seed (both runs of a "
        "pair start from the same model with the same seed), as mean ± standard error of those "
        "differences. Accuracy and AUC_OAA in points, length in tokens. The last two columns "
        "pair the held-out problems instead: each problem's mean over the samples of every "
        "shared seed, variant minus baseline, averaged over the problems, with a 95% bootstrap "
        "interval that resamples problems (not seeds; * where it excludes 0).\n\n"
        f"{table.markdown()}\n\n"
    )
