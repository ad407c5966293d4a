"""One place that turns compression settings into a scorer and a `Compressor`.

Training, `traac compress`, test-time compression, the probe report, the demo's step viewer and
the testbed's measurement all compress with the scorer the settings name; building it here keeps
its layers, heads, seed and think delimiters the same wherever it runs.
"""

from __future__ import annotations

from typing import Any

from traac.errors import TraacError
from traac.method.compression import Compressor, Scorer
from traac.method.formats import ChatFormat
from traac.method.probe_capture import resolve_layers
from traac.method.scoring import AttentionScorer, ConfidenceScorer, RandomScorer
from traac.method.settings import CompressionSettings
from traac.method.step_entropy import StepEntropyScorer


def build_compressor(
    settings: CompressionSettings,
    model: Any,
    tokenizer: Any,
    chat_format: ChatFormat | None = None,
    *,
    seed: int = 0,
    batch_size: int = 8,
) -> Compressor:
    """A `Compressor` with the scorer `settings.scorer` names, reading the probe text
    `chat_format` writes (default: `<think>` ... `</think>`). `model` may be None for the random
    scorer (`seed` seeds it); `batch_size` is the model scorers' forward batch."""
    fmt = chat_format or ChatFormat()
    return Compressor(_scorer(settings, model, tokenizer, fmt, seed, batch_size), fmt, settings)


# The scorers that read no attention layers (the rest are the attention probe, `_scorer`).
LAYERLESS_SCORERS = ("random", "confidence", "step_entropy")


def check_probe_layers(settings: CompressionSettings, model: str) -> None:
    """The probe's layers against the model that scores (its config.json alone), so a layer
    past the model's is named before its weights load."""
    if settings.scorer in LAYERLESS_SCORERS:
        return
    from traac.common.models import load_config

    config = load_config(model).get_text_config()
    resolve_layers(settings.probe_layers or "all", config.num_hidden_layers)


def _scorer(
    settings: CompressionSettings,
    model: Any,
    tokenizer: Any,
    fmt: ChatFormat,
    seed: int,
    batch: int,
) -> Scorer:
    if settings.scorer == "random":
        return RandomScorer(tokenizer, seed, settings.phrases)
    if model is None:
        raise TraacError(f"scorer {settings.scorer}: needs a model")
    if settings.scorer == "confidence":
        return ConfidenceScorer(
            model, tokenizer, settings.confidence_top_k, batch, think_open=fmt.think_open
        )
    if settings.scorer == "step_entropy":
        return StepEntropyScorer(model, tokenizer, batch, think_open=fmt.think_open)
    layers = settings.probe_layers or "all"
    return AttentionScorer(model, tokenizer, layers, batch, fmt.think_close, settings.probe_heads)
