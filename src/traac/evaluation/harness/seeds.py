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


def t_quantile(df: int, level: float = LEVEL) -> float:
    """Student's t quantile for a two-sided `level` interval with `df` degrees of freedom."""
    return float(student_t.ppf(0.5 + level / 2, df))
