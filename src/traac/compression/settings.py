"""The knobs of attentive compression and of the think format: one name each, validated once.

`CompressionSettings` and `FormatSettings` are plain dataclasses with TRL-style field docs. The
training config (`TRAACConfig`) inherits `FormatSettings`; the modes that compress take
`CompressionSettings`' fields as their settings (`traac.training.methods.traac.TraacSettings`),
so a recipe spells a setting exactly as the commands' options do (`--probe_layers` or
`--probe-layers`, `--uniformity_gate`, ...), and both go through the same `__post_init__` check,
which names the field and the fix.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field, fields
from typing import Any

from traac.compression.formats import AUX_PROMPT, CHAT_FORMATS, ChatFormat, resolve_chat_format
from traac.errors import TraacError


@dataclass(frozen=True)
class ScorerKind:
    """One step scorer, by what it reads: everything outside the module that builds it
    (`traac.compression.factory`) asks this, never the scorer's name."""

    name: str
    reads: str  # "attention" (the probe's layers), "policy" (the next-token distribution
    # with the question in context) or "nothing" (random)

    @property
    def attention(self) -> bool:
        """It reads the closer's attention over probe layers (memory, layers, heads)."""
        return self.reads == "attention"

    @property
    def policy(self) -> bool:
        """It reads the policy's own distribution, so no foreign model can score for it."""
        return self.reads == "policy"

    @property
    def needs_model(self) -> bool:
        """It runs a model forward (the random scorer runs none)."""
        return self.reads != "nothing"


# Every step scorer: the one table. Adding one is a row here and its builder in the factory.
SCORER_KINDS: dict[str, ScorerKind] = {
    kind.name: kind
    for kind in (
        ScorerKind("attention", "attention"),
        ScorerKind("confidence", "policy"),
        ScorerKind("step_entropy", "policy"),
        ScorerKind("random", "nothing"),
    )
}
SCORERS = tuple(SCORER_KINDS)
STEP_SCOPES = ("probe", "reasoning")
PROBE_HEADS = ("all", "gated")
UNIFORMITY_GATE = 0.8
EVICTION_CAP = 0.8
DEFAULT_TOP_K = 20  # the paper does not give k; 20 is the usual cap on returned logprobs (vLLM)
TEST_TIME_TAU = 0.4  # docs/method.md#evaluation: the fixed tau of test-time compression
# Old names of presets: `reference` named the authors' preset and TRL's frozen reference model.
DEPRECATED_PRESETS = {"reference": "authors"}

logger = logging.getLogger(__name__)


