"""Difficulty calibration: a prompt's pass rate over its rollouts picks a bin, and the bin picks
the compression rate tau and the length-reward scale (docs/method.md#step, step 3, and #rewards).

    cfg = DifficultySettings()                 # easy >= 0.8 > medium >= 0.3 > hard
    b = cfg.bin_of(pass_rate([True, True, False, True]))   # "medium"
    cfg.tau_of(b), cfg.scale_of(b)           # 0.4, 0.75

A recipe writes the bins as one mapping, `difficulty:` (`DifficultySettings.from_recipe`; keys left
out keep the paper's values):

    difficulty:
      easy_threshold: 0.8
      tau: {easy: 0.6, medium: 0.4, hard: 0.2}
      length_scale: {hard: 0.5}

`DifficultySettings(enabled=False)` is the "no difficulty" ablation: every prompt falls in the one
bin `all`, compressed at tau 0.6 (docs/method.md#rewards) with length scale 1.0 (the easy bin's
scale: with no calibration every correct rollout is pushed to be short at full weight).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from traac.compression.settings import check_positive, check_tau, check_unit
from traac.errors import TraacError

BINS = ("easy", "medium", "hard")
SINGLE_BIN = "all"
# What a recipe's `difficulty` mapping may hold; `enabled` is the training mode's to say.
RECIPE_KEYS = ("easy_threshold", "medium_threshold", "tau", "length_scale", "single_tau",
               "single_scale")  # fmt: skip
# The flat recipe fields the mapping replaced, with their new spelling.
FLAT_KEYS = {
    "easy_threshold": "difficulty.easy_threshold",
    "medium_threshold": "difficulty.medium_threshold",
    **{f"tau_{b}": f"difficulty.tau.{b}" for b in BINS},
    "tau_single": "difficulty.single_tau",
    **{f"length_scale_{b}": f"difficulty.length_scale.{b}" for b in BINS},
    "length_scale_single": "difficulty.single_scale",
}


def _default_tau() -> dict[str, float]:
    return {"easy": 0.6, "medium": 0.4, "hard": 0.2}


def _default_scale() -> dict[str, float]:
    return {"easy": 1.0, "medium": 0.75, "hard": 0.5}


@dataclass(frozen=True)
class DifficultySettings:
    """Bin thresholds on the pass rate, and tau and length scale per bin."""

    easy_threshold: float = 0.8
    medium_threshold: float = 0.3
    tau: Mapping[str, float] = field(default_factory=_default_tau)
    length_scale: Mapping[str, float] = field(default_factory=_default_scale)
    enabled: bool = True
    single_tau: float = 0.6  # the one bin's tau when disabled
    single_scale: float = 1.0  # the one bin's length scale when disabled

    def __post_init__(self) -> None:
        for name in ("easy_threshold", "medium_threshold"):
            check_unit(f"difficulty.{name}", getattr(self, name))
        check_tau("difficulty.single_tau", self.single_tau)
        if self.medium_threshold > self.easy_threshold:
            raise TraacError(
                f"difficulty.medium_threshold ({self.medium_threshold}) must not exceed "
                f"difficulty.easy_threshold ({self.easy_threshold})"
            )
        for name in ("tau", "length_scale"):
            table = getattr(self, name)
            if not isinstance(table, Mapping) or set(table) != set(BINS):
                keys = sorted(table) if isinstance(table, Mapping) else table
                raise TraacError(
                    f"difficulty.{name} must give exactly easy, medium, hard; got {keys}"
                )
            for key in BINS:
                if name == "tau":
                    check_tau(f"difficulty.tau.{key}", table[key])
                else:
                    check_positive(f"difficulty.length_scale.{key}", table[key], zero=True)
        check_positive("difficulty.single_scale", self.single_scale, zero=True)

    @classmethod
    def from_recipe(
        cls, values: Mapping[str, Any] | None, *, enabled: bool = True
    ) -> DifficultySettings:
        """A recipe's `difficulty` mapping (`RECIPE_KEYS`), naming any unknown key; keys left
        out keep the paper's values, and `tau` and `length_scale` may give some bins only."""
        if values is None:
            values = {}
        if not isinstance(values, Mapping):
            raise TraacError(f"difficulty: {values!r} is not a mapping of {', '.join(RECIPE_KEYS)}")
        unknown = sorted(set(values) - set(RECIPE_KEYS))
        if unknown:
            raise TraacError(f"difficulty: unknown key(s) {unknown}; known: {list(RECIPE_KEYS)}")
        merged = dict(values)
        for name, default in (("tau", _default_tau()), ("length_scale", _default_scale())):
            table = merged.get(name, {})
            if not isinstance(table, Mapping):
                raise TraacError(f"difficulty.{name}: {table!r} is not a mapping of {BINS}")
            merged[name] = {**default, **table}
        return cls(**merged, enabled=enabled)

    def to_recipe(self) -> dict[str, Any]:
        """The recipe mapping of these bins, every key given (plain values, JSON-ready)."""
        return {
            "easy_threshold": self.easy_threshold,
            "medium_threshold": self.medium_threshold,
            "tau": dict(self.tau),
            "length_scale": dict(self.length_scale),
            "single_tau": self.single_tau,
            "single_scale": self.single_scale,
        }

    @property
    def bins(self) -> tuple[str, ...]:
        """The bins prompts can fall in."""
        return BINS if self.enabled else (SINGLE_BIN,)

    def bin_of(self, pass_rate: float) -> str:
        """easy if pass_rate >= easy_threshold, medium if >= medium_threshold, else hard."""
        if not 0.0 <= pass_rate <= 1.0:
            raise TraacError(f"pass rate must be in [0, 1], got {pass_rate}")
        if not self.enabled:
            return SINGLE_BIN
        if pass_rate >= self.easy_threshold:
            return "easy"
        return "medium" if pass_rate >= self.medium_threshold else "hard"

    def tau_of(self, bin_name: str) -> float:
        """Compression rate of a bin."""
        return self.single_tau if bin_name == SINGLE_BIN else self.tau[self._known(bin_name)]

    def scale_of(self, bin_name: str) -> float:
        """Length-reward scale of a bin."""
        if bin_name == SINGLE_BIN:
            return self.single_scale
        return self.length_scale[self._known(bin_name)]

    def _known(self, bin_name: str) -> str:
        if bin_name not in BINS:
            raise TraacError(
                f"unknown difficulty bin {bin_name!r}; use one of {(*BINS, SINGLE_BIN)}"
            )
        return bin_name


def pass_rate(correct: Sequence[bool]) -> float:
    """Fraction of a prompt's rollouts that are right."""
    if not correct:
        raise TraacError("pass rate of an empty group of rollouts")
    return sum(bool(c) for c in correct) / len(correct)


def group_pass_rates(correct: Sequence[bool], group_size: int) -> list[float]:
    """Pass rate of every rollout's group, for rollouts laid out in consecutive groups (as GRPO
    batches them: all generations of a prompt side by side)."""
    if group_size < 1 or len(correct) % group_size:
        raise TraacError(
            f"{len(correct)} rollouts do not split into groups of {group_size} (num_generations)"
        )
    rates: list[float] = []
    for start in range(0, len(correct), group_size):
        rate = pass_rate(correct[start : start + group_size])
        rates += [rate] * group_size
    return rates
