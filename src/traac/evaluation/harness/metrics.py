"""The accuracy numbers reasoning models are compared by now, from the samples of each problem:
avg@k with a 95% interval, pass@k, maj@k, and lengths split by right and wrong answers (the
paper's OAA, AUC_OAA and OTB F1 are `traac.evaluation.harness.paper_metrics`, which imports
neither numpy nor scipy, for the commands' options).

Definitions (those of lighteval's `AvgAtN`, `PassAtK` and `MajAtN`, checked against them):

- avg@k: each problem's share of right samples, averaged over problems (with k samples of
  every problem this is the accuracy over all samples);
- its 95% interval: a percentile bootstrap over problems (problems drawn with replacement,
  `BOOTSTRAP_DRAWS` draws from a generator seeded with `BOOTSTRAP_SEED`, so a re-report gives
  the same interval);
- pass@k: the unbiased estimator of Chen et al. (2021), 1 - C(n - c, k) / C(n, k) for a
  problem with c right samples of n, averaged over problems, for k up to the smallest n;
- G-Pass@k_tau (Liu et al. 2024, "Are Your LLMs Capable of Stable Reasoning?"; lighteval's
  `GPassAtK`): the chance that at least m = max(ceil(k tau), 1) of k samples drawn without
  replacement from n, c of them right, are right, the hypergeometric tail
  sum_{j >= m} C(c, j) C(n - c, k - j) / C(n, k) (lighteval: `hypergeom.sf(m - 1, n, c, k)`,
  here in exact integers), 0 where m > min(c, k); for tau in `G_PASS_TAUS`, averaged over
  problems. tau 0 gives m = 1, which is pass@k;
- mG-Pass@k: (2 / k) times the sum over i from ceil(k / 2) + 1 to k of the tail at m = i, the
  area under G-Pass@k_tau for tau in (0.5, 1]; as in lighteval, mG-Pass@1 is 0 (an empty sum);
- maj@k: the most frequent answer among a problem's first k samples (by sample index), right
  when the samples that gave it are. Each sample's `vote` names its answer: the group the
  item's verifier puts it in (`traac.verification.votes`: `\\frac{1}{2}`, `1/2` and `0.5` are
  one answer), or, for records scored without the items, the extracted answer string with runs
  of whitespace collapsed. A sample with no answer (None) casts no vote; a problem none of
  whose first k samples votes scores 0. A tie goes to the tied answer given first (lowest
  sample index), as `max(answers, key=answers.count)` picks it in lighteval. Here traac departs
  from lighteval's `MajAtN` on purpose: lighteval compares normalised strings, so two
  spellings of one value split its vote, and an empty answer votes.

Everything here reads plain columns; `sampling_stats` takes the records of one group.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.stats import hypergeom

from traac.common.tables import Table, fmt
from traac.errors import TraacError

BOOTSTRAP_DRAWS = 2000
BOOTSTRAP_SEED = 0
CONFIDENCE = 0.95


def pass_at_k(n: int, c: int, k: int) -> float:
    """Chance that at least one of k samples drawn without replacement from n, c of them right,
    is right: 1 - C(n - c, k) / C(n, k) (Chen et al. 2021), as a product for stability."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise TraacError(f"pass@k: need 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / m for m in range(n - c + 1, n + 1))


G_PASS_TAUS = (0.0, 0.25, 0.5, 0.75, 1.0)  # lighteval's thresholds


@functools.cache  # a report asks the same few (n, c, k, m) for every problem of every run
def _at_least(n: int, c: int, k: int, m: int) -> float:
    """P(at least m right among k of n drawn without replacement, c right): scipy's
    hypergeometric tail, as lighteval computes it; 0 where m > min(c, k), as its guard has it."""
    if m > min(c, k):
        return 0.0
    return float(hypergeom.sf(m - 1, n, c, k))


def g_pass_at_k(n: int, c: int, k: int, tau: float) -> float:
    """G-Pass@k_tau of one problem: at least max(ceil(k tau), 1) of k draws right."""
    if not 0 <= c <= n or not 1 <= k <= n or not 0.0 <= tau <= 1.0:
        raise TraacError(f"G-Pass@k: need 0 <= c <= n, 1 <= k <= n, 0 <= tau <= 1, got "
                         f"n={n} c={c} k={k} tau={tau}")  # fmt: skip
    return _at_least(n, c, k, max(math.ceil(k * tau), 1))


