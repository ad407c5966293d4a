"""An experiment's numbers and how they read: each variant over its seeds, each contrast's
effect, and the tables the report, the console and the kept records print.

An effect is the variant minus its baseline, seed by seed: both runs of a seed start from the
same model with the same seed, so what varies with the seed alone cancels in their difference.
Its interval is seed-level (Student's t over the per-seed effects,
`traac.evaluation.harness.seeds`), and only that interval earns a `*`. Beside it, the held-out
problems paired with the seeds' samples pooled give a problem bootstrap with the trained
models held fixed (`pooled_comparison`): labelled as such, in a table of its own, never starred.
What each contrast's seeds resolve (90% interval, Holm-adjusted p, each seed left out, the
minimum detectable effect, the TOST at the study's stated margin, a verdict word) is
`bounds_table`'s, over `traac.evaluation.harness.seeds.Bounds`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from traac.common.tables import Table, fmt, signed
from traac.errors import TraacError
from traac.evaluation.harness.paired import Comparison, compare
from traac.evaluation.harness.results import TIER_ORDER, EvalSummary, SampleRecord
from traac.evaluation.harness.seeds import ALPHA, POWER, Bounds, SeedInterval, holm
from traac.pipelines.stages import tier_columns, tier_rows

TIERS = (*TIER_ORDER, "overall")
UNDERTHINKING = "underthinking"  # seed_numbers' key, where the summary has it
STUDY = "study.yaml"  # beside a study's recipe: what it states before its runs (its `margin`)


def stated_margin(directory: Path) -> float | None:
    """The equivalence margin, in accuracy points, that the study in `directory` states in its
    `study.yaml` (`margin: 3`); None where it states none, and then no equivalence is tested."""
    path = directory / STUDY
    if not path.is_file():
        return None
    try:
        margin = (yaml.safe_load(path.read_text()) or {}).get("margin")
    except (yaml.YAMLError, AttributeError):
        margin = "unreadable"
    if margin is None:
        return None
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or margin <= 0:
        raise TraacError(f"margin: {path} gives {margin!r}; give a positive number of accuracy "
                         "points (margin: 3) or no margin")  # fmt: skip
    return float(margin)


@dataclass(frozen=True)
class Stat:
    """Mean and standard error over seeds (None with one seed), and the values themselves."""

    mean: float
    se: float | None
    values: tuple[float, ...] = field(default=(), compare=False, repr=False)

    @classmethod
    def of(cls, values: Sequence[float]) -> Stat:
        se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else None
        return cls(statistics.fmean(values), se, tuple(values))

    def cell(self, sign: bool = False) -> str:
        mean = signed(self.mean) if sign else fmt(self.mean)
        return mean if self.se is None else f"{mean} ± {fmt(self.se)}"

    @property
    def interval(self) -> SeedInterval:
        """The values as per-seed effects: their mean and seed-level 95% interval."""
        return SeedInterval.of(self.values)


@dataclass(frozen=True)
class VariantResult:
    """One variant over its seeds: accuracy and length per tier, AUC_OAA and underthinking
    (overall; None unless every seed's summary has it)."""

    seeds: tuple[int, ...]
    accuracy: dict[str, Stat]
    length: dict[str, Stat]
    auc_oaa: Stat
    underthinking: Stat | None = None

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
            numbers[seed] = {key: v[key] - b[key] for key in v if key in b}
        return cls._over_seeds(numbers)

    @classmethod
    def _over_seeds(cls, numbers: Mapping[int, Mapping[str, float]]) -> VariantResult:
        def stat(key: str) -> Stat:
            return Stat.of([n[key] for n in numbers.values()])

        under = all(UNDERTHINKING in n for n in numbers.values())
        return cls(
            seeds=tuple(numbers),
            accuracy={t: stat(f"{t} Acc") for t in TIERS},
            length={t: stat(f"{t} Len") for t in TIERS},
            auc_oaa=stat("AUC_OAA"),
            underthinking=stat(UNDERTHINKING) if under else None,
        )


def seed_numbers(summary: EvalSummary) -> dict[str, float]:
    """One evaluation's numbers by column name: Acc and Len per tier and overall, AUC_OAA, and
    underthinking where the summary has it."""
    rows = tier_rows(summary)
    acc = {f"{t} Acc": rows[t].accuracy for t in TIERS}
    numbers = {**acc, **{f"{t} Len": rows[t].mean_length for t in TIERS},
               "AUC_OAA": summary.overall.auc_oaa}  # fmt: skip
    over = summary.overthinking
    if over is not None and over.underthinking is not None:
        numbers[UNDERTHINKING] = over.underthinking
    return numbers


@dataclass(frozen=True)
class Effect:
    """What one change does: `variant` minus `baseline`, paired by seed (`result`: its stats'
    values are the per-seed effects, their `interval` seed-level), and paired over the problems
    with the shared seeds' samples pooled (`pooled`: a problem bootstrap with the models fixed;
    None without samples)."""

    change: str
    baseline: str
    variant: str
    result: VariantResult
    pooled: Comparison | None = None


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
    between seeds is what the seed-level interval shows."""

    def pool(name: str) -> list[SampleRecord]:
        return [r for seed in seeds for r in records.get(name, {}).get(seed, ())]

    return compare(pool(variant), pool(baseline))


def pareto_front(points: Mapping[str, tuple[float, float]]) -> list[str]:
    """The names no other point beats: none as accurate or more and as short or shorter,
    better on one of the two."""

    def beats(a: tuple[float, float], b: tuple[float, float]) -> bool:
        return a[0] >= b[0] and a[1] <= b[1] and a != b

    return [n for n, p in points.items() if not any(beats(q, p) for q in points.values())]


# ---------------------------------------------------------------------------------- tables


def experiment_table(results: Mapping[str, VariantResult], title: str) -> Table:
    """One row per variant: Acc and Len per tier and overall, AUC_OAA and underthinking,
    mean ± s.e. over seeds."""
    table = Table(["variant", "seeds", *tier_columns(TIERS), "AUC_OAA", "underthinking (%)"],
                  title=title)  # fmt: skip
    for name, r in results.items():
        under = "–" if r.underthinking is None else r.underthinking.cell()
        table.add(name, str(len(r.seeds)), *result_cells(r), under)
    return table


def effects_table_of(effects: Sequence[Effect]) -> Table:
    """One row per change: the per-seed effects on overall accuracy and length, their mean with
    a seed-level 95% interval (`*` where it excludes 0), the same for AUC_OAA and underthinking."""
    table = Table(
        ["variant − baseline", "seeds", "Δ Acc by seed", "Δ Acc [95%, seeds]", "Δ Len by seed",
         "Δ Len [95%, seeds]", "Δ AUC_OAA [95%, seeds]", "Δ underthinking [95%, seeds]"],
        title="Effects: variant minus baseline, paired by seed; intervals over seeds",
    )  # fmt: skip
    for e in effects:
        r = e.result
        acc, length = r.accuracy["overall"].interval, r.length["overall"].interval
        under = "–" if r.underthinking is None else r.underthinking.interval.cell(2)
        table.add(f"{e.variant} − {e.baseline}", str(len(r.seeds)), acc.by_seed(2), acc.cell(2),
                  length.by_seed(1), length.cell(1), r.auc_oaa.interval.cell(2),
                  under)  # fmt: skip
    return table


def effect_bounds(effects: Sequence[Effect], margin: float | None) -> list[Bounds]:
    """Each effect's overall accuracy bounds, Holm's adjustment taken across all `effects`."""
    intervals = [e.result.accuracy["overall"].interval for e in effects]
    return [
        Bounds(i, p, margin) for i, p in zip(intervals, holm([i.p for i in intervals]), strict=True)
    ]


def bounds_table(effects: Sequence[Effect], margin: float | None) -> Table:
    """One row per change, on overall accuracy: the seed-level 90% interval, the p of "no
    effect" and its Holm adjustment across the table's changes, the lowest and highest mean with
    one seed left out, the minimum detectable effect at 80% power, the TOST's p at the study's
    `margin` (no column without one) and the verdict those numbers give."""
    tost = [] if margin is None else [f"TOST p, ±{margin:g}"]
    table = Table(
        ["variant − baseline", "Δ Acc [90%, seeds]", "p → Holm", "leaving one seed out",
         f"MDE, {POWER:.0%} power", *tost, "verdict"],
        title=(f"What the seeds resolve, accuracy in points: Holm across these {len(effects)} "
               f"changes, tests at {ALPHA:g}, "
               + ("no equivalence margin stated" if margin is None
                  else f"equivalence margin ±{margin:g} stated by the study")),
        left=frozenset({0, 5 + len(tost)}),
    )  # fmt: skip
    for e, b in zip(effects, effect_bounds(effects, margin), strict=True):
        i = b.interval
        ninety, drop = i.at(1 - 2 * ALPHA), i.leave_one_out()
        p = "–" if i.p is None or b.p_holm is None else f"{i.p:.3f} → {b.p_holm:.3f}"
        cells = [
            f"{e.variant} − {e.baseline}",
            "–"
            if ninety is None
            else f"{signed(i.mean, 2)} [{signed(ninety[0], 2)}, {signed(ninety[1], 2)}]",
            p,
            "–" if drop is None else f"{signed(drop[0], 2)} to {signed(drop[1], 2)}",
            fmt(i.mde(), 2),
            *([] if margin is None else [fmt(b.tost, 3)]),
            b.verdict(),
        ]
        table.add(*cells)
    return table


def within_model_table(effects: Sequence[Effect]) -> Table:
    """One row per change: the problem bootstrap with the seeds' samples pooled, the trained
    models held fixed: how these models differ on these problems, not what the change does
    (never starred; the seed-level tables say that)."""
    table = Table(
        ["variant − baseline", "Δ Acc [95%, problems]", "Δ Len [95%, problems]"],
        title="Within model: problem bootstrap, trained models held fixed (not the change's "
        "effect)",
    )
    for e in effects:
        c = e.pooled
        if c is not None:
            table.add(f"{e.variant} − {e.baseline}", c.accuracy.cell(2, mark=False),
                      c.response_tokens.cell(1, mark=False))  # fmt: skip
    return table


def effects_tables(effects: Sequence[Effect], margin: float | None) -> list[Table]:
    """The effects, what their seeds resolve, and the within-model bootstrap where samples
    were paired; none without effects."""
    if not effects:
        return []
    within = within_model_table(effects)
    return [
        effects_table_of(effects),
        bounds_table(effects, margin),
        *([within] if within.rows else []),
    ]


def tier_effects_table(effects: Sequence[Effect]) -> Table:
    """One row per change: mean ± s.e. over seeds of the paired differences per tier
    (accuracy and AUC_OAA in points, length in tokens)."""
    table = Table(
        ["change", "variant − baseline", "seeds", *tier_columns(TIERS), "AUC_OAA"],
        title="Effects by tier: mean ± standard error over seeds of the paired differences",
        left=frozenset({0, 1}),
    )  # fmt: skip
    for e in effects:
        table.add(e.change, f"{e.variant} − {e.baseline}", str(len(e.result.seeds)),
                  *result_cells(e.result, sign=True))  # fmt: skip
    return table


def result_cells(r: VariantResult, sign: bool = False) -> list[str]:
    cells = [c for t in TIERS for c in (r.accuracy[t].cell(sign), r.length[t].cell(sign))]
    return [*cells, r.auc_oaa.cell(sign)]


def effects_markdown(effects: Sequence[Effect], margin: float | None) -> str:
    """The effects tables with what their cells mean."""
    if not effects:
        return ""
    tables = "\n\n".join(t.markdown() for t in effects_tables(effects, margin))
    return (
        "## Effects, paired by seed\n\n"
        "Each row is one change: the variant minus its baseline, seed by seed (both runs of a "
        "seed start from the same model with the same seed). Accuracy, AUC_OAA and "
        "underthinking in points, length in tokens. Each seed's effect is listed; the "
        "interval is Student's t over those per-seed effects (95%, S - 1 degrees of freedom; "
        "none with one seed), and only it earns a * (it excludes 0). The second table says what "
        "the seeds resolve on accuracy: the 90% interval, the p of no effect and its Holm "
        "adjustment across the changes, the mean with each seed left out, the smallest effect "
        "the observed spread detects at 80% power, the equivalence test (TOST) at the margin "
        "the study states in its study.yaml (none without one), and the verdict they give. The "
        "last pairs the held-out problems instead, each problem's mean over the samples of "
        "every shared seed, with a 95% bootstrap that resamples problems and holds the trained "
        "models fixed: it ignores seed-to-seed variation and is never starred "
        "(docs/evaluation.md#seed-level).\n\n"
        f"{tables}\n\n"
        f"{tier_effects_table(effects).markdown()}\n\n"
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
