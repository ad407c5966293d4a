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
output) under a key made of the parsed recipe (its mapping: a comment or a reordering changes
nothing), the overrides and the seed: the same run is trained once, whichever experiment asks
for it first, and a rerun keeps finished runs (and continues a checkpointed one). A store
written before the keys hashed the parsed recipe (they hashed its text), or before the TRAAC
variants named their full copies, is found under its old keys (`run_directory`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from traac.common.outputs import output_dir, write_text
from traac.common.progress import NullProgress, Progress
from traac.common.provenance import now, provenance, weights_sha256
from traac.common.tables import Table
from traac.data.testbed_problems import DATA_SOURCE
from traac.errors import TraacError
from traac.evaluation.harness.results import EvalSummary, SampleRecord
from traac.evaluation.harness.runner import SAMPLES_FILE
from traac.evaluation.harness.samples import SamplesFile
from traac.evaluation.reports.plots import pareto_plot
from traac.pipelines.continuation import (
    Continuation,
    check_steps,
    plan_continuations,
)
from traac.pipelines.experiment_results import (
    TIERS,
    Effect,
    VariantResult,
    effects_markdown,
    effects_tables,
    experiment_table,
    paired_effects,
    pareto_front,
    seconds_markdown,
    stated_margin,
)
from traac.pipelines.model_registry import resolve_model
from traac.pipelines.recipe import check_continuable, read_recipe
from traac.pipelines.stages import (
    QUICK_TRAINING,
    HeldOut,
    Recipe,
    Stages,
    compression_table,
    training_compression,
)
from traac.pipelines.train import check_recipe
from traac.pipelines.variants import (
    CONTRASTS,
    DEFAULT_SEEDS,
    EXPERIMENTS,
    PAPER_RESPONSE_CAP,
    TITLES,
    check_variants,
)
from traac.training.methods.registry import flat_form
from traac.training.methods.scale import PaperTokens, PerPaperToken
from traac.training.telemetry.metrics_file import METRICS_FILE

BASE = "Base"
RUN_SECONDS = "seconds.json"  # in a run's directory: what training and evaluating it took
PROVENANCE = "provenance.json"  # in a run's directory: each invocation that worked on it


def variant_overrides(fields: Mapping[str, Any], response_cap: int) -> dict[str, Any]:
    """A variant's fields (a method's block among them) with its paper-scale token constants
    scaled to `response_cap`."""
    scale = PAPER_RESPONSE_CAP / response_cap
    return {
        key: value.at(scale) if isinstance(value, PaperTokens | PerPaperToken)
        else variant_overrides(value, response_cap) if isinstance(value, Mapping) else value
        for key, value in fields.items()
    }  # fmt: skip


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
        eval_batching: str = "padded",
    ) -> ExperimentSettings:
        """The full study, or with `quick` a smoke test of every stage (two steps on eight
        problems, ten held-out problems per tier). The base model is the recipe's
        `model_name_or_path` (`testbed-quick` for the testbed under `quick`). `eval_batching`
        is `HeldOut.batching`."""
        check_variants(name, variants, seeds, held_out_per_tier)
        table = EXPERIMENTS[name]
        seeds = tuple(DEFAULT_SEEDS if seeds is None else seeds)
        held_out = HeldOut(10, 1, 160, t_max=160) if quick else HeldOut()
        held_out = replace(held_out, batching=eval_batching)
        if held_out_per_tier is not None:
            held_out = replace(held_out, per_tier=held_out_per_tier)
        check_recipe(recipe)
        if continue_from is not None:
            check_continuable(recipe, continue_from)
        fields = yaml.safe_load(recipe.read_text())
        model = str(fields.get("model_name_or_path", "testbed"))
        cap = fields.get("max_completion_length")
        held_out = held_out.for_recipe(str(fields.get("dataset", "")), cap)
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
        text, parsed = self.recipe.read_text(), read_recipe(self.recipe)
        _, shared = Recipe(self.recipe, self.train_overrides).parse(Path(self.model), self.runs)
        out = []
        for variant in self.variants:
            for seed in self.seeds:
                fields = variant_overrides(
                    EXPERIMENTS[self.name][variant], shared.max_completion_length
                )
                overrides = {**fields, **self.train_overrides, "seed": seed}
                recipe = Recipe(self.recipe, overrides)
                directory = run_directory(self.runs, parsed, text, overrides, self.model)
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

    @property
    def base_eval_dir(self) -> Path:
        """Where the base model is evaluated, once for every experiment on the store."""
        return self.eval_dir(self.runs / f"base-{_dir_name(self.model)}")

    def eval_dir(self, directory: Path, per_tier: int | None = None) -> Path:
        """A run's evaluation on the held-out problems (`per_tier` of them a tier: the
        settings' unless given); the testbed's directories keep their names. A refilled
        evaluation has its own (`-refill`): its floats differ with the batch's shape, so it
        never resumes, or stands in for, a padded one."""
        h = self.held_out if per_tier is None else replace(self.held_out, per_tier=per_tier)
        source = "" if h.source == DATA_SOURCE else f"{h.source}-"
        refill = "-refill" if h.batching == "refill" else ""
        name = f"eval-{source}{h.per_tier}x{h.num_samples}-{h.max_new_tokens}t-{h.seed}{refill}"
        return directory / name


