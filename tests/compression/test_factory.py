"""The one factory of compressors: the scorer the settings name, reading the probe the chat
format writes."""

import math

import pytest

from traac.compression.compression import Compressor
from traac.compression.factory import build_compressor
from traac.compression.formats import ChatFormat
from traac.compression.scoring import AttentionScorer, ConfidenceScorer, RandomScorer
from traac.compression.settings import CompressionSettings
from traac.errors import TraacError


@pytest.mark.parametrize("name", ["random", "confidence"])
def test_ablation_scorers_are_not_gated(name, tiny_model, char_tokenizer):
    """Both ablation scorers evict floor(n * tau) steps whatever their uniformity
    (docs/method.md#ablation-scorers)."""
    model, tok = tiny_model(), char_tokenizer()
    settings = CompressionSettings(scorer=name)
    compressor = build_compressor(settings, model, tok, seed=1)
    reasoning = "First add. Wait, check it. So the sum is 4. Hmm, again. Therefore 4. So 4."
    (result,) = compressor([reasoning], [0.6], ["Q?<think>"])
    assert result.uniformity > 0.8  # through the gate this would evict nothing
    assert result.n_evicted == math.floor(len(result.steps) * 0.6) > 0


def test_the_settings_name_the_scorer(tiny_model, char_tokenizer):
    model, tok = tiny_model(), char_tokenizer()
    half = CompressionSettings(probe_layers="first_half")
    attention = build_compressor(half, model, tok).scorer
    assert isinstance(attention, AttentionScorer)
    assert attention.layers == [0, 1]
    assert attention.gated
    confidence = build_compressor(CompressionSettings(scorer="confidence"), model, tok).scorer
    assert isinstance(confidence, ConfidenceScorer) and not confidence.gated
    random = build_compressor(CompressionSettings(scorer="random"), None, tok, seed=1).scorer
    assert isinstance(random, RandomScorer) and not random.gated
    with pytest.raises(TraacError, match="scorer: 'entropy' is not one of"):
        CompressionSettings(scorer="entropy")


def test_build_compressor_scores_the_chat_formats_probe(tiny_model, char_tokenizer):
    """The compressor holds the settings and format it was built from, and its attention scorer
    reads the format's closer; it compresses as the scorer assembled by hand does."""
    model = tiny_model()
    tok = char_tokenizer(["<pad>", "<eos>", "<t>", "</t>"])
    fmt = ChatFormat("<t>", "</t>")
    settings = CompressionSettings(probe_layers="0")
    compressor = build_compressor(settings, model, tok, fmt, batch_size=2)
    assert compressor.chat_format == fmt and compressor.settings is settings
    assert isinstance(compressor.scorer, AttentionScorer)
    assert compressor.scorer.think_close == "</t>" and compressor.scorer.layers == [0]
    by_hand = Compressor(AttentionScorer(model, tok, [0], 2, "</t>"), fmt, settings)
    reasoning = "First add. Wait, check it. So the sum is 4. Hmm, again. Therefore 4."
    (built,) = compressor([reasoning], [0.6])
    (assembled,) = by_hand([reasoning], [0.6])
    assert built.kept == assembled.kept and built.scores.tolist() == assembled.scores.tolist()


def test_every_scorer_of_the_table_builds_and_says_what_it_reads(tiny_model, char_tokenizer):
    """One table of scorers (`SCORER_KINDS`): each has a builder, and what it reads decides
    whether it needs a model, probe layers or the policy's own distribution."""
    from traac.compression.factory import BUILDERS
    from traac.compression.settings import SCORER_KINDS, SCORERS

    assert list(BUILDERS) == list(SCORER_KINDS) == list(SCORERS)
    reads = {name: (k.attention, k.policy, k.needs_model) for name, k in SCORER_KINDS.items()}
    assert reads == {
        "attention": (True, False, True),
        "confidence": (False, True, True),
        "step_entropy": (False, True, True),
        "random": (False, False, False),
    }
    model, tok = tiny_model(), char_tokenizer()
    for name, kind in SCORER_KINDS.items():
        settings = CompressionSettings(scorer=name)
        assert settings.scorer_kind is kind
        assert build_compressor(settings, model, tok).scorer is not None
        if kind.needs_model:
            with pytest.raises(TraacError, match=f"^scorer {name}: needs a model"):
                build_compressor(settings, None, tok)