def mg_pass_at_k(n: int, c: int, k: int) -> float:
    """mG-Pass@k of one problem: (2 / k) * sum over i in (ceil(k / 2), k] of the tail at i."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise TraacError(f"mG-Pass@k: need 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    return 2.0 / k * sum(_at_least(n, c, k, i) for i in range(math.ceil(k / 2) + 1, k + 1))


def default_ks(n: int) -> list[int]:
    """The k reported for n samples a problem: 1, 2, 4, ... below n, and n."""
    if n < 1:
        return []
    ks, k = [], 1
    while k < n:
        ks.append(k)
        k *= 2
    return [*ks, n]


Vote = str | int | None  # a sample's answer for maj@k: a verifier group or a string; None: none


def string_vote(answer: str | None) -> Vote:
    """The vote of an extracted answer compared as a string (whitespace runs collapsed); no
    answer, or an empty one, casts none."""
    key = " ".join((answer or "").split())
    return key or None


def majority_index(votes: Sequence[Vote]) -> int | None:
    """Index of the first sample giving the most frequent vote (a tie goes to the tied answer
    given first); None when no sample votes."""
    if not votes:
        raise TraacError("maj@k: no answers to vote on")
    counts: dict[str | int, int] = {}
    for vote in votes:
        if vote is not None:
            counts[vote] = counts.get(vote, 0) + 1
    if not counts:
        return None
    best = max(counts.values())
    return next(i for i, vote in enumerate(votes) if vote is not None and counts[vote] == best)


def bootstrap_mean_ci(
    values: Sequence[float],
    *,
    draws: int = BOOTSTRAP_DRAWS,
    seed: int = BOOTSTRAP_SEED,
    confidence: float = CONFIDENCE,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of `values` (units: problems, resampled with
    replacement); one value gives a zero-width interval."""
    data = np.asarray(values, dtype=np.float64)
    if data.size == 0:
        raise TraacError("bootstrap: no values")
    if data.size == 1:
        return float(data[0]), float(data[0])
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(draws, data.size))].mean(axis=1)
    tail = 100.0 * (1.0 - confidence) / 2.0
    low, high = np.percentile(means, [tail, 100.0 - tail])
    return float(low), float(high)


@dataclass(frozen=True)
class Spread:
    """Mean, median and 90th percentile of a set of lengths (None when the set is empty)."""

    n: int
    mean: float | None
    median: float | None
    p90: float | None


def spread(values: Sequence[float]) -> Spread:
    if not values:
        return Spread(0, None, None, None)
    data = np.asarray(values, dtype=np.float64)
    return Spread(
        len(values), float(data.mean()), float(np.median(data)), float(np.percentile(data, 90))
    )


@dataclass(frozen=True)
class SamplingStats:
    """One group of problems (all, a tier, a source): rates in percent, lengths in the unit the
    run counted in. `pass_at`, `maj_at`: k -> value; `samples_per_item` is the smallest count
    (pass@k and maj@k go up to it)."""

    n_items: int
    samples_per_item: int
    avg: float
    avg_ci: tuple[float, float]
    pass_at: dict[int, float]
    maj_at: dict[int, float]
    response_right: Spread
    response_wrong: Spread
    think_right: Spread
    think_wrong: Spread
    truncated_rate: float | None  # responses cut at the token limit (None: not recorded)
    unclosed_rate: float
    # k -> tau -> G-Pass@k_tau, k -> mG-Pass@k (percent; empty in summaries written before them)
    g_pass_at: dict[int, dict[float, float]] = field(default_factory=dict)
    mg_pass_at: dict[int, float] = field(default_factory=dict)

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> SamplingStats:
        spreads = {k: Spread(**row[k]) for k in _SPREADS}
        return cls(
            n_items=row["n_items"],
            samples_per_item=row["samples_per_item"],
            avg=row["avg"],
            avg_ci=(row["avg_ci"][0], row["avg_ci"][1]),
            pass_at={int(k): v for k, v in row["pass_at"].items()},
            maj_at={int(k): v for k, v in row["maj_at"].items()},
            truncated_rate=row.get("truncated_rate"),
            unclosed_rate=row["unclosed_rate"],
            g_pass_at={
                int(k): {float(t): v for t, v in taus.items()}
                for k, taus in row.get("g_pass_at", {}).items()
            },
            mg_pass_at={int(k): v for k, v in row.get("mg_pass_at", {}).items()},
            **spreads,
        )


_SPREADS = ("response_right", "response_wrong", "think_right", "think_wrong")


@dataclass(frozen=True)
class Sample:
    """The fields of one sample these metrics read."""

    id: str
    sample: int
    correct: bool
    vote: Vote  # what it answers for maj@k (see the module's docstring)
    response_tokens: int
    think_tokens: int
    closed: bool
    truncated: bool | None  # cut at the token limit (None: the backend did not say)


def per_item(samples: Sequence[Sample]) -> dict[str, list[Sample]]:
    """Each problem's samples in sample order, problems in first-seen order."""
    groups: dict[str, list[Sample]] = {}
    for s in samples:
        groups.setdefault(s.id, []).append(s)
    for group in groups.values():
        group.sort(key=lambda s: s.sample)
    return groups


