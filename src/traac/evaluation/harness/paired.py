"""Paired comparisons of two models on the problems both were evaluated on.

Each problem gives one difference: model A's mean over its samples minus model B's (accuracy
in points, response length in the run's unit). The reported change is the mean difference over
the shared problems, with a 95% percentile bootstrap interval that resamples problems (the
same problem for both models in every draw, `bootstrap_mean_ci`, seeded); a change whose
interval excludes 0 is marked. Pairing removes the problems' own difficulty from the noise,
so the interval is narrower than comparing two independent accuracies.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from traac.common.tables import Table, signed
from traac.evaluation.harness.metrics import CONFIDENCE, bootstrap_mean_ci
from traac.evaluation.harness.results import SampleRecord

MARK = "*"  # after a change whose interval excludes 0


@dataclass(frozen=True)
class PairedDiff:
    """Mean of A - B over `items` shared problems, and its interval (95% unless asked)."""

    items: int
    delta: float
    low: float
    high: float

    @property
    def significant(self) -> bool:
        """Does the interval exclude 0?"""
        return self.low > 0 or self.high < 0

    def cell(self, digits: int = 1, mark: bool = True) -> str:
        """`+1.46* [+0.20, +2.70]`; `mark` False where this interval is not the one that
        decides (a method comparison's is seed-level: `traac.evaluation.harness.seeds`)."""
        star = MARK if mark and self.significant else ""
        return (
            f"{signed(self.delta, digits)}{star} "
            f"[{signed(self.low, digits)}, {signed(self.high, digits)}]"
        )


def item_means(
    records: Sequence[SampleRecord], value: Callable[[SampleRecord], float]
) -> dict[str, float]:
    """Each problem's mean of `value` over its samples."""
    groups: dict[str, list[float]] = {}
    for r in records:
        groups.setdefault(r.id, []).append(value(r))
    return {k: statistics.fmean(v) for k, v in groups.items()}


def paired_diff(
    a: dict[str, float], b: dict[str, float], shared: Sequence[str], confidence: float = CONFIDENCE
) -> PairedDiff:
    """A - B over the `shared` problems (at least one), its interval at `confidence`."""
    diffs = [a[k] - b[k] for k in shared]
    low, high = bootstrap_mean_ci(diffs, confidence=confidence)
    return PairedDiff(len(shared), statistics.fmean(diffs), low, high)


@dataclass(frozen=True)
class Comparison:
    """Model A against model B on one dataset: accuracy (points), response and think length."""

    accuracy: PairedDiff
    response_tokens: PairedDiff
    think_tokens: PairedDiff
    base_response_tokens: float  # B's mean response length over the shared problems


def compare(a: Sequence[SampleRecord], b: Sequence[SampleRecord]) -> Comparison | None:
    """A against B on the problems both answered; None when they share none."""
    b_ids = {r.id for r in b}
    shared = list(dict.fromkeys(r.id for r in a if r.id in b_ids))
    if not shared:
        return None

    def diff(value: Callable[[SampleRecord], float]) -> PairedDiff:
        return paired_diff(item_means(a, value), item_means(b, value), shared)

    b_len = item_means(b, lambda r: r.response_tokens)
    return Comparison(
        accuracy=diff(lambda r: 100.0 * r.correct),
        response_tokens=diff(lambda r: r.response_tokens),
        think_tokens=diff(lambda r: r.think_tokens),
        base_response_tokens=statistics.fmean(b_len[k] for k in shared),
    )


def paired_table(rows: Sequence[tuple[str, str, str, Comparison]], unit: str) -> Table:
    """One row per (model, against, dataset): the changes with their intervals."""
    table = Table(
        ["Model", "against", "Dataset", "shared items", "Δ Acc (pts) [95% CI]",
         f"Δ Len ({unit}) [95% CI]", "Δ Len (%)", f"Δ Think ({unit}) [95% CI]"],
        left=frozenset({0, 1, 2}),
    )  # fmt: skip
    for model, against, dataset, c in rows:
        share = 100.0 * c.response_tokens.delta / c.base_response_tokens
        table.add(
            model, against, dataset, str(c.accuracy.items), c.accuracy.cell(2),
            c.response_tokens.cell(), signed(share, 1, "%") if c.base_response_tokens else "–",
            c.think_tokens.cell(),
        )  # fmt: skip
    return table