def check_choice(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise TraacError(f"{name}: {value!r} is not one of {', '.join(allowed)}")


def check_unit(name: str, value: Any) -> None:
    """A number in [0, 1] (NaN and booleans refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise TraacError(f"{name}: {value!r} must be a number in [0, 1]")


def check_tau(name: str, value: Any) -> float:
    """A compression rate tau: a number in [0, 1] (NaN and booleans refused). The one check of
    tau's range, where a tau enters: a recipe's bins (`DifficultySettings`), a command's
    `--compress-tau` (its parser) and `ThinkingGenerator`; what they pass on is not checked
    again."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise TraacError(f"{name} {value}: must lie in [0, 1]")
    return float(value)


def check_positive(name: str, value: Any, *, integer: bool = False, zero: bool = False) -> None:
    """A finite number > 0 (>= 0 with `zero`); an integer with `integer`."""
    kind = int if integer else (int, float)
    ok = not isinstance(value, bool) and isinstance(value, kind) and math.isfinite(value)
    if not ok or not (value >= 0 if zero else value > 0):
        what = "an integer" if integer else "a finite number"
        raise TraacError(f"{name}: {value!r} must be {what} {'>= 0' if zero else '> 0'}")


def preset_name(name: str, value: Any) -> Any:
    """A preset's current name: an old one still works, with a one-line warning."""
    if value in DEPRECATED_PRESETS:
        new = DEPRECATED_PRESETS[value]
        logger.warning("%s: %r is deprecated; it is now called %r", name, value, new)
        return new
    return value


def check_layers(value: Any) -> None:
    """`all`, `first_half`, or comma-separated layer indices (checked against a model later)."""
    if value in ("all", "first_half"):
        return
    parts = str(value).split(",") if isinstance(value, str) else []
    if not parts or not all(p.strip().isdigit() for p in parts):
        raise TraacError(
            f"probe_layers: {value!r} is not all, first_half or comma-separated layer indices"
        )


def check_phrases(value: Any) -> None:
    """`split_phrases`: unset, or a list of non-empty phrases."""
    if value is not None and (
        not isinstance(value, list) or any(not isinstance(p, str) or not p.strip() for p in value)
    ):
        raise TraacError("split_phrases: every phrase must be a non-empty string")


@dataclass
class CompressionSettings:
    """How reasoning steps are scored and evicted (docs/method.md#compression)."""

    scorer: str = field(
        default="attention",
        metadata={"help": "Step scorer: attention (the closer's attention, the paper's) | "
                  "confidence (the policy's top-k confidence, with the question in context) | "
                  "step_entropy (the policy's entropy summed per step, lowest pruned; "
                  "arXiv:2508.03346) | random. The scorers but attention skip the uniformity "
                  "gate (e = tau), as the authors' code does for its ablations.",
                  "choices": SCORERS},
    )  # fmt: skip
    probe_layers: str | None = field(
        default=None,
        metadata={"help": "Attention layers averaged: all (paper) | first_half (authors' code "
                  "for Qwen3) | comma-separated indices (unset: all; in a training recipe, the "
                  "preset's: authors reads the first half of a Qwen3 model)."},
    )  # fmt: skip
    probe_heads: str = field(
        default="all",
        metadata={"help": "Attention heads averaged: all (paper) | gated (beyond the paper: "
                  "only the heads whose own step scores pass the uniformity gate; a head that "
                  "attends near-uniformly has no say in which steps matter, so it is left out "
                  "of the mean rather than diluting the heads that select; all heads if none "
                  "passes).", "choices": PROBE_HEADS},
    )  # fmt: skip
    step_scope: str = field(
        default="probe",
        metadata={"help": "Steps split over the whole probe text (opener and auxiliary prompt in "
                  "the edge steps, the authors' code) | the reasoning only.",
                  "choices": STEP_SCOPES},
    )  # fmt: skip
    uniformity_gate: float = field(
        default=UNIFORMITY_GATE,
        metadata={"help": "Nothing is evicted when the step scores' uniformity u exceeds this."},
    )
    eviction_cap: float = field(
        default=EVICTION_CAP, metadata={"help": "Largest share of a trace's steps evicted."}
    )
    split_phrases: list[str] | None = field(
        default=None,
        metadata={"help": "Phrases that open a step (unset: the paper's list)."},
    )
    aux_prompt: str = field(
        default=AUX_PROMPT, metadata={"help": "Auxiliary prompt appended in the probe."}
    )
    confidence_top_k: int = field(
        default=DEFAULT_TOP_K, metadata={"help": "Top-k of the confidence scorer."}
    )

    @property
    def scorer_kind(self) -> ScorerKind:
        """What the scorer reads (`SCORER_KINDS`)."""
        return SCORER_KINDS[self.scorer]

    @property
    def splits_probe(self) -> bool:
        """Steps are split over the whole probe text (`step_scope: probe`), not the reasoning."""
        return self.step_scope == "probe"

    @property
    def gates_heads(self) -> bool:
        """Only the heads that pass the uniformity gate are averaged (`probe_heads: gated`)."""
        return self.probe_heads == "gated"

    def __post_init__(self) -> None:
        if self.probe_layers is None:  # in a training recipe the preset's, resolved per model
            self.probe_layers = "all"  # before (`TraacSettings.probe_layers_for`)
        check_choice("scorer", self.scorer, SCORERS)
        check_choice("step_scope", self.step_scope, STEP_SCOPES)
        check_choice("probe_heads", self.probe_heads, PROBE_HEADS)
        if self.probe_layers is not None:
            check_layers(self.probe_layers)
        check_unit("uniformity_gate", self.uniformity_gate)
        check_unit("eviction_cap", self.eviction_cap)
        check_phrases(self.split_phrases)
        if not isinstance(self.aux_prompt, str) or not self.aux_prompt.strip():
            raise TraacError("aux_prompt: must be a non-empty string")
        check_positive("confidence_top_k", self.confidence_top_k, integer=True)
        if self.confidence_top_k < 2:
            raise TraacError(f"confidence_top_k: {self.confidence_top_k} must be at least 2")

    @property
    def phrases(self) -> tuple[str, ...] | None:
        return None if self.split_phrases is None else tuple(self.split_phrases)


@dataclass
class FormatSettings:
    """Where the think block opens and closes (any model with a think delimiter)."""

    chat_format: str = field(
        default="auto",
        metadata={"help": "auto (read off the chat template) | response-opens (Qwen3: the "
                  "response writes the opener) | prompt-opens (R1 distills: the prompt ends "
                  "with it).", "choices": ("auto", *CHAT_FORMATS)},
    )  # fmt: skip
    think_open: str = field(default="<think>", metadata={"help": "Think block opener."})
    think_close: str = field(default="</think>", metadata={"help": "Think block closer."})

    def __post_init__(self) -> None:
        check_choice("chat_format", self.chat_format, ("auto", *CHAT_FORMATS))
        for name in ("think_open", "think_close"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise TraacError(f"{name}: must be a non-empty string")
        if self.think_open == self.think_close:
            raise TraacError(f"think_close: {self.think_close!r} must differ from think_open")

    def resolve(self, tokenizer: Any = None) -> ChatFormat:
        """The chat format; `auto` reads the tokenizer's template."""
        return resolve_chat_format(
            self.chat_format,
            think_open=self.think_open,
            think_close=self.think_close,
            tokenizer=tokenizer,
        )


def check_compression_read(settings: CompressionSettings, compress: bool, budget: bool) -> None:
    """Compression options given to a command that compresses nothing (no tau) have no
    effect; one line naming the first. Under a think budget the auxiliary prompt is still read
    (it follows the interrupted think block)."""
    if compress:
        return
    defaults = CompressionSettings()
    for f in fields(CompressionSettings):
        if f.name == "aux_prompt" and budget:
            continue
        if getattr(settings, f.name) != getattr(defaults, f.name):
            raise TraacError(
                f"--{f.name.replace('_', '-')}: no effect, since nothing is compressed without "
                "--compress-tau; add --compress-tau TAU (the paper's test-time tau is 0.4) or "
                "drop it"
            )
