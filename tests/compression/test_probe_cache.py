"""The probe from a KV cache built while decoding: the closer's attention row must be the one a
full forward of the probe text gives, whatever share of the reasoning the cache holds."""

import pytest
import torch

from traac.compression.compression import ScoreRequest
from traac.compression.formats import ChatFormat
from traac.compression.probe_cache import ProbeCache, has_sliding_layers
from traac.compression.scoring import AttentionScorer

SPECIALS = ["<pad>", "<eos>", "<think>", "</think>"]
REASONINGS = ["So 2+2 is 4. Wait, check: 2+2=4. Therefore 4.", "First x. Then y. Hmm z. So y"]


@pytest.fixture
def tokenizer(char_tokenizer):
    return char_tokenizer(SPECIALS, eos="<eos>")


@pytest.fixture
def model(tiny_model, tokenizer):
    return tiny_model(vocab_size=len(tokenizer), q_scale=16.0, pad_token_id=0, eos_token_id=1)


@pytest.mark.parametrize("chunk", [1, 8, 100])
def test_cached_rows_equal_the_full_probe_forward(model, tokenizer, chunk):
    """Two rows fed token by token as decoding would (chunk 100: nothing fed, all runs at the
    closer); each row's closer attention matches `AttentionScorer` to 1e-5."""
    fmt = ChatFormat()
    open_ids = tokenizer.encode(fmt.think_open, add_special_tokens=False)
    reasonings = [tokenizer.encode(r, add_special_tokens=False) for r in REASONINGS]
    with torch.no_grad():
        cache = ProbeCache(model, open_ids, len(reasonings), chunk)
        for n in range(1, max(map(len, reasonings)) + 1):
            cache.feed([r[:n] for r in reasonings])
    scorer = AttentionScorer(model, tokenizer)
    for row, (text, ids) in enumerate(zip(REASONINGS, reasonings, strict=True)):
        probe = fmt.probe_text(text)
        probe_ids = tokenizer.encode(probe, add_special_tokens=False)
        scores, ran = cache.score(row, ids, probe_ids, "all")
        (expected,) = scorer.score([ScoreRequest(text, probe)])
        torch.testing.assert_close(
            scores.double(), torch.from_numpy(expected.scores), rtol=0, atol=1e-5
        )
        held = cache.fed[row]
        assert ran == len(probe_ids) - len(open_ids) - held
        assert (held == 0) == (chunk > max(map(len, reasonings))) and held <= len(ids)


def test_a_full_attention_model_has_no_sliding_layers(model):
    assert not has_sliding_layers(model)
