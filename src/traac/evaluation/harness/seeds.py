"""Seed-level intervals: a method comparison whose unit is the trained model.

Each seed trains the baseline and the variant from the same model with the same seed, and
evaluates both on the same held-out problems; its paired effect is one number, variant minus
baseline. Across seeds those effects vary with everything a seed changes (the rollouts sampled,
the prompts' order, the copies' shuffle, the CPU's rounding), and a bootstrap over problems with
the trained models held fixed sees none of it. The interval here is Student's t over the
per-seed effects, `mean ± t(0.975, S - 1) x sd / sqrt(S)`:

- it is exact when the seed effects are normal, and it says how little S seeds know (with two
  seeds t is 12.7, with five 2.78);
- a two-level bootstrap (seeds, then problems) was the alternative; with 3 to 5 seeds its draws
  of seeds take only a handful of distinct values and its percentile interval is too narrow
  (the bootstrap's known under-coverage in small samples), so t it is;
- the held-out problems are the same in every seed, so the interval is about these problems;
  how far they stand for others is what the problem bootstrap (`traac.evaluation.harness.
  paired`) answers, with the models fixed.

Only this interval earns a method comparison's `*` (docs/evaluation.md#seed-level).

What a contrast resolves follows from the same t over the same per-seed effects (`Bounds`): the
90% interval, the two one-sided tests (TOST) at a margin the study stated before its runs (the
90% interval inside +/- margin), the p of "no effect" adjusted by Holm across the study's
contrasts, the mean with each seed left out in turn (how much one seed carries), and the
smallest effect the observed spread would detect at 80% power; `verdict` turns those numbers
alone into a word, so that no sentence reads "adds nothing" where the seeds only failed to see.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from scipy.stats import t as student_t

from traac.common.tables import signed

MARK = "*"  # after an effect whose seed-level interval excludes 0
LEVEL = 0.95
ALPHA = 0.05  # the tests' level: two-sided for "no effect", each one-sided test of the TOST
POWER = 0.8  # the minimum detectable effect's


@dataclass(frozen=True)
class SeedInterval:
    """Per-seed paired effects, their mean and 95% t-interval (None with one seed)."""

    effects: tuple[float, ...]
    mean: float
    low: float | None
    high: float | None

    @classmethod
    def of(cls, effects: Sequence[float]) -> SeedInterval:
        values = tuple(float(e) for e in effects)
        mean = statistics.fmean(values)
        if len(values) < 2:
            return cls(values, mean, None, None)
        half = t_quantile(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
        return cls(values, mean, mean - half, mean + half)

    @property
    def significant(self) -> bool:
        """Does the interval exclude 0? (Never with one seed.)"""
        return self.low is not None and self.high is not None and (self.low > 0 or self.high < 0)

    def cell(self, digits: int = 1) -> str:
        """`+4.27* [+1.46, +7.09]`, or the one seed's effect with `(1 seed)`."""
        if self.low is None or self.high is None:
            return f"{signed(self.mean, digits)} (1 seed)"
        mark = MARK if self.significant else ""
        low, high = signed(self.low, digits), signed(self.high, digits)
        return f"{signed(self.mean, digits)}{mark} [{low}, {high}]"

    def by_seed(self, digits: int = 1) -> str:
        """Each seed's effect, in seed order."""
        return ", ".join(signed(e, digits) for e in self.effects)

    @property
    def se(self) -> float | None:
        """The standard error of the mean effect (None with one seed)."""
        n = len(self.effects)
        return statistics.stdev(self.effects) / math.sqrt(n) if n > 1 else None

    def at(self, level: float) -> tuple[float, float] | None:
        """The t-interval at another `level` (None with one seed)."""
        if self.se is None:
            return None
        half = t_quantile(len(self.effects) - 1, level) * self.se
        return self.mean - half, self.mean + half

    @property
    def p(self) -> float | None:
        """Two-sided p of the t-test that the effect is 0 (None with one seed); where every seed
        gave the same effect it is 0 unless that effect is 0."""
        if self.se is None:
            return None
        if self.se == 0:
            return 1.0 if self.mean == 0 else 0.0
        return float(2 * student_t.sf(abs(self.mean) / self.se, len(self.effects) - 1))

    def tost(self, margin: float) -> float | None:
        """p of the two one-sided tests that the effect lies within +/- `margin`: the larger of
        the two; below `ALPHA` exactly when the 90% interval lies inside the margin."""
        if self.se is None:
            return None
        if self.se == 0:
            return 0.0 if abs(self.mean) < margin else 1.0
        df = len(self.effects) - 1
        below = student_t.sf((self.mean + margin) / self.se, df)  # H0: effect <= -margin
        above = student_t.sf((margin - self.mean) / self.se, df)  # H0: effect >= +margin
        return float(max(below, above))

    def mde(self, power: float = POWER) -> float | None:
        """The smallest effect the two-sided t-test at `ALPHA` detects with `power`, at the
        observed spread: (t(1 - ALPHA/2, S - 1) + t(power, S - 1)) x se (the usual
        approximation by central t quantiles). None with one seed."""
        if self.se is None:
            return None
        df = len(self.effects) - 1
        return (t_quantile(df, 1 - ALPHA) + float(student_t.ppf(power, df))) * self.se

    def leave_one_out(self) -> tuple[float, float] | None:
        """The lowest and highest mean effect with one seed left out (None with one seed)."""
        n = len(self.effects)
        if n < 2:
            return None
        total = sum(self.effects)
        means = [(total - e) / (n - 1) for e in self.effects]
        return min(means), max(means)


