import math
import string

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache

from traac.compression.compression import Compressor, ScoreRequest
from traac.compression.formats import ChatFormat
from traac.compression.probe_capture import capture_probe_rows, probe_row
from traac.compression.scoring import (
    AttentionScorer,
    ConfidenceScorer,
    RandomScorer,
    resolve_layers,
    topk_confidence,
)
from traac.compression.settings import CompressionSettings
from traac.errors import TraacError

ARCHS = ("qwen3", "llama")


def probe_requests(texts):
    """Score requests for whole probe texts (the reasoning field is not read by these)."""
    return [ScoreRequest("", t) for t in texts]


def eager_copy(model):
    twin = type(model)(model.config).eval()
    twin.load_state_dict(model.state_dict())
    twin.set_attn_implementation("eager")
    return twin


def eager_reference(model, ids, mask, layers, heads=False):
    """Row of the last real position in `output_attentions=True`, mean over layers and heads
    (B, T); with `heads` every head's row, layer by layer: (L * H, B, T)."""
    valid = torch.ones_like(ids, dtype=torch.bool) if mask is None else mask.bool()
    kwargs = {}
    if mask is not None:
        kwargs["attention_mask"] = mask
        kwargs["position_ids"] = (mask.cumsum(1) - 1).clamp(min=0)
    with torch.no_grad():
        attentions = eager_copy(model)(ids, output_attentions=True, **kwargs).attentions
    att = torch.stack([attentions[i] for i in layers])  # (L, B, H, T, T)
    last = ids.shape[1] - 1 - valid.flip(1).int().argmax(1)
    rows = torch.stack([att[:, b, :, last[b]] for b in range(len(ids))])  # (B, L, H, T)
    if heads:
        return rows.flatten(1, 2).transpose(0, 1).masked_fill(~valid[None], 0.0)
    return rows.mean(dim=(1, 2)).masked_fill(~valid, 0.0)


PADDINGS = {
    "none": None,
    "right": [[1] * 12, [1] * 8 + [0] * 4, [1] * 5 + [0] * 7],
    "left": [[1] * 12, [0] * 4 + [1] * 8, [0] * 7 + [1] * 5],
}


@pytest.mark.parametrize("arch", list(ARCHS))
@pytest.mark.parametrize("padding", list(PADDINGS))
@pytest.mark.parametrize("layers", ["all", "first_half", [1, 3]])
def test_probe_equals_eager_output_attentions(arch, padding, layers, tiny_model, char_tokenizer):
    model = tiny_model(arch)
    ids = torch.randint(4, 104, (3, 12), generator=torch.Generator().manual_seed(1))
    mask = None if PADDINGS[padding] is None else torch.tensor(PADDINGS[padding])
    scorer = AttentionScorer(model, char_tokenizer(), layers=layers)
    got = scorer.token_scores(ids, mask)
    want = eager_reference(model, ids, mask, resolve_layers(layers, 4))
    assert got.shape == (3, 12)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    # each real row is a probability distribution over the real tokens
    torch.testing.assert_close(got.sum(1), torch.ones(3), atol=1e-5, rtol=0)
    if mask is not None:
        assert (got[mask == 0] == 0).all()


@pytest.mark.parametrize("padding", list(PADDINGS))
def test_gated_heads_scorer_gives_each_heads_own_row(padding, tiny_model, char_tokenizer):
    model = tiny_model("qwen3")
    ids = torch.randint(4, 104, (3, 12), generator=torch.Generator().manual_seed(1))
    mask = None if PADDINGS[padding] is None else torch.tensor(PADDINGS[padding])
    gated = AttentionScorer(model, char_tokenizer(), layers=[1, 3], heads="gated")
    got = gated.token_scores(ids, mask)
    heads = model.config.num_attention_heads
    assert got.shape == (2 * heads, 3, 12)
    torch.testing.assert_close(got, eager_reference(model, ids, mask, [1, 3], heads=True),
                               atol=1e-5, rtol=0)  # fmt: skip
    averaged = AttentionScorer(model, char_tokenizer(), layers=[1, 3]).token_scores(ids, mask)
    torch.testing.assert_close(got.mean(0), averaged, atol=1e-6, rtol=0)
    with pytest.raises(TraacError, match="probe_heads"):
        AttentionScorer(model, char_tokenizer(), heads="best")