def _dir_name(model: str) -> str:
    """A model name or path as one directory name."""
    return model.strip("/").replace("/", "--")


def run_key(recipe: Mapping[str, Any] | str, overrides: Mapping[str, Any], base: str) -> str:
    """The store directory of a run: its mode, seed and a digest of what it depends on (the
    parsed recipe, every override, the base model), so equal runs share one directory. The
    methods' blocks are hashed as their flat names from before the blocks (`flat_form`), so a
    run keeps its key. A recipe given as text is the old key's (`run_directory`)."""
    blob = json.dumps(
        {"recipe": recipe if isinstance(recipe, str) else flat_form(recipe),
         "overrides": flat_form(overrides), "base": base},
        sort_keys=True,
        default=str,
    )  # fmt: skip
    digest = hashlib.sha256(blob.encode()).hexdigest()[:12]
    return f"{overrides.get('mode', 'recipe')}-seed{overrides.get('seed', 0)}-{digest}"


def run_directory(
    runs: Path, recipe: Mapping[str, Any], text: str, overrides: Mapping[str, Any], base: str
) -> Path:
    """A run's directory in the store `runs`: under the parsed recipe's key, unless only an
    older key of the same run exists there (`run_keys`), whose run is then found, kept and
    continued where it is."""
    keys = [key for _, _, key in run_keys(recipe, text, overrides, base)]
    return next((runs / key for key in keys if (runs / key).is_dir()), runs / keys[0])


def run_keys(
    recipe: Mapping[str, Any], text: str, overrides: Mapping[str, Any], base: str
) -> list[tuple[str, dict[str, Any], str]]:
    """Every key a run may be stored under, the current one first, each with what it hashed:
    the recipe as `mapping` (parsed) or as `text` (a store trained before keys hashed the parsed
    recipe), and the overrides, for the paper's TRAAC and its variants also without their
    `copy_loss: full` (`_unnamed_copies`), in the flat form the keys hash. The key a run was found
    under says what it trained with (`traac records keep`, `traac records verify`)."""
    named = [flat_form(overrides), *_unnamed_copies(flat_form(recipe), flat_form(overrides))]
    forms = (("mapping", recipe), ("text", text))
    return [(form, o, run_key(r, o, base)) for o in named for form, r in forms]


def _unnamed_copies(recipe: Mapping[str, Any], overrides: Mapping[str, Any]) -> list[dict]:
    """A TRAAC variant's fields (in their flat form) as they were before the variants named the
    paper's full copies (when `preset: paper`, which fills them, was the default): the same run
    wherever the recipe leaves `copy_loss` unset or full."""
    given = recipe.get("copy_loss")
    if (overrides.get("mode"), overrides.get("copy_loss"), given) not in (
        ("traac", "full", None),
        ("traac", "full", "full"),
    ):
        return []
    return [{k: v for k, v in overrides.items() if k != "copy_loss"}]


@dataclass(frozen=True)
class ExperimentResult:
    table: Table
    results: dict[str, VariantResult]
    pareto_front: list[str]
    effects: list[Effect]
    effects_tables: list[Table]  # the effects, their bounds, the within-model bootstrap
    margin: float | None  # the equivalence margin the study states (study.yaml)
    seconds: dict[str, dict[int, float | None]]  # variant -> seed -> wall seconds of the run
    files: list[Path]


