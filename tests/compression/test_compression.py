import math
import re
import string

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from traac.compression.compression import (
    CompressionResult,
    Compressor,
    ScoreRequest,
    TokenScores,
    compression_stats,
    eviction_fraction,
    gate_heads,
    keep_mask,
    step_scores,
    uniformity,
    uniformity_rank,
)
from traac.compression.formats import AUX_PROMPT, ChatFormat
from traac.compression.segmentation import Step, split_steps
from traac.compression.settings import CompressionSettings
from traac.errors import TraacError


def compress(reasoning, scorer, tau, chat_format=None, **settings):
    """One trace through a Compressor with these settings."""
    compressor = Compressor(scorer, chat_format or ChatFormat(), CompressionSettings(**settings))
    return compressor([reasoning], [tau])[0]


class WhitespaceTokenizer:
    """Tokens are maximal non-space runs; enough to test offsets without a model."""

    def __call__(self, text, add_special_tokens=False, return_offsets_mapping=False):
        spans = [m.span() for m in re.finditer(r"\S+", text)]
        out = {"input_ids": list(range(len(spans)))}
        if return_offsets_mapping:
            out["offset_mapping"] = spans
        return out


class KeywordScorer:
    """Scores tokens low from a re-check opener ("Wait", "Hmm") to the next key-step opener."""

    gated = True

    def __init__(self, low=("Wait", "Hmm", "double-check"), low_score=0.01, high_score=1.0):
        self.tokenizer = WhitespaceTokenizer()
        self.low, self.low_score, self.high_score = low, low_score, high_score

    def score(self, requests):
        out = []
        for text in (r.probe for r in requests):
            spans = self.tokenizer(text, return_offsets_mapping=True)["offset_mapping"]
            scores, low = [], False
            for a, b in spans:
                word = text[a:b]
                if any(word.startswith(k) for k in self.low):
                    low = True
                elif word.rstrip(",") in ("First", "Then", "So"):
                    low = False
                scores.append(self.low_score if low else self.high_score)
            out.append(TokenScores(np.array(spans).reshape(-1, 2), np.array(scores)))
        return out


class FixedStepScorer:
    """Gives every token of step k the score `values[k]` (steps over the probe text)."""

    def __init__(self, values, gated=True):
        self.tokenizer = WhitespaceTokenizer()
        self.values = values
        self.gated = gated

    def score(self, requests):
        out = []
        for text in (r.probe for r in requests):
            offsets, step_of, _ = token_steps(self.tokenizer, text)
            out.append(TokenScores(offsets, np.array([self.values[k] for k in step_of], float)))
        return out


def token_steps(tokenizer, text):
    """The tokens' offsets in `text`, the step of the probe text each token starts in, and the
    steps."""
    steps = split_steps(text)
    spans = tokenizer(text, return_offsets_mapping=True)["offset_mapping"]
    step_of = [next(k for k, s in enumerate(steps) if s.start <= a < s.end) for a, _ in spans]
    return np.array(spans).reshape(-1, 2), step_of, steps


def test_uniformity_worked_numbers():
    assert uniformity([1, 1, 1, 1]) == pytest.approx(1.0)
    assert uniformity([3, 1]) == pytest.approx(0.811278, abs=1e-6)
    assert uniformity([0.7, 0.1, 0.1, 0.1]) == pytest.approx(0.678390, abs=1e-6)
    assert uniformity([1, 0, 0, 0]) == pytest.approx(0.0, abs=1e-9)
    assert uniformity([-5, 2, 2]) == pytest.approx(uniformity([0, 2, 2]))


def test_uniformity_degenerate_cases_are_one():
    assert uniformity([]) == 1.0
    assert uniformity([0.3]) == 1.0
    assert uniformity([0, 0, 0]) == 1.0
    assert uniformity([-1, -2]) == 1.0