def test_padding_does_not_change_a_sequence_scores(tiny_model, char_tokenizer):
    model = tiny_model("qwen3")
    scorer = AttentionScorer(model, char_tokenizer())
    ids = torch.randint(4, 104, (1, 7), generator=torch.Generator().manual_seed(2))
    alone = scorer.token_scores(ids)[0]
    filler = torch.full((1, 5), 0)
    left = scorer.token_scores(torch.cat([filler, ids], 1), torch.tensor([[0] * 5 + [1] * 7]))
    right = scorer.token_scores(torch.cat([ids, filler], 1), torch.tensor([[1] * 7 + [0] * 5]))
    torch.testing.assert_close(left[0, 5:], alone, atol=1e-5, rtol=0)
    torch.testing.assert_close(right[0, :7], alone, atol=1e-5, rtol=0)


@pytest.mark.parametrize("arch", list(ARCHS))
@pytest.mark.parametrize("left_pad", [False, True])
def test_capture_against_kv_cache_equals_full_forward(arch, left_pad, tiny_model):
    """A suffix run against a cache gives the last query's row over cache + suffix keys."""
    model = tiny_model(arch)
    ids = torch.randint(4, 104, (2, 14), generator=torch.Generator().manual_seed(3))
    mask = torch.ones_like(ids)
    if left_pad:
        mask[1, :3] = 0
    want = eager_reference(model, ids, mask, range(4))
    position_ids = (mask.cumsum(1) - 1).clamp(min=0)
    cache = DynamicCache(config=model.config)
    with torch.no_grad():
        model(
            ids[:, :10],
            attention_mask=mask[:, :10],
            position_ids=position_ids[:, :10],
            past_key_values=cache,
            use_cache=True,
        )
        with capture_probe_rows(model) as rows:
            model(
                ids[:, 10:],
                attention_mask=mask,
                position_ids=position_ids[:, 10:],
                past_key_values=cache,
                use_cache=True,
            )
    got = rows.mean().masked_fill(mask == 0, 0.0)
    assert got.shape == (2, 14)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


def test_single_token_decode_step_against_cache(tiny_model):
    model = tiny_model("qwen3")
    ids = torch.randint(4, 104, (1, 9), generator=torch.Generator().manual_seed(4))
    want = eager_reference(model, ids, None, range(4))
    cache = DynamicCache(config=model.config)
    with torch.no_grad():
        model(ids[:, :8], past_key_values=cache, use_cache=True)
        with capture_probe_rows(model, "all", heads=True) as rows:
            model(ids[:, 8:], past_key_values=cache, use_cache=True)
    torch.testing.assert_close(rows.mean(), want, atol=1e-5, rtol=0)
    per_head = eager_reference(model, ids, None, range(4), heads=True).transpose(0, 1)
    torch.testing.assert_close(rows.per_head(), per_head, atol=1e-5, rtol=0)


