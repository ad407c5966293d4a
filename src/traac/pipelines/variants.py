"""The experiments' variants (`traac experiment ablations|compare`): each a name and the recipe
fields it changes, with the peers' token constants at the paper's scale. Importable without
torch, so the command checks its options before the training stack loads."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from traac.errors import TraacError
from traac.pipelines.isolating import ISOLATING

DEFAULT_SEEDS = (0, 1, 2)

# Per-token constants of the peer methods are given at the paper's scale (responses capped at
# 10k tokens, as in recipes/qwen3-4b.yaml) and scaled to the recipe's `max_completion_length`:
# under the testbed's 160-token cap a token stands for 62.5 of the paper's. ALP (N = the
# response cap), Kimi (min-max) and DAPO (a fifth of the cap) are scale-free already.
PAPER_RESPONSE_CAP = 10_000


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


ABLATIONS: dict[str, dict[str, Any]] = {
    "CR": {"mode": "cr"},
    "CR+LR": {"mode": "cr_lr"},
    "CR+LR+compression (no difficulty)": {"mode": "compression_no_difficulty"},
    "TRAAC": {"mode": "traac"},
    "TRAAC, random scorer": {"mode": "traac", "scorer": "random"},
    "TRAAC, confidence scorer": {"mode": "traac", "scorer": "confidence"},
    # The authors' oracle compressions (they read the label): the ceiling of what cutting the
    # overthinking after the first correct step gives, and attention on what follows it.
    "TRAAC, early exit (oracle)": {"mode": "traac", "compression": "early_exit"},
    "TRAAC, early exit + attention": {
        "mode": "traac",
        "compression": "early_exit_attention_weights",
    },
}
COMPARE: dict[str, dict[str, Any]] = {
    "TRAAC": {"mode": "traac"},
    "TRAAC, dynamic sampling": {"mode": "traac", "dynamic_sampling": "resample"},
    "CR": {"mode": "cr"},
    "CR, dynamic sampling": {"mode": "cr", "dynamic_sampling": "resample"},
    "CR+LR": {"mode": "cr_lr"},
    "CR+LR, dynamic sampling": {"mode": "cr_lr", "dynamic_sampling": "resample"},
    "ALP": {"mode": "alp"},
    "ShorterBetter": {"mode": "shorterbetter", "shorterbetter_beta": PerPaperToken(0.001)},
    "Kimi k1.5": {"mode": "kimi"},
    "DAPO overlong": {"mode": "dapo_overlong"},
    "L1-Max": {
        "mode": "l1_max",
        "l1_alpha": PerPaperToken(0.0003),
        "l1_budget_min": PaperTokens(100),
        "l1_budget_max": PaperTokens(4000),
    },
    # DLER is its truncation penalty trained with its optimiser; 4000 tokens is 64 of the
    # testbed's.
    "DLER": {
        "mode": "dler",
        "optimizer_profile": "dler",
        "dler_length": PaperTokens(4000),
    },
    "DLER, difficulty-aware": {
        "mode": "dler_difficulty",
        "optimizer_profile": "dler",
        "dler_length": PaperTokens(4000),
    },
    "Laser-D": {"mode": "laser_d"},  # targets scale with the response cap already
    "TRAAC, DLER optimiser": {"mode": "traac", "optimizer_profile": "dler"},
    **ISOLATING,
}
EXPERIMENTS: dict[str, dict[str, dict[str, Any]]] = {"ablations": ABLATIONS, "compare": COMPARE}


def check_variants(
    name: str,
    variants: Sequence[str] | None,
    seeds: Sequence[int] | None,
    held_out_per_tier: int | None,
) -> None:
    """An experiment's name, variants, seeds and held-out size, each named in one line."""
    if name not in EXPERIMENTS:
        raise TraacError(f"experiment {name!r}: use one of {', '.join(EXPERIMENTS)}")
    table = EXPERIMENTS[name]
    unknown = [v for v in variants or () if v not in table]
    if unknown:
        raise TraacError(f"--variants: unknown {unknown}; {name} has {list(table)}")
    seeds = tuple(DEFAULT_SEEDS if seeds is None else seeds)
    if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise TraacError(f"--seeds: {list(seeds)} must be distinct integers >= 0")
    if held_out_per_tier is not None and held_out_per_tier < 1:
        raise TraacError(f"--held-out: {held_out_per_tier} problems a tier; use 1 or more")
