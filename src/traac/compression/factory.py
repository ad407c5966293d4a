"""One place that turns compression settings into a scorer and a `Compressor`.

Training, `traac compress`, test-time compression, the probe report, the demo's step viewer and
the testbed's measurement all compress with the scorer the settings name; building it here keeps
its layers, heads, seed and think delimiters the same wherever it runs. Each scorer of
`traac.compression.settings.SCORER_KINDS` has its builder in `BUILDERS`; elsewhere a scorer is known
by what it reads (`ScorerKind`), never by its name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from traac.compression.compression import Compressor, Scorer
from traac.compression.formats import ChatFormat
from traac.compression.probe_capture import resolve_layers
from traac.compression.scoring import AttentionScorer, ConfidenceScorer, RandomScorer
from traac.compression.settings import SCORER_KINDS, CompressionSettings
from traac.compression.step_entropy import StepEntropyScorer
from traac.errors import TraacError


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


def check_probe_layers(settings: CompressionSettings, model: str) -> None:
    """The probe's layers against the model that scores (its config.json alone), so a layer
    past the model's is named before its weights load."""
    if not settings.scorer_kind.attention:
        return
    from traac.common.models import load_config

    config = load_config(model).get_text_config()
    resolve_layers(settings.probe_layers or "all", config.num_hidden_layers)


# (settings, model, tokenizer, think format, seed, forward batch) -> the scorer
Builder = Callable[[CompressionSettings, Any, Any, ChatFormat, int, int], Scorer]
BUILDERS: dict[str, Builder] = {
    "attention": lambda s, model, tok, fmt, seed, batch: AttentionScorer(
        model, tok, s.probe_layers or "all", batch, fmt.think_close, s.probe_heads
    ),
    "confidence": lambda s, model, tok, fmt, seed, batch: ConfidenceScorer(
        model, tok, s.confidence_top_k, batch, think_open=fmt.think_open
    ),
    "step_entropy": lambda s, model, tok, fmt, seed, batch: StepEntropyScorer(
        model, tok, batch, think_open=fmt.think_open
    ),
    "random": lambda s, model, tok, fmt, seed, batch: RandomScorer(tok, seed, s.phrases),
}
if set(BUILDERS) != set(SCORER_KINDS):  # one builder per scorer of the table
    raise TypeError(f"scorer builders {sorted(BUILDERS)} != scorers {sorted(SCORER_KINDS)}")


def _scorer(
    settings: CompressionSettings,
    model: Any,
    tokenizer: Any,
    fmt: ChatFormat,
    seed: int,
    batch: int,
) -> Scorer:
    if model is None and settings.scorer_kind.needs_model:
        raise TraacError(f"scorer {settings.scorer}: needs a model")
    return BUILDERS[settings.scorer](settings, model, tokenizer, fmt, seed, batch)