def test_the_probe_row_of_bf16_queries_and_keys_is_computed_in_float32():
    """A bf16 model hands the probe bf16 q and k (4,000 keys, 32 query / 8 key-value heads, as
    Qwen3-4B): the row must be the float32 softmax of those values, as SDPA keeps its scores.
    A bf16 product rounds each logit and moves the row by percents per token."""
    gen = torch.Generator().manual_seed(0)
    query = torch.randn(1, 32, 1, 128, generator=gen).bfloat16()  # the closer's query
    key = torch.randn(1, 8, 4000, 128, generator=gen).bfloat16()
    scale = 128**-0.5
    got = probe_row(query, key, None, scale, True, None, keep_heads=True)
    q32, k32 = query[0, :, 0].float(), key[0].float()  # (32, 128), (8, 4000, 128)
    want = torch.stack([torch.softmax(q32[h] @ k32[h // 4].T * scale, -1) for h in range(32)])
    assert got.dtype == torch.float32 and got.shape == (1, 32, 4000)
    torch.testing.assert_close(got[0], want, rtol=1e-4, atol=1e-9)


def test_attention_implementation_is_restored_even_on_error(tiny_model, char_tokenizer):
    model = tiny_model("llama")
    before = model.config._attn_implementation
    with pytest.raises(ValueError), capture_probe_rows(model):
        assert model.config._attn_implementation == "traac_probe"
        raise ValueError("boom")
    assert model.config._attn_implementation == before
    model.set_attn_implementation("sdpa")
    AttentionScorer(model, char_tokenizer()).token_scores(torch.tensor([[5, 6, 7]]))
    assert model.config._attn_implementation == "sdpa"


def test_rows_missing_without_forward(tiny_model):
    with capture_probe_rows(tiny_model()) as rows, pytest.raises(TraacError, match="layers"):
        rows.mean()


def test_resolve_layers():
    assert resolve_layers("all", 4) == [0, 1, 2, 3]
    assert resolve_layers("first_half", 36) == list(range(18))
    assert resolve_layers("first_half", 1) == [0]
    assert resolve_layers("2,0", 4) == [0, 2]
    assert resolve_layers([3, 1, 1], 4) == [1, 3]
    for bad in ("last", [4], [-1], []):
        with pytest.raises(TraacError, match="layers"):
            resolve_layers(bad, 4)


def test_score_matches_token_scores_and_offsets(tiny_model, char_tokenizer):
    model, tok = tiny_model(), char_tokenizer()
    scorer = AttentionScorer(model, tok, batch_size=2)
    texts = ["<think>So x=1.</think>", "<think>Wait, no</think>", "<think>Hmm. Now y</think>"]
    scored = scorer.score(probe_requests(texts))
    for text, ts in zip(texts, scored, strict=True):
        ids = torch.tensor([tok(text, add_special_tokens=False)["input_ids"]])
        alone = scorer.token_scores(ids)[0].double().numpy()
        np.testing.assert_allclose(ts.scores, alone, atol=1e-6)
        assert [text[a:b] for a, b in ts.offsets][:1] == ["<think>"]
        assert text[ts.offsets[-1][0] : ts.offsets[-1][1]] == "</think>"


def test_probe_must_end_with_the_closer(tiny_model, char_tokenizer):
    scorer = AttentionScorer(tiny_model(), char_tokenizer())
    with pytest.raises(TraacError, match="must end with '</think>'"):
        scorer.score(probe_requests(["<think>no closer"]))
    merged = char_tokenizer(merges=[("x", "]")])  # the last token reaches back past the closer
    custom = AttentionScorer(tiny_model(vocab_size=len(merged)), merged, think_close="]")
    with pytest.raises(TraacError, match=r"last token is 'x\]'"):
        custom.score(probe_requests(["<think>x]"]))


def test_a_split_closer_reads_from_its_last_token(tiny_model, char_tokenizer):
    """A tokenizer without a closer token (SmolLM2 splits `</think>` into three) is probed from
    the closer's last piece, which has seen the whole closer (docs/method.md#probe)."""
    model, tok = tiny_model(), char_tokenizer()
    scorer = AttentionScorer(model, tok, think_close="[END]")
    text = "<think>So x=1. Wait, x=1.[END]"
    [scored] = scorer.score(probe_requests([text]))
    assert text[slice(*scored.offsets[-1])] == "]"
    ids = torch.tensor([tok(text, add_special_tokens=False)["input_ids"]])
    eager = eager_reference(model, ids, None, range(4))[0].double().numpy()
    np.testing.assert_allclose(scored.scores, eager, atol=1e-6)


def test_too_long_text_names_lengths_and_is_not_truncated(tiny_model, char_tokenizer):
    scorer = AttentionScorer(tiny_model(max_position_embeddings=16), char_tokenizer())
    with pytest.raises(TraacError, match="is 27 tokens but the model takes at most 16"):
        scorer.score(probe_requests(["<think>" + "a" * 25 + "</think>"]))
    with pytest.raises(TraacError, match="no tokens"):
        scorer.score(probe_requests([""]))


def test_attention_scorer_drives_compression(tiny_model, char_tokenizer):
    scorer = AttentionScorer(tiny_model(), char_tokenizer())
    reasoning = "First add. Wait, check it. So the sum is 4. Hmm, again. Therefore 4."
    settings = CompressionSettings(uniformity_gate=1.0)
    result = Compressor(scorer, ChatFormat(), settings)([reasoning], [0.6])[0]
    assert len(result.scores) == len(result.steps) == len(result.kept)
    assert result.tokens_before == len(reasoning)
    assert result.n_evicted == math.floor(len(result.steps) * result.eviction_fraction + 1e-9)
    assert result.text == "".join(
        s.text for s, k in zip(result.steps, result.kept, strict=True) if k
    )


def test_topk_confidence_extremes():
    uniform = torch.zeros(2, 50)
    assert torch.allclose(topk_confidence(uniform, 5), torch.zeros(2), atol=1e-6)
    peaked = torch.full((1, 50), -1e4)
    peaked[0, 7] = 0.0
    assert topk_confidence(peaked, 5).item() == pytest.approx(1.0, abs=1e-6)
    two = torch.full((1, 50), -1e4)
    two[0, :2] = 0.0  # two equally likely tokens: H = log 2
    assert topk_confidence(two, 4).item() == pytest.approx(1 - math.log(2) / math.log(4), abs=1e-5)


@pytest.mark.parametrize("padding", ["none", "right", "left"])
def test_confidence_scorer_matches_full_logits(padding, tiny_model, char_tokenizer):
    model = tiny_model("llama")
    scorer = ConfidenceScorer(model, char_tokenizer(), k=10)
    ids = torch.randint(4, 104, (3, 12), generator=torch.Generator().manual_seed(5))
    mask = None if PADDINGS[padding] is None else torch.tensor(PADDINGS[padding])
    got = scorer.token_scores(ids, mask)
    for b in range(3):
        real = ids[b] if mask is None else ids[b][mask[b].bool()]
        with torch.no_grad():
            logits = model(real[None]).logits[0]
        want = torch.cat([torch.zeros(1), topk_confidence(logits[:-1], 10)])
        mine = got[b] if mask is None else got[b][mask[b].bool()]
        torch.testing.assert_close(mine, want, atol=1e-5, rtol=0)
        if mask is not None:
            assert (got[b][~mask[b].bool()] == 0).all()


def test_confidence_reads_the_policy_with_the_question_in_context(tiny_model, char_tokenizer):
    """docs/method.md#ablation-scorers: each reasoning token's confidence comes from the
    distribution that predicted it with the question (the prompt) in front, mapped onto the
    probe's offsets; the prompt's own tokens count in no step. A scorer that dropped the
    question fails here."""
    model, tok = tiny_model("qwen3", k_scale=8.0), char_tokenizer()
    scorer = ConfidenceScorer(model, tok, k=8, think_open="<think>")
    reasoning = "So 2+2 is 4. Wait, 4."
    probe = ChatFormat().probe_text(reasoning)
    asked = [ScoreRequest(reasoning, probe, f"What is 2+2, {q}?<think>") for q in ("Ann", "Bob")]
    first, second = scorer.score(asked)
    ids = tok(asked[0].context + reasoning, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0]
    start = len(tok(asked[0].context, add_special_tokens=False)["input_ids"])
    want = topk_confidence(logits[start - 1 : -1], 8).double().numpy()
    inside = first.offsets[:, 0] >= len("<think>")
    np.testing.assert_allclose(first.scores[inside], want, atol=1e-5)
    # offsets are the probe's: the reasoning sits after the opener
    assert [probe[a:b] for a, b in first.offsets[inside]] == list(reasoning)
    # the prompt's tokens fall before the probe; its opener lands on the probe's opener
    assert (first.offsets[~inside, 0] < 0).sum() == len(first.offsets) - len(reasoning) - 1
    assert probe[slice(*first.offsets[~inside][-1])] == "<think>"
    assert not np.allclose(first.scores[inside], second.scores[inside])  # the question matters
    with pytest.raises(TraacError, match="question in context"):
        scorer.score([ScoreRequest(reasoning, probe)])


def test_confidence_top_k_is_validated(tiny_model, char_tokenizer):
    with pytest.raises(TraacError, match="top_k"):
        ConfidenceScorer(tiny_model(), char_tokenizer(), k=1)


def test_the_vocabulary_is_read_where_zero3_partitioning_leaves_it(tiny_model, char_tokenizer):
    """DeepSpeed ZeRO-3 empties every weight on every process (`weight.shape` is 0; the real one
    is its `ds_shape`), even with zero3_init_flag off. The confidence scorer's range check and
    its logit chunks read the vocabulary where partitioning leaves it."""
    model = tiny_model("llama")
    head = model.get_output_embeddings()
    vocab = head.out_features
    full = ConfidenceScorer(model, char_tokenizer(), k=10).token_scores(torch.tensor([[5, 9, 7]]))
    weight = head.weight.data
    head.weight.data = torch.empty(0)
    head.weight.ds_shape = torch.Size([vocab, weight.shape[1]])
    scorer = ConfidenceScorer(model, char_tokenizer(), k=20)
    with pytest.raises(TraacError, match=rf"\[2, {vocab}\]"):
        ConfidenceScorer(model, char_tokenizer(), k=vocab + 1)

    def gather(*args):  # DeepSpeed's hooks: the weight is whole only inside the head's forward
        head.weight.data = weight

    def release(*args):
        head.weight.data = torch.empty(0)

    head.register_forward_pre_hook(gather)
    head.register_forward_hook(release)
    scorer.k = 10
    torch.testing.assert_close(scorer.token_scores(torch.tensor([[5, 9, 7]])), full)


def test_random_scorer_is_seeded_and_constant_per_step(char_tokenizer):
    tok = char_tokenizer()
    text = "<think>add a. Wait b. So c.</think>"
    a = RandomScorer(tok, seed=3).score(probe_requests([text, "<think>x</think>"]))
    b = RandomScorer(tok, seed=3).score(probe_requests(["<think>x</think>", text]))
    c = RandomScorer(tok, seed=4).score(probe_requests([text]))
    np.testing.assert_array_equal(a[0].scores, b[1].scores)
    assert not np.array_equal(a[0].scores, c[0].scores)
    wait_at = text.index("Wait")
    before = a[0].scores[a[0].offsets[:, 0] < wait_at]
    assert len(set(before.tolist())) == 1  # the whole first step shares one score


@pytest.fixture(scope="module")
def scorers(tiny_model, char_tokenizer):
    model, tokenizer = tiny_model("qwen3"), char_tokenizer()
    return tokenizer, {
        "attention": AttentionScorer(model, tokenizer, batch_size=3),
        "confidence": ConfidenceScorer(model, tokenizer, k=8, batch_size=3, think_open="<think>"),
        "random": RandomScorer(tokenizer, seed=0),
    }


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    reasonings=st.lists(
        st.text(alphabet=string.ascii_letters + " .,\n", min_size=1, max_size=60),
        min_size=1,
        max_size=4,
    ),
    name=st.sampled_from(["attention", "confidence", "random"]),
)
def test_scores_are_non_negative_and_finite(scorers, reasonings, name):
    tokenizer, by_name = scorers
    fmt = ChatFormat()
    requests = [ScoreRequest(r, fmt.probe_text(r), "Q?<think>") for r in reasonings]
    for request, ts in zip(requests, by_name[name].score(requests), strict=True):
        text = request.probe if name != "confidence" else request.context + request.reasoning
        assert ts.scores.shape == (len(ts.offsets),) == (len(tokenizer.tokenize(text)),)
        assert np.isfinite(ts.scores).all() and (ts.scores >= 0).all()


REASONING = (
    "Let me compute 7 + 5 first. 7 + 5 = 12. Wait, let me double-check: 12 - 5 = 7, so 12 is "
    "right. Then 12 * 3 = 36. So the answer is 36."
)


@pytest.fixture(scope="module")
def smollm2_pair(smollm2):
    model = AutoModelForCausalLM.from_pretrained(smollm2, dtype=torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(smollm2)


@pytest.mark.parametrize("side", ["left", "right"])
def test_probe_equals_eager_attention_on_a_real_llama_sink_included(side, smollm2_pair):
    """SmolLM2 (30 layers, 9 query / 3 key-value heads) has an attention sink on its first
    token; the O(T) probe must read it exactly as `output_attentions` does, through padding."""
    model, tok = smollm2_pair
    fmt = ChatFormat()
    texts = [fmt.probe_text(REASONING), fmt.probe_text("So 2 + 2 = 4."), fmt.probe_text("Hmm.")]
    tok.padding_side = side
    batch = tok(texts, add_special_tokens=False, padding=True, return_tensors="pt")
    ids, mask = batch["input_ids"], batch["attention_mask"]
    scorer = AttentionScorer(model, tok, batch_size=3)
    got = scorer.token_scores(ids, mask)
    want = eager_reference(model, ids, mask, range(model.config.num_hidden_layers))
    torch.testing.assert_close(got, want, atol=2e-5, rtol=1e-4)
    first = mask.int().argmax(dim=1)
    sink = got[torch.arange(3), first]
    assert (sink > 0.1).all(), sink  # the sink the testbed lacks: a real share on token 0