def sampling_stats(samples: Sequence[Sample], ks: Sequence[int] | None = None) -> SamplingStats:
    """avg@k with its interval, pass@k and maj@k for each k (default `default_ks` of the smallest
    sample count), lengths of right and wrong samples, truncated and unclosed rates."""
    if not samples:
        raise TraacError("sampling stats: no samples")
    items = per_item(samples)
    n_min = min(len(g) for g in items.values())
    ks = default_ks(n_min) if ks is None else [k for k in ks if 1 <= k <= n_min]
    rates = [statistics.fmean(s.correct for s in g) for g in items.values()]
    low, high = bootstrap_mean_ci(rates)

    def over_items(score: Callable[[list[Sample]], float]) -> float:
        return 100.0 * statistics.fmean(score(g) for g in items.values())

    def majority(group: list[Sample], k: int) -> float:
        first = group[:k]
        winner = majority_index([s.vote for s in first])
        return 0.0 if winner is None else float(first[winner].correct)

    right = [s for s in samples if s.correct]
    wrong = [s for s in samples if not s.correct]
    cut = [s.truncated for s in samples if s.truncated is not None]
    return SamplingStats(
        n_items=len(items),
        samples_per_item=n_min,
        avg=100.0 * statistics.fmean(rates),
        avg_ci=(100.0 * low, 100.0 * high),
        pass_at={
            k: over_items(lambda g, k=k: pass_at_k(len(g), sum(s.correct for s in g), k))
            for k in ks
        },
        maj_at={k: over_items(lambda g, k=k: majority(g, k)) for k in ks},
        g_pass_at={
            k: {
                tau: over_items(
                    lambda g, k=k, tau=tau: g_pass_at_k(len(g), sum(s.correct for s in g), k, tau)
                )
                for tau in G_PASS_TAUS
            }
            for k in ks
        },
        mg_pass_at={
            k: over_items(lambda g, k=k: mg_pass_at_k(len(g), sum(s.correct for s in g), k))
            for k in ks
        },
        response_right=spread([s.response_tokens for s in right]),
        response_wrong=spread([s.response_tokens for s in wrong]),
        think_right=spread([s.think_tokens for s in right]),
        think_wrong=spread([s.think_tokens for s in wrong]),
        truncated_rate=100.0 * statistics.fmean(cut) if cut else None,
        unclosed_rate=100.0 * statistics.fmean(not s.closed for s in samples),
    )


# --------------------------------------------------------------------------------------------
# Tables


def _spread_cell(s: Spread) -> str:
    if s.mean is None:
        return "–"
    return f"{s.mean:.0f} / {s.median:.0f} / {s.p90:.0f}"


def sampling_table(groups: Mapping[str, SamplingStats], label: str = "group") -> Table:
    """avg@k with its interval, pass@k, maj@k, and G-Pass@k and mG-Pass@k at the row's k (its
    samples per problem), one row per group."""
    ks = sorted({k for s in groups.values() for k in s.pass_at})
    taus = [t for t in G_PASS_TAUS if t > 0]  # tau 0 is pass@k, in its own column
    table = Table(
        [label, "items", "k", "avg@k (%)", "95% CI", *[f"pass@{k}" for k in ks],
         *[f"maj@{k}" for k in ks if k > 1], *[f"G-Pass@k τ={t:g}" for t in taus],
         "mG-Pass@k"],
    )  # fmt: skip
    for name, s in groups.items():
        k = s.samples_per_item  # G-Pass at the row's k, all its samples
        at = s.g_pass_at.get(k, {})
        table.add(
            name, str(s.n_items), str(k), fmt(s.avg, 2),
            f"{s.avg_ci[0]:.1f}–{s.avg_ci[1]:.1f}",
            *[fmt(s.pass_at.get(k), 2) for k in ks],
            *[fmt(s.maj_at.get(k), 2) for k in ks if k > 1],
            *[fmt(at.get(t), 2) for t in taus], fmt(s.mg_pass_at.get(k), 2),
        )  # fmt: skip
    return table


def length_table(groups: Mapping[str, SamplingStats], unit: str, label: str = "group") -> Table:
    """Response and think lengths (mean / median / p90) of right and wrong samples, and the
    rates of responses cut at the token limit and of think blocks never closed."""
    table = Table(
        [label, "right", "wrong", f"Len right ({unit})", "Len wrong", "Think right",
         "Think wrong", "cut (%)", "unclosed (%)"],
    )  # fmt: skip
    for name, s in groups.items():
        table.add(
            name, str(s.response_right.n), str(s.response_wrong.n),
            _spread_cell(s.response_right), _spread_cell(s.response_wrong),
            _spread_cell(s.think_right), _spread_cell(s.think_wrong),
            fmt(s.truncated_rate), fmt(s.unclosed_rate),
        )  # fmt: skip
    return table