@dataclass(frozen=True)
class Bounds:
    """What one contrast's seeds resolve: its effects (`interval`), the p of "no effect" after
    Holm's adjustment across the study's contrasts, and the study's stated margin (None: it
    stated none, and no equivalence is tested)."""

    interval: SeedInterval
    p_holm: float | None
    margin: float | None

    @property
    def tost(self) -> float | None:
        return None if self.margin is None else self.interval.tost(self.margin)

    def verdict(self, unit: str = "points") -> str:
        """The word these numbers allow: better or worse where the Holm-adjusted p is below
        `ALPHA`; equivalent within the margin where the TOST is; otherwise not resolved, with how
        far either way the 90% interval reaches."""
        mean, ninety = self.interval.mean, self.interval.at(1 - 2 * ALPHA)
        if ninety is None or self.p_holm is None:
            return "not resolved: one seed"
        tost = self.tost
        within = f"within ±{self.margin:g} {unit}" if tost is not None and tost < ALPHA else ""
        if self.p_holm < ALPHA:
            word = "better" if mean > 0 else "worse"
            return f"{word}, {within}" if within else word
        if within:
            return f"equivalent {within}"
        low, high = ninety
        if low > 0 or high < 0:
            return f"not resolved after Holm: {signed(low)} to {signed(high)} {unit} not excluded"
        reach = max(-low, high)
        return f"not resolved: up to {reach:.1f} {unit} either way not excluded"


def holm(ps: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment of `ps` (None: no test, left out of the family): the i-th
    smallest of k times (k - i + 1), never below the one before it, at most 1."""
    order = sorted((k for k, p in enumerate(ps) if p is not None), key=lambda k: ps[k] or 0.0)
    adjusted: list[float | None] = [None] * len(ps)
    running = 0.0
    for rank, k in enumerate(order):
        running = max(running, min(1.0, (len(order) - rank) * (ps[k] or 0.0)))
        adjusted[k] = running
    return adjusted


def t_quantile(df: int, level: float = LEVEL) -> float:
    """Student's t quantile for a two-sided `level` interval with `df` degrees of freedom."""
    return float(student_t.ppf(0.5 + level / 2, df))