def test_eviction_fraction_rule():
    assert eviction_fraction(0.81, 0.6) == 0.0
    assert eviction_fraction(0.8, 0.6) == pytest.approx(0.6 * 0.2)
    assert eviction_fraction(0.5, 0.4) == pytest.approx(0.2)
    assert eviction_fraction(0.0, 1.0) == 0.8  # capped
    assert eviction_fraction(0.0, 1.0, cap=0.5) == 0.5
    assert eviction_fraction(0.9, 0.6, gate=0.95) == pytest.approx(0.06)


def test_evict_drops_floor_n_e_lowest_keeping_order():
    kept = keep_mask(np.array([0.5, 0.1, 0.9, 0.2, 0.3]), 0.45)  # floor(2.25) = 2
    assert kept == [True, False, True, False, True]
    assert keep_mask(np.array([1.0, 1.0, 1.0]), 0.3) == [True, True, True]  # floor(0.9) = 0


def test_step_scores_mean_and_uncovered_step():
    steps = [Step("ab", 0, 2), Step("c", 2, 3), Step("d", 3, 4)]
    ts = TokenScores(np.array([(0, 1), (1, 3), (3, 4)]), np.array([1.0, 3.0, 5.0]))
    # token (1, 3) starts in step 0, so step 1 takes its score from the token covering it.
    assert step_scores(ts, steps).tolist() == [2.0, 3.0, 5.0]


@given(st.integers(1, 4), st.integers(1, 12), st.integers(0, 2**31 - 1))
def test_per_head_step_scores_are_each_heads_own(heads, n_tokens, seed):
    rng = np.random.default_rng(seed)
    offsets = np.array([(k, k + 1) for k in range(n_tokens)])
    cuts = sorted({0, *rng.integers(0, n_tokens, 3).tolist()})
    steps = [Step("", a, b) for a, b in zip(cuts, [*cuts[1:], n_tokens], strict=True)]
    rows = rng.random((heads, n_tokens))
    together = step_scores(TokenScores(offsets, rows), steps)
    alone = [step_scores(TokenScores(offsets, r), steps) for r in rows]
    np.testing.assert_allclose(together, np.stack(alone))


class HeadScorer:
    """Per-head token scores (`probe_heads: gated`): the rows `heads(steps)` gives, each token
    taking its step's value in every head."""

    gated = True

    def __init__(self, heads):
        self.tokenizer = WhitespaceTokenizer()
        self.heads = heads

    def score(self, requests):
        out = []
        for text in (r.probe for r in requests):
            offsets, step_of, steps = token_steps(self.tokenizer, text)
            rows = np.array([[row[k] for k in step_of] for row in self.heads(steps)], float)
            out.append(TokenScores(offsets, rows))
        return out


def selective_and_diffuse_heads(steps):
    """One head attends to the key steps (those that do not re-check), four attend evenly."""
    selective = [0.01 if s.text.startswith(("Wait", "Hmm")) else 1.0 for s in steps]
    return [selective, *[[1.0] * len(steps)] * 4]


def test_gated_heads_drop_the_heads_that_attend_evenly():
    """Averaged with four even heads the selective head is drowned (u above the gate, nothing
    evicted); gated, only it is left and it evicts re-checks alone."""
    scorer = HeadScorer(selective_and_diffuse_heads)
    mean = compress(REASONING, scorer, tau=0.6)
    assert mean.uniformity > 0.8 and mean.n_evicted == 0
    gated = compress(REASONING, scorer, tau=0.6, probe_heads="gated")
    assert gated.uniformity < 0.8 and gated.n_evicted > 0
    evicted = [s.text for s, k in zip(gated.steps, gated.kept, strict=True) if not k]
    assert all(t.startswith(("Wait", "Hmm")) for t in evicted)


