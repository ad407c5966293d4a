"""Paper-scale constants in `experiment compare`'s variants: a method module writes its paper's
token counts and per-token coefficients, and the experiment scales them to the recipe's response
cap (`traac.pipelines.experiments.variant_overrides`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PaperTokens:
    """A token count at the paper's scale: `round(value / scale)` tokens under the recipe's cap."""

    value: float

    def at(self, scale: float) -> int:
        return round(self.value / scale)


@dataclass(frozen=True)
class PerPaperToken:
    """A coefficient per token at the paper's scale: `value * scale` per token under the recipe's
    cap, so that a response's penalty keeps its size."""

    value: float

    def at(self, scale: float) -> float:
        return self.value * scale
