"""Difficulty calibration: a prompt's pass rate over its rollouts picks a bin, and the bin picks
the compression rate tau and the length-reward scale (docs/method.md#step, step 3, and #rewards).

    cfg = DifficultyConfig()                 # easy >= 0.8 > medium >= 0.3 > hard
    b = cfg.bin_of(pass_rate([True, True, False, True]))   # "medium"
    cfg.tau_of(b), cfg.scale_of(b)           # 0.4, 0.75

`DifficultyConfig(enabled=False)` is the "no difficulty" ablation: every prompt falls in the one
bin `all`, compressed at tau 0.6 (docs/method.md#rewards) with length scale 1.0 (the easy bin's
scale: with no calibration every correct rollout is pushed to be short at full weight).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from traac.errors import TraacError
from traac.method.settings import check_positive, check_unit

BINS = ("easy", "medium", "hard")
SINGLE_BIN = "all"


def _default_tau() -> dict[str, float]:
    return {"easy": 0.6, "medium": 0.4, "hard": 0.2}


def _default_scale() -> dict[str, float]:
    return {"easy": 1.0, "medium": 0.75, "hard": 0.5}


@dataclass(frozen=True)
class DifficultyConfig:
    """Bin thresholds on the pass rate, and tau and length scale per bin."""

    easy_threshold: float = 0.8
    medium_threshold: float = 0.3
    tau: Mapping[str, float] = field(default_factory=_default_tau)
    length_scale: Mapping[str, float] = field(default_factory=_default_scale)
    enabled: bool = True
    single_tau: float = 0.6  # the one bin's tau when disabled
    single_scale: float = 1.0  # the one bin's length scale when disabled

    def __post_init__(self) -> None:
        for name in ("easy_threshold", "medium_threshold", "single_tau"):
            check_unit(f"difficulty.{name}", getattr(self, name))
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
                    check_unit(f"difficulty.tau.{key}", table[key])
                else:
                    check_positive(f"difficulty.length_scale.{key}", table[key], zero=True)
        check_positive("difficulty.single_scale", self.single_scale, zero=True)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> DifficultyConfig:
        """Build from a recipe section, naming any unknown key."""
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(values) - known)
        if unknown:
            raise TraacError(f"difficulty: unknown key(s) {unknown}; known: {sorted(known)}")
        return cls(**values)

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