def test_gate_heads_keeps_those_at_or_under_the_gate_else_all():
    offsets = np.array([(0, 1), (1, 2), (2, 3), (3, 4)])
    steps = [Step("", k, k + 1) for k in range(4)]
    peaked, even = [0.97, 0.01, 0.01, 0.01], [0.25, 0.25, 0.25, 0.25]
    got = gate_heads(TokenScores(offsets, np.array([peaked, even, even])), steps, 0.8)
    np.testing.assert_allclose(got.scores, peaked)
    # no head passes: all of them, as with probe_heads all
    got = gate_heads(TokenScores(offsets, np.array([even, [0.3, 0.2, 0.3, 0.2]])), steps, 0.8)
    np.testing.assert_allclose(got.scores, [0.275, 0.225, 0.275, 0.225])
    # a head exactly at the gate passes it, as the eviction rule lets u == gate act
    u = uniformity(peaked)
    got = gate_heads(TokenScores(offsets, np.array([peaked, even])), steps, u)
    np.testing.assert_allclose(got.scores, peaked)


REASONING = (
    "First, 3 + 4 = 7. Then 7 + 5 = 12. So the answer is 12. "
    "Wait, let me double-check 3 + 4. It is 7. Hmm, 7 + 5 is 12. "
    "Wait, again 12. Hmm, yes 12. Then done. "
)


def test_compress_prunes_low_scored_rechecks():
    result = compress(REASONING, KeywordScorer(), tau=0.6)
    assert result.uniformity < 0.8
    evicted = [s.text for s, k in zip(result.steps, result.kept, strict=True) if not k]
    assert evicted and all(t.startswith(("Wait", "Hmm")) for t in evicted)
    assert result.n_evicted == math.floor(len(result.steps) * result.eviction_fraction + 1e-9)
    assert "First, 3 + 4 = 7." in result.text and AUX_PROMPT not in result.text
    assert "<think>" not in result.text and "</think>" not in result.text
    assert result.tokens_after < result.tokens_before
    assert result.tokens_before == len(REASONING.split())


