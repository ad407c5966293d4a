"""What the compressed copies did to their groups (docs/telemetry.md#copies): one record per
pooled rollout of every group that holds a copy, and the aggregate that tests the imitation
hypothesis (H1: a copy that lost a computation step still re-answers right, is the shortest right
answer of its group and so gets the top advantage; the policy then learns to skip computation).

Per record: whether it is a copy, the steps its compression evicted and how many of them were
computation steps (testbed problems, whose steps carry labels; None elsewhere), whether its
answer is right, its advantage (TRL's, as the loss reads it) and its rank in the group (1: the
highest advantage; ties share the best rank). The step writes the records into its line of
`metrics.jsonl` (`copy_groups`) and the per-step aggregate into TRL's metrics (`traac/copies/`);
`copies_table` sums a run's records (`traac copies RUN_DIR`).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from traac.common.tables import Table, fmt, signed
from traac.compression.compression import CompressionResult
from traac.training.telemetry.metrics_file import METRICS_FILE, metric_rows

COPY_GROUPS = "copy_groups"  # the key of a metrics line's records
PASS_RATE = "traac/all/pass_rate"  # the originals' share right, every mode's step logs it
# H1's prediction for the copies that lost a computation step (docs/telemetry.md#copies).
H1_CORRECT, H1_ADVANTAGE = 0.8, 1.0
KINDS = ("compute-evicted copies", "other copies", "their groups' originals")


@dataclass(frozen=True)
class PooledRecord:
    """One pooled rollout of a group that holds a compressed copy."""

    group: int
    bin: str
    copy: bool
    evicted: int  # steps the copy's compression evicted (0 for an original)
    compute_evicted: int | None  # computation steps among them; None: the steps carry no labels
    correct: bool
    advantage: float
    rank: int  # in its pooled group, 1 = the highest advantage

    @property
    def kind(self) -> str:
        """Which of `KINDS` it counts under."""
        if not self.copy:
            return KINDS[2]
        return KINDS[0] if self.compute_evicted else KINDS[1]


def compute_evicted(result: CompressionResult, kinds: Sequence[str]) -> int:
    """The computation steps (`kinds[i]` of step i, `traac.common.step_labels`) evicted."""
    steps = zip(result.steps, result.kept, kinds, strict=True)
    return sum(kind == "compute" and not keep and bool(step.text) for step, keep, kind in steps)


def advantage_ranks(advantages: Sequence[float]) -> list[int]:
    """Each advantage's rank in its group: 1 + how many are strictly higher."""
    return [1 + sum(b > a for b in advantages) for a in advantages]


@dataclass(frozen=True)
class KindStats:
    """The records of one kind: how many, the share right, mean advantage and rank, and the
    share at rank 1."""

    count: int
    correct: float | None
    advantage: float | None
    rank: float | None
    top: float | None

    @classmethod
    def of(cls, records: Sequence[PooledRecord]) -> KindStats:
        def mean(values: Iterable[float]) -> float | None:
            values = list(values)
            return statistics.fmean(values) if values else None

        return cls(
            len(records),
            mean(r.correct for r in records),
            mean(r.advantage for r in records),
            mean(r.rank for r in records),
            mean(r.rank == 1 for r in records),
        )


def by_kind(records: Sequence[PooledRecord]) -> dict[str, KindStats]:
    return {kind: KindStats.of([r for r in records if r.kind == kind]) for kind in KINDS}


def step_metrics(records: Sequence[PooledRecord]) -> dict[str, float]:
    """The per-step aggregate for TRL's metrics: `<kind>_<field>` under `traac/copies/`."""
    out: dict[str, float] = {}
    for key, stats in zip(("compute_evicted", "other", "originals"), by_kind(records).values(),
                          strict=True):  # fmt: skip
        out[f"{key}_count"] = float(stats.count)
        for name in ("correct", "advantage", "rank", "top"):
            value = getattr(stats, name)
            if value is not None:
                out[f"{key}_{name}"] = value
    return out


def to_json(records: Sequence[PooledRecord]) -> list[dict]:
    return [asdict(r) for r in records]


def read_records(metrics: Path) -> tuple[list[tuple[int, PooledRecord]], int]:
    """(step, record) for every record of a run's `metrics.jsonl`, and the run's last step."""
    out, last = [], 0
    for row in metric_rows(metrics):
        last = max(last, int(row["step"]))
        out += [(int(row["step"]), PooledRecord(**r)) for r in row.get(COPY_GROUPS, [])]
    return out, last


def h1_verdict(stats: KindStats) -> str:
    """H1's prediction on the compute-evicted copies: right >= 80%, mean advantage > +1."""
    if not stats.count:
        return "no copy lost a computation step: H1 untested"
    holds = stats.correct >= H1_CORRECT and stats.advantage > H1_ADVANTAGE  # type: ignore[operator]
    return (
        f"H1 {'holds' if holds else 'does not hold'}: compute-evicted copies right "
        f"{100 * stats.correct:.1f}% (H1: >= 80%), mean advantage {stats.advantage:+.2f} "  # type: ignore[operator]
        "(H1: > +1)"
    )


def copies_table(runs: dict[str, Path], every: int | None = None) -> tuple[Table, list[str]]:
    """Per run (name -> the run's output directory, holding `metrics.jsonl`) and kind, over all
    its steps or per `every` steps: the H1 table, and one verdict line per run."""
    columns = ["run", "steps", "kind", "rollouts", "right", "mean advantage", "mean rank",
               "rank 1"]  # fmt: skip
    table = Table(columns, title="Compressed copies and their groups", left=frozenset({0, 1, 2}))
    verdicts = []
    for name, directory in runs.items():
        records, last = read_records(directory / METRICS_FILE)
        if not records:
            verdicts.append(f"{name}: no step with a compressed copy in {directory}")
            continue
        size = every or last
        for start in range(0, last, size):
            span = [r for s, r in records if start < s <= start + size]
            if not span:
                continue
            for kind, stats in by_kind(span).items():
                table.add(name, f"{start + 1}-{min(start + size, last)}", kind,
                          *_cells(stats))  # fmt: skip
        verdicts.append(f"{name}: {h1_verdict(by_kind([r for _, r in records])[KINDS[0]])}")
    return table, verdicts


def pass_rate_table(runs: dict[str, Path], every: int | None = None) -> Table:
    """Per run and span of `every` steps (default: the whole run), the mean share of the sampled
    rollouts (the originals, before any copy) that were right: whether the policy got better or
    worse at the task while it learned to be short, for any mode, CR+LR included."""
    table = Table(["run", "steps", "originals' pass rate"], title="Originals' pass rate",
                  left=frozenset({0, 1}))  # fmt: skip
    for name, directory in runs.items():
        rates = {int(row["step"]): float(row[PASS_RATE])
                 for row in metric_rows(directory / METRICS_FILE)
                 if row.get(PASS_RATE) is not None}  # fmt: skip
        last = max(rates, default=0)
        size = every or max(last, 1)
        for start in range(0, last, size):
            span = [rate for step, rate in rates.items() if start < step <= start + size]
            if span:
                table.add(name, f"{start + 1}-{min(start + size, last)}",
                          fmt(100 * statistics.fmean(span), 1, "%"))  # fmt: skip
    return table


def _cells(stats: KindStats) -> list[str]:
    def percent(value: float | None) -> str:
        return fmt(None if value is None else 100 * value, 1, "%")

    return [str(stats.count), percent(stats.correct), signed(stats.advantage, 2),
            fmt(stats.rank, 2), percent(stats.top)]  # fmt: skip
