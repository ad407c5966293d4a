"""The paper's evaluation metrics (docs/method.md#evaluation); the sampling metrics (avg@k,
pass@k, maj@k) are `traac.evaluation.harness.metrics`. Every function returns fractions in
[0, 1] (F1 keeps the unit it is given); `percent()` converts for reports.

- `accuracy`, `mean_length`: per dataset, over all samples of all items.
- `oaa(correct, think, t)`: mean of correct_i * [think_i < t] (None never counts).
- `auc_oaa(correct, think, t_max)`: (1/t_max) * integral over [0, t_max] of OAA_t, in closed form
  mean_i(correct_i * max(0, t_max - think_i) / t_max); None contributes 0.
- `PAPER_T_MAX`: the paper's t_max (10,000 tokens), the default of `traac eval --t-max`.
- `otb_f1(auc_oaa, acc_ut)`: OptimalThinkingBench F1, the harmonic mean of the two.
- `group_stats` / `by_group`: accuracy, lengths, closure and AUC_OAA of a group of samples (all
  of them, or per difficulty tier, source or task).
"""

from __future__ import annotations

import statistics
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from traac.errors import TraacError

# The paper's t_max of AUC_OAA (its maximum response length): `traac eval` and `traac report`
# score at it unless told otherwise; decoupled from the response budget (`--max-new-tokens`).
PAPER_T_MAX = 10_000
# How OptimalThinkingBench's O, U and F1 are computed: the paper's way (AUC_OAA at t_max over
# responses, full credit) or the official code's (`traac.evaluation.harness.otb_official`).
OTB_SCORINGS = ("paper", "official")
OTB_OFFICIAL_T = 1000  # the official code's T, hard-coded there (its t_max option is unused)


def _nonempty(name: str, values: Sequence[Any]) -> None:
    if len(values) == 0:
        raise TraacError(f"{name}: no results to average")


def accuracy(correct: Sequence[bool | float]) -> float:
    """Fraction right (floats allowed, e.g. per-item means over samples)."""
    _nonempty("accuracy", correct)
    return sum(float(c) for c in correct) / len(correct)


def mean_length(lengths: Sequence[int | float]) -> float:
    """Mean response length in tokens."""
    _nonempty("mean_length", lengths)
    return statistics.fmean(lengths)


def _pairs(name: str, correct: Sequence[Any], think: Sequence[int | None]) -> None:
    _nonempty(name, correct)
    if len(correct) != len(think):
        raise TraacError(f"{name}: {len(correct)} verdicts but {len(think)} think lengths")


def oaa(correct: Sequence[bool | float], think: Sequence[int | None], t: float) -> float:
    """Overthinking-adjusted accuracy at threshold t: right AND thought fewer than t tokens."""
    _pairs("oaa", correct, think)
    hits = (float(c) for c, n in zip(correct, think, strict=True) if n is not None and n < t)
    return sum(hits) / len(correct)


def auc_oaa(correct: Sequence[bool | float], think: Sequence[int | None], t_max: float) -> float:
    """Area under OAA_t for t in [0, t_max], normalised by t_max (closed form,
    docs/method.md#evaluation)."""
    _pairs("auc_oaa", correct, think)
    if not t_max > 0:
        raise TraacError(f"auc_oaa: t_max must be > 0, got {t_max}")
    total = sum(
        float(c) * max(0.0, t_max - n) / t_max
        for c, n in zip(correct, think, strict=True)
        if n is not None
    )
    return total / len(correct)


def otb_f1(auc_oaa: float, acc_ut: float) -> float:
    """OptimalThinkingBench F1: 2 a u / (a + u), in the unit given (fractions or percent)."""
    if auc_oaa < 0 or acc_ut < 0:
        raise TraacError(f"otb_f1: scores must be >= 0, got {auc_oaa} and {acc_ut}")
    total = auc_oaa + acc_ut
    return 0.0 if total == 0 else 2 * auc_oaa * acc_ut / total


def percent(fraction: float, digits: int = 2) -> float:
    """A fraction as a percentage rounded for reports (0.4545 -> 45.45)."""
    return round(100.0 * fraction, digits)


@dataclass(frozen=True)
class GroupStats:
    """One group of samples as the reports show it: rates in percent, lengths in tokens (or
    the unit the lengths were counted in)."""

    n_items: int
    n_samples: int
    accuracy: float
    mean_response_tokens: float
    mean_think_tokens: float
    closed_rate: float
    auc_oaa: float


def group_stats(
    ids: Sequence[Hashable],
    correct: Sequence[bool],
    response_tokens: Sequence[int | float],
    think: Sequence[int | None],
    t_max: float,
) -> GroupStats:
    """Stats of the samples given; `think[i]` is None where the think block never closed (it
    then counts its whole response as thinking in the mean, and 0 towards AUC_OAA)."""
    _pairs("group_stats", correct, think)
    return GroupStats(
        n_items=len(set(ids)),
        n_samples=len(correct),
        accuracy=100.0 * accuracy(correct),
        mean_response_tokens=mean_length(response_tokens),
        mean_think_tokens=mean_length(
            [t if t is not None else n for t, n in zip(think, response_tokens, strict=True)]
        ),
        closed_rate=100.0 * statistics.fmean(t is not None for t in think),
        auc_oaa=100.0 * auc_oaa(correct, think, t_max),
    )


def by_group(
    labels: Sequence[Hashable],
    ids: Sequence[Hashable],
    correct: Sequence[bool],
    response_tokens: Sequence[int | float],
    think: Sequence[int | None],
    t_max: float,
) -> dict[Hashable, GroupStats]:
    """`group_stats` per label (e.g. difficulty tier), labels in first-seen order."""
    if not len(labels) == len(correct):
        raise TraacError(f"by_group: {len(labels)} labels for {len(correct)} verdicts")
    members: dict[Hashable, list[int]] = {}
    for i, label in enumerate(labels):
        members.setdefault(label, []).append(i)
    return {
        label: group_stats(
            [ids[i] for i in idx],
            [correct[i] for i in idx],
            [response_tokens[i] for i in idx],
            [think[i] for i in idx],
            t_max,
        )
        for label, idx in members.items()
    }