def metaspace_tokenizer():
    """Llama/Mistral-style, one token per character: spaces become "▁" and the text's first
    word gets one prepended, so a reasoning has one token more alone than inside the probe
    (after the <think> token), though no probe token crosses its edges."""
    specials = ["<unk>", "<think>", "</think>"]
    vocab = [*specials, "▁", *sorted(set(string.printable) - {" "})]
    core = Tokenizer(models.BPE({t: i for i, t in enumerate(vocab)}, [], unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first")
    core.add_special_tokens([AddedToken(t, normalized=False) for t in specials])
    return PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>")


@pytest.mark.parametrize("text", [REASONING, "x", "So 2 + 2 = 4. Wait, check: 4.\n\nSo 4."])
def test_token_counts_are_those_of_the_text_tokenized_alone(text):
    """Counting the reasoning's tokens from the scorer's probe offsets would save a tokenization
    but is not exact: with this tokenizer it is one short."""
    tokenizer = metaspace_tokenizer()
    scorer = FixedStepScorer([1.0, 0.001] * 10)
    scorer.tokenizer = tokenizer
    result = compress(text, scorer, tau=1.0, uniformity_gate=1.0)
    assert result.compressed == (text != "x")
    assert result.tokens_before == len(tokenizer(text, add_special_tokens=False)["input_ids"])
    assert result.tokens_after == len(tokenizer(result.text, add_special_tokens=False)["input_ids"])
    compressor = Compressor(scorer, ChatFormat())
    (probe,) = scorer.score([ScoreRequest(text, compressor.probe_text(text))])
    lo, hi = len("<think>"), len("<think>") + len(text)
    inside = [(a, b) for a, b in probe.offsets if lo <= a < b <= hi]
    assert len(inside) == result.tokens_before - 1


class DelimiterScorer:
    """Scores only the probe's own tokens (opener, auxiliary prompt, closer): 1, the rest 0."""

    gated = True

    def __init__(self):
        self.tokenizer = WhitespaceTokenizer()

    def score(self, requests):
        out = []
        for r in requests:
            spans = self.tokenizer(r.probe, return_offsets_mapping=True)["offset_mapping"]
            lo, hi = len("<think>"), len("<think>") + len(r.reasoning)
            scores = [0.0 if lo <= a < hi and b <= hi else 1.0 for a, b in spans]
            out.append(TokenScores(np.array(spans).reshape(-1, 2), np.array(scores)))
        return out


def test_probe_scope_puts_delimiters_in_edge_steps_only():
    """Scope `probe` (the authors'): the opener's and the auxiliary prompt's scores count in the
    first and last steps. Scope `reasoning`: they count in no step."""
    reasoning = " x1. " + REASONING  # a first step that does not open with a phrase
    probe = compress(reasoning, DelimiterScorer(), tau=0.6, step_scope="probe")
    assert "".join(s.text for s in probe.steps) == reasoning
    assert probe.scores[0] > 0 and probe.scores[-1] > 0 and not probe.scores[1:-1].any()
    scoped = compress(reasoning, DelimiterScorer(), tau=0.6, step_scope="reasoning")
    assert [s.text for s in scoped.steps] == [s.text for s in split_steps(reasoning)]
    assert not scoped.scores.any()


def test_uniform_scores_compress_nothing():
    result = compress(REASONING, KeywordScorer(low_score=1.0), tau=0.6)
    assert result.uniformity > 0.8 and result.eviction_fraction == 0.0
    assert result.text == REASONING and not result.compressed
    assert result.tokens_after == result.tokens_before


def test_empty_reasoning_is_left_alone():
    result = compress("   ", KeywordScorer(), tau=0.6)
    assert result.steps == [] and result.text == "   " and result.uniformity == 1.0


def test_batch_calls_scorer_once_and_respects_taus():
    calls = []

    class Counting(KeywordScorer):
        def score(self, requests):
            calls.append(len(requests))
            return super().score(requests)

    results = Compressor(Counting())([REASONING, "", REASONING], [0.0, 0.6, 0.6])
    assert calls == [2]
    assert not results[0].compressed and results[2].compressed


def test_prompt_opens_format_and_custom_delimiters():
    fmt = ChatFormat("<reason>", "</reason>", opener_in_prompt=True)
    result = compress(REASONING, KeywordScorer(), tau=0.6, chat_format=fmt)
    assert "".join(s.text for s in result.steps) == REASONING and result.compressed


def test_invalid_options_name_the_field():
    with pytest.raises(TraacError, match="step_scope"):
        CompressionSettings(step_scope="tokens")
    with pytest.raises(TraacError, match="probe_heads"):
        CompressionSettings(probe_heads="best")
    with pytest.raises(TraacError, match="uniformity_gate"):
        CompressionSettings(uniformity_gate=1.5)
    with pytest.raises(TraacError, match="uniformity_gate"):
        CompressionSettings(uniformity_gate=float("nan"))
    with pytest.raises(TraacError, match="tau"):
        Compressor(KeywordScorer())([REASONING], [0.6, 0.2])


def test_score_then_evict_with_a_calibrated_uniformity():
    """The two public steps: the rule uses the u it is given (calibration), and reports the
    trace's own."""
    compressor = Compressor(KeywordScorer(low_score=0.9))
    (trace,) = compressor.score([REASONING])
    assert trace.uniformity > 0.8  # near-uniform: the paper's gate evicts nothing
    assert not compressor.compress(trace, 0.6).compressed
    calibrated = compressor.compress(trace, 0.6, rule_uniformity=0.1)
    assert calibrated.compressed and calibrated.rule_uniformity == 0.1
    assert calibrated.uniformity == trace.uniformity
    assert calibrated.eviction_fraction == pytest.approx(0.6 * 0.9)


def test_ungated_scorers_evict_tau_of_the_steps_however_uniform():
    """docs/method.md#ablation-scorers: random and confidence scores are near-uniform, so
    through the gate they would evict nothing; like the authors' code they evict floor(n * tau)
    steps."""
    values = [1.0] * 4 + [0.99] + [1.0] * 15
    gated = compress(REASONING, FixedStepScorer(values), tau=0.6)
    ungated = compress(REASONING, FixedStepScorer(values, gated=False), tau=0.6)
    n = len(ungated.steps)
    assert gated.uniformity > 0.99 and not gated.compressed
    assert ungated.eviction_fraction == 0.6 and ungated.rule_uniformity == 0.0
    assert ungated.n_evicted == math.floor(n * 0.6) and ungated.n_evicted <= n - 1


phrases = st.sampled_from(["First", "Then", "So", "Wait", "Hmm", "Now", "Thus"])
sentences = st.tuples(phrases, st.integers(0, 99)).map(lambda t: f"{t[0]} x{t[1]}. ")


@settings(max_examples=150, deadline=None)
@given(
    st.lists(sentences, min_size=1, max_size=12).map("".join),
    st.lists(st.floats(0.0, 10.0), min_size=14, max_size=14),
    st.floats(0.0, 1.0),
    st.sampled_from(["probe", "reasoning"]),
)
def test_compression_properties(reasoning, values, tau, scope):
    scorer = FixedStepScorer(values)
    result = compress(reasoning, scorer, tau, step_scope=scope)
    n = len(result.steps)
    assert len(result.kept) == n == len(result.scores)
    assert result.n_evicted == math.floor(n * result.eviction_fraction + 1e-9)
    kept_texts = [s.text for s, k in zip(result.steps, result.kept, strict=True) if k]
    assert "".join(kept_texts) == result.text
    # kept steps are an ordered subsequence of the original steps
    starts = [s.start for s, k in zip(result.steps, result.kept, strict=True) if k]
    assert starts == sorted(starts)
    if result.uniformity > 0.8:
        assert result.n_evicted == 0
    assert 0.0 <= result.eviction_fraction <= 0.8


@given(st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_eviction_fraction_never_decreases_with_tau(u, tau_a, tau_b):
    lo, hi = sorted((tau_a, tau_b))
    assert eviction_fraction(u, lo) <= eviction_fraction(u, hi)


def test_steps_without_text_are_never_evicted():
    assert keep_mask(np.array([0.0, 0.5, 0.9, 0.2]), 0.5, [False, True, True, True]) == [
        True,
        False,
        True,
        False,
    ]
    # probe scope on a trace that opens with a phrase: step 0 is the bare opener
    result = compress("First, 1 + 1 = 2. So 2. Wait, 2.", FixedStepScorer([0.0, 5, 5, 0.1]), 1.0)
    assert result.steps[0].text == "" and result.kept[0]
    assert result.n_evicted == math.floor(4 * result.eviction_fraction + 1e-9) >= 1


def test_uniformity_rank_is_the_share_below_with_ties_counted_half() -> None:
    window = [0.9, 0.95, 0.95, 0.99]
    assert uniformity_rank(0.95, window) == pytest.approx((1 + 0.5 * 2) / 4)
    assert uniformity_rank(0.5, window) == 0.0 and uniformity_rank(1.0, window) == 1.0
    with pytest.raises(TraacError, match="window is empty"):
        uniformity_rank(0.9, [])


def _result(kept, before, after):
    steps = [Step("s", i, i + 1) for i in range(len(kept))]
    return CompressionResult(
        reasoning="s" * len(kept),
        steps=steps,
        scores=np.zeros(len(kept)),
        kept=kept,
        uniformity=0.5,
        eviction_fraction=0.2,
        text="",
        tokens_before=before,
        tokens_after=after,
    )


def test_compression_stats():
    stats = compression_stats(
        [_result([True, False, False, True], 100, 60), _result([True, True], 40, 40)]
    )
    assert (stats.traces, stats.compressed, stats.steps, stats.steps_removed) == (2, 1, 6, 2)
    assert (stats.tokens_before, stats.tokens_after, stats.tokens_removed) == (140, 100, 40)
    assert stats.compressed_fraction == 0.5
    assert stats.step_removal_rate == pytest.approx(2 / 6)
    assert stats.token_removal_rate == pytest.approx(40 / 140)
    empty = compression_stats([])
    assert empty.traces == 0 and empty.token_removal_rate == 0.0
