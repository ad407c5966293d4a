"""One place that turns compression settings into a scorer and a `Compressor`.

Training, `traac compress`, test-time compression, the probe report, the demo's step viewer and
the testbed's measurement all compress with the scorer the settings name; building it here keeps
its layers, heads, seed and think delimiters the same wherever it runs.
"""

from __future__ import annotations

from typing import Any

from traac.errors import TraacError
from traac.method.compression import Compressor
from traac.method.formats import ChatFormat
from traac.method.scoring import AttentionScorer, ConfidenceScorer, RandomScorer
from traac.method.settings import CompressionSettings

ModelScorer = AttentionScorer | ConfidenceScorer | RandomScorer


def build_scorer(
    settings: CompressionSettings,
    model: Any,
    tokenizer: Any,
    chat_format: ChatFormat | None = None,
    *,
    seed: int = 0,
    batch_size: int = 8,
) -> ModelScorer:
    """The scorer `settings.scorer` names (`model` may be None for random), reading the probe
    text `chat_format` writes (default: `<think>` ... `</think>`)."""
    fmt = chat_format or ChatFormat()
    if settings.scorer == "random":
        return RandomScorer(tokenizer, seed, settings.phrases)
    if model is None:
        raise TraacError(f"scorer {settings.scorer}: needs a model")
    if settings.scorer == "confidence":
        return ConfidenceScorer(
            model, tokenizer, settings.confidence_top_k, batch_size, think_open=fmt.think_open
        )
    layers = settings.probe_layers or "all"
    return AttentionScorer(
        model, tokenizer, layers, batch_size, fmt.think_close, settings.probe_heads
    )


def build_compressor(
    settings: CompressionSettings,
    model: Any,
    tokenizer: Any,
    chat_format: ChatFormat | None = None,
    *,
    seed: int = 0,
    batch_size: int = 8,
) -> Compressor:
    """A `Compressor` with the scorer `settings` name (see `build_scorer`)."""
    fmt = chat_format or ChatFormat()
    scorer = build_scorer(settings, model, tokenizer, fmt, seed=seed, batch_size=batch_size)
    return Compressor(scorer, fmt, settings)