def run_experiment(
    settings: ExperimentSettings, progress: Progress | None = None
) -> ExperimentResult:
    """Train and evaluate every (variant, seed), resuming what is done; write `<name>.md`,
    `<name>.json` and `<name>_pareto.png` into the output directory."""
    progress = progress or NullProgress()
    margin = stated_margin(settings.recipe.parent)  # a study's mistake, before any training
    runs = settings.plan()
    continuations = settings.continuations(runs)
    output_dir(settings.output)  # writable, before any work
    output_dir(settings.runs, "--runs")  # and the store, before the base model's stage
    for continuation in continuations:
        continuation.seed()
    stages = Stages()
    with stages.stage(settings.model):
        base = Path(resolve_model(settings.model, progress))
        weights = weights_sha256(base)
    summaries: dict[str, dict[int, EvalSummary]] = {}
    base_dir = settings.base_eval_dir
    evaluated_before = (base_dir / "summary.json").is_file()
    if not evaluated_before:
        record_leg(base_dir, weights)
    with stages.stage("evaluate base"):
        summaries[BASE] = {0: settings.held_out.evaluate(base, base_dir, progress)}
    if not evaluated_before:
        end_leg(base_dir, stages.seconds["evaluate base"], finished=True)
    seconds: dict[str, dict[int, float | None]] = {}
    records: dict[str, dict[int, list[SampleRecord]]] = {}
    for run in runs:
        stage = f"{run.variant}, seed {run.seed}"
        trained_before = run.recipe.trained(run.directory / "model")
        if not trained_before:  # before any work: a leg killed outright is still on record
            record_leg(run.directory, weights)
        try:
            with stages.stage(stage):
                model = run.recipe.train(base, run.directory / "model", progress)
                summary = settings.held_out.evaluate(
                    model, settings.eval_dir(run.directory), progress
                )
        except KeyboardInterrupt:  # the checkpoint is saved; so is the time this leg took
            if not trained_before:
                run_seconds(run.directory, stages.seconds[stage], finished=False)
                end_leg(run.directory, stages.seconds[stage], finished=False)
            raise
        summaries.setdefault(run.variant, {})[run.seed] = summary
        samples = SamplesFile(settings.eval_dir(run.directory) / SAMPLES_FILE).read()
        records.setdefault(run.variant, {})[run.seed] = list(samples.values())
        took = None if trained_before else stages.seconds[stage]
        if took is not None:
            end_leg(run.directory, took, finished=True)
        seconds.setdefault(run.variant, {})[run.seed] = run_seconds(run.directory, took)
    results = {name: VariantResult.of(s) for name, s in summaries.items()}
    front = pareto_front({name: (r.accuracy["overall"].mean, r.length["overall"].mean)
                          for name, r in results.items()})  # fmt: skip
    table = experiment_table(results, settings.title)
    effects = paired_effects(CONTRASTS[settings.name], summaries, records)
    tables = effects_tables(effects, margin)
    result = ExperimentResult(table, results, front, effects, tables, margin, seconds, [])
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


def record_leg(directory: Path, weights: str) -> None:
    """Add this invocation's provenance (commit, versions, CPU, machine, command, start time)
    and the sha256 of the `weights` it starts from to the run's legs, as it starts on the run:
    a leg killed outright (a machine taken back) leaves no time in `seconds.json` and never
    ends, but what decides its weights stays on record."""
    legs = _legs(directory)
    leg = {**provenance(), "weights_sha256": weights}
    _write_legs(directory, [*legs, leg])


def end_leg(directory: Path, took: float, finished: bool) -> None:
    """Record that this invocation's leg (the last) ended: when, after how many seconds, and
    whether the run was finished; a run's `seconds` is the sum of its ended legs'."""
    legs = _legs(directory)
    if legs and "ended" not in legs[-1]:
        legs[-1] = {**legs[-1], "ended": now(), "seconds": round(took, 1), "finished": finished}
        _write_legs(directory, legs)


def _legs(directory: Path) -> list[dict[str, Any]]:
    try:
        return list(json.loads((directory / PROVENANCE).read_text())["legs"])
    except (OSError, ValueError, KeyError, TypeError):
        return []  # the first leg, or a damaged record: the legs from now on are still kept


def _write_legs(directory: Path, legs: list[dict[str, Any]]) -> None:
    output_dir(directory)
    write_text(directory / PROVENANCE, json.dumps({"legs": legs}, indent=1) + "\n", "provenance")


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
        f"AUC_OAA overall, in percent, at t_max = {held.t_max} tokens.\n\n"
        f"{result.table.markdown()}\n\n"
        f"Pareto front (overall accuracy against length): {', '.join(result.pareto_front)}.\n\n"
        f"![Pareto plot]({plot.name})\n\n"
        f"{effects_markdown(result.effects, result.margin)}"
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
