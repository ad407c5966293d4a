"""The experiments' variants (`traac experiment ablations|compare`): each a name and the recipe
fields it changes, with the peers' token constants at the paper's scale. Importable without
torch, so the command checks its options before the training stack loads."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from traac.errors import TraacError
from traac.pipelines.isolating import ISOLATING, ISOLATING_CONTRASTS, TRAAC, traac
from traac.training.methods.registry import METHODS

DEFAULT_SEEDS = (0, 1, 2)

# Per-token constants of the peer methods are given at the paper's scale (responses capped at
# 10k tokens, as in recipes/qwen3-4b.yaml) and scaled to the recipe's `max_completion_length`:
# under the testbed's 160-token cap a token stands for 62.5 of the paper's. ALP (N = the
# response cap), Kimi (min-max) and DAPO (a fifth of the cap) are scale-free already.
PAPER_RESPONSE_CAP = 10_000


ABLATIONS: dict[str, dict[str, Any]] = {
    "CR": {"mode": "cr"},
    "CR+LR": {"mode": "cr_lr"},
    "CR+LR+compression (no difficulty)": {"mode": "compression_no_difficulty"},
    # The control the paper never ran: difficulty calibration without compression.
    "TRAAC without compression": {"mode": "traac_no_compression"},
    "TRAAC": TRAAC,
    "TRAAC, random scorer": traac(scorer="random"),
    "TRAAC, confidence scorer": traac(scorer="confidence"),
    # The authors' oracle compressions (they read the label): the ceiling of what cutting the
    # overthinking after the first correct step gives, and attention on what follows it.
    "TRAAC, early exit (oracle)": traac(compression="early_exit"),
    "TRAAC, early exit + attention": traac(compression="early_exit_attention_weights"),
}
COMPARE: dict[str, dict[str, Any]] = {
    "TRAAC": TRAAC,
    "TRAAC, dynamic sampling": {**TRAAC, "dynamic_sampling": "resample"},
    "CR": {"mode": "cr"},
    "CR, dynamic sampling": {"mode": "cr", "dynamic_sampling": "resample"},
    "CR+LR": {"mode": "cr_lr"},
    "CR+LR, dynamic sampling": {"mode": "cr_lr", "dynamic_sampling": "resample"},
    "TRAAC without compression": {"mode": "traac_no_compression"},
    # Beyond the paper: the probe evicts only steps after the first one the verifier accepts,
    # so a copy loses re-checks, never computation, and trains its think block.
    "TRAAC, after-answer compression": traac(compression="after_answer"),
    # Each peer method's variants, from its module (`traac.training.methods`).
    **{label: fields for m in METHODS.values() for label, fields in m.compare},
    "TRAAC, DLER optimiser": {**TRAAC, "optimizer_profile": "dler"},
    # Step entropy (arXiv:2508.03346) prunes the steps of lowest entropy in the probe's place.
    "TRAAC, step-entropy scorer": traac(scorer="step_entropy"),
    # The same with the copies' think blocks masked: on the testbed step entropy evicts the
    # computation steps the probe keeps, so this is where masking can be tested there.
    "TRAAC, step entropy, answer-only copies": traac(
        scorer="step_entropy", copy_loss="answer_only"
    ),
    **ISOLATING,
}
EXPERIMENTS: dict[str, dict[str, dict[str, Any]]] = {"ablations": ABLATIONS, "compare": COMPARE}


# The one change each pair isolates: (what changed, baseline, variant). The report gives the
# variant minus the baseline seed by seed: both runs of a pair start from the same model with
# the same seed, so what varies with the seed alone cancels in their difference.
CONTRASTS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "ablations": (
        ("format and length rewards", "CR", "CR+LR"),
        ("difficulty bins, no compression", "CR+LR", "TRAAC without compression"),
        ("compression over difficulty calibration", "TRAAC without compression", "TRAAC"),
        ("compression, one bin", "CR+LR", "CR+LR+compression (no difficulty)"),
        ("difficulty bins", "CR+LR+compression (no difficulty)", "TRAAC"),
        ("compression with difficulty", "CR+LR", "TRAAC"),
        ("attention, not random", "TRAAC, random scorer", "TRAAC"),
        ("attention, not confidence", "TRAAC, confidence scorer", "TRAAC"),
        ("attention, not the oracle early exit", "TRAAC, early exit (oracle)", "TRAAC"),
        (
            "attention after the oracle prefix",
            "TRAAC, early exit (oracle)",
            "TRAAC, early exit + attention",
        ),
    ),
    "compare": (
        ("format and length rewards", "CR", "CR+LR"),
        ("dynamic sampling, correctness reward alone", "CR", "CR, dynamic sampling"),
        ("dynamic sampling with format and length rewards", "CR+LR", "CR+LR, dynamic sampling"),
        ("dynamic sampling with TRAAC", "TRAAC", "TRAAC, dynamic sampling"),
        ("compression with difficulty", "CR+LR", "TRAAC"),
        ("DLER's optimiser, TRAAC's reward", "TRAAC", "TRAAC, DLER optimiser"),
        ("TRAAC under DLER's optimiser against CR+LR", "CR+LR", "TRAAC, DLER optimiser"),
        ("TRAAC with answer-only copies against CR+LR", "CR+LR", "TRAAC, answer-only copies"),
        ("difficulty bins, no compression", "CR+LR", "TRAAC without compression"),
        ("compression over difficulty calibration", "TRAAC without compression", "TRAAC"),
        (
            "answer-only copies over difficulty calibration",
            "TRAAC without compression",
            "TRAAC, answer-only copies",
        ),
        (
            "after-answer compression over difficulty calibration",
            "TRAAC without compression",
            "TRAAC, after-answer compression",
        ),
        ("difficulty-aware truncation", "DLER", "DLER, difficulty-aware"),
        ("step entropy in the probe's place", "TRAAC", "TRAAC, step-entropy scorer"),
        (
            "copies' think blocks masked, step-entropy scorer",
            "TRAAC, step-entropy scorer",
            "TRAAC, step entropy, answer-only copies",
        ),
        *ISOLATING_CONTRASTS,
    ),
}
TITLES = {"ablations": "Ablations", "compare": "TRAAC and its peers"}


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
    twice = next((v for v in variants or () if list(variants or ()).count(v) > 1), None)
    if twice is not None:
        raise TraacError(f"--variants: {twice!r} is given twice; name each variant once")
    seeds = tuple(DEFAULT_SEEDS if seeds is None else seeds)
    if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise TraacError(f"--seeds: {list(seeds)} must be distinct integers >= 0")
    if held_out_per_tier is not None and held_out_per_tier < 1:
        raise TraacError(f"--held-out: {held_out_per_tier} problems a tier; use 1 or more")
