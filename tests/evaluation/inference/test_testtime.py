"""Test-time compression: the cached probe gives the re-forward's scores, the answer is written
from the compressed reasoning, and without eviction decoding is plain `generate`'s."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from traac.compression.compression import Compressor, ScoreRequest, step_scores, uniformity
from traac.compression.formats import AUX_PROMPT, ChatFormat
from traac.compression.scoring import AttentionScorer
from traac.compression.segmentation import split_steps
from traac.compression.settings import CompressionSettings
from traac.errors import TraacError
from traac.evaluation.inference.generation import Sampling
from traac.evaluation.inference.responses import Generation
from traac.evaluation.inference.testtime import ThinkingGenerator
from traac.evaluation.inference.thinking_backend import ThinkingBackend

SPECIALS = ["<pad>", "<eos>", "<think>", "</think>"]
PAD, EOS, OPEN, CLOSE = range(4)
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


class Script:
    """A logits processor forcing, per prompt, the response's tokens up to the closer (the
    closer, if any, included) and then the answer (None: the model's own), each followed by eos
    when exhausted. Rows are told apart by their prompt (no prompt may be a prefix of another).
    """

    def __init__(self, tokenizer, plans: dict[str, tuple[list[int], list[int] | None]]) -> None:
        self.plans = {
            tuple(tokenizer.encode(p, add_special_tokens=False)): plan for p, plan in plans.items()
        }

    def __call__(self, history: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        out = logits.clone()
        for r, row in enumerate(history.tolist()):
            row = row[next(k for k, t in enumerate(row) if t != PAD) :]
            prompt = next(p for p in self.plans if tuple(row[: len(p)]) == p)
            think, answer = self.plans[prompt]
            after = row[len(prompt) :]
            if CLOSE in after:
                if answer is None:  # the model answers on its own
                    continue
                target, done = answer, len(after) - after.index(CLOSE) - 1
            else:
                target, done = think, len(after)
            out[r] = float("-inf")
            out[r, target[done] if done < len(target) else EOS] = 0.0
        return out


@pytest.fixture
def tokenizer(char_tokenizer):
    """One token per printable character, plus one merge (".\\n") so that a reasoning ending in
    "." merges with the probe's separator, and so that sampling "." then "\\n" is a
    tokenization the tokenizer itself would not produce."""
    return char_tokenizer(SPECIALS, eos="<eos>", merges=[(".", "\n")], chat_template=CHAT_TEMPLATE)


@pytest.fixture
def make_model(tiny_model):
    """Random tiny Qwen3 whose query norm is scaled up: attention sharp enough that step scores
    are uneven and the eviction rule acts."""

    def make(tokenizer, max_positions: int = 512):
        return tiny_model(
            vocab_size=len(tokenizer),
            q_scale=16.0,
            max_position_embeddings=max_positions,
            pad_token_id=PAD,
            eos_token_id=EOS,
        )

    return make


@pytest.fixture
def model(make_model, tokenizer):
    return make_model(tokenizer)


def enc(tokenizer, *pieces: str) -> list[int]:
    """Token ids of each piece, tokenized on its own and concatenated."""
    return [t for p in pieces for t in tokenizer.encode(p, add_special_tokens=False)]


REASONINGS = {
    "q1": "So 2+2 is 4. Wait, check: 2+2=4. Therefore 4.",
    "a longer question, which pads the others": "First x. Then y. Hmm z. So y",
    "q3?": "Okay. Let me see. So the answer is 7. Wait no 8. Hmm, 9? Then 10. So 8",
}


def plans_for(tokenizer, prompts: dict[str, str]) -> dict[str, tuple[list[int], list[int]]]:
    """The model opens its think block, reasons as given, closes it and answers " \\boxed{8}"."""
    return {
        prompt: ([OPEN, *enc(tokenizer, reasoning), CLOSE], enc(tokenizer, " \\boxed{8}"))
        for prompt, reasoning in prompts.items()
    }


def reference(model, tokenizer, chat_format, reasoning: str, tau: float, layers="all", **settings):
    """The full re-forward of the probe text: compression.py with the attention scorer."""
    settings = CompressionSettings(probe_layers=layers, **settings)
    scorer = AttentionScorer(model, tokenizer, layers, heads=settings.probe_heads)
    return Compressor(scorer, chat_format, settings)([reasoning], [tau])[0]


def suffix_tokens(tokenizer) -> int:
    return len(enc(tokenizer, "\n" + AUX_PROMPT)) + 1


@pytest.mark.parametrize(("layers", "chunk"), [("all", 1), ("first_half", 1), ("all", 32)])
def test_cached_probe_gives_the_reforward_step_scores(model, tokenizer, layers, chunk):
    fmt = ChatFormat()
    generator = ThinkingGenerator(
        model,
        tokenizer,
        fmt,
        compress_tau=1.0,
        settings=CompressionSettings(probe_layers=layers),
        probe_chunk=chunk,
    )
    prompt = "q1"
    (sample,) = generator.generate(
        [prompt],
        logits_processor=Script(tokenizer, plans_for(tokenizer, {prompt: REASONINGS[prompt]})),
    )
    assert sample.reasoning == REASONINGS[prompt]
    ref = reference(model, tokenizer, fmt, sample.reasoning, 1.0, layers=layers)
    comp = sample.compression
    assert len(comp.scores) == len(ref.scores) > 3
    np.testing.assert_allclose(comp.scores, ref.scores, rtol=0, atol=1e-5)
    assert comp.kept == ref.kept and comp.text == ref.text
    if chunk == 1:
        # Only separator + auxiliary prompt + closer ran; the reasoning ends with "." which
        # merges with the separator into ".\n": the cached "." is dropped, ".\n" runs instead.
        assert sample.probe_tokens == suffix_tokens(tokenizer)
        probe = tokenizer.encode(fmt.probe_text(sample.reasoning), add_special_tokens=False)
        assert tokenizer.convert_ids_to_tokens(probe[-sample.probe_tokens]) == ".\n"
    else:  # the 45 reasoning tokens were fed 32 at a time: the last 13 run with the suffix
        assert sample.probe_tokens == suffix_tokens(tokenizer) + 45 - 32 - 1


def test_cached_probe_keeps_each_heads_row_for_gated_heads(model, tokenizer):
    """With a gate between the heads' own uniformities, gated scores differ from the mean, and
    the cached probe (one row per head from the KV cache) still gives the re-forward's."""
    fmt, reasoning = ChatFormat(), REASONINGS["q1"]
    probe = fmt.probe_text(reasoning)
    gated = AttentionScorer(model, tokenizer, heads="gated")
    (rows,) = gated.score([ScoreRequest(reasoning, probe)])
    gate = float(np.median([uniformity(s) for s in step_scores(rows, split_steps(probe))]))
    generator = ThinkingGenerator(
        model, tokenizer, fmt, compress_tau=1.0, probe_chunk=4,
        settings=CompressionSettings(probe_heads="gated", uniformity_gate=gate),
    )  # fmt: skip
    (sample,) = generator.generate(
        ["q1"], logits_processor=Script(tokenizer, plans_for(tokenizer, {"q1": reasoning}))
    )
    ref = reference(
        model, tokenizer, fmt, reasoning, 1.0, probe_heads="gated", uniformity_gate=gate
    )
    mean = reference(model, tokenizer, fmt, reasoning, 1.0, uniformity_gate=gate)
    assert np.abs(ref.scores - mean.scores).max() > 1e-3
    np.testing.assert_allclose(sample.compression.scores, ref.scores, rtol=0, atol=1e-5)
    assert sample.compression.kept == ref.kept


@pytest.mark.parametrize("chunk", [1, 4, 32])
def test_batch_of_prompts_of_different_lengths_matches_reforward(model, tokenizer, chunk):
    fmt = ChatFormat()
    plans = plans_for(tokenizer, REASONINGS)
    # A sampled tokenization the tokenizer would not produce ("." then "\n", not ".\n"): the
    # cache holds it, the probe text's tokenization does not, so the suffix starts there.
    odd = "an odd one"
    plans[odd] = ([OPEN, *enc(tokenizer, "So a.", "\n", "Wait b. Thus c"), CLOSE], [])
    # Text before the opener: this row's probe cache starts later than the others'.
    late = "late opener"
    plans[late] = ([*enc(tokenizer, "Hmm. "), OPEN, *enc(tokenizer, REASONINGS["q3?"]), CLOSE], [])
    prompts = list(plans)
    generator = ThinkingGenerator(model, tokenizer, fmt, compress_tau=1.0, probe_chunk=chunk)
    samples = generator.generate(prompts, logits_processor=Script(tokenizer, plans))
    reforward = ThinkingGenerator(model, tokenizer, fmt, compress_tau=1.0, probe="reforward")
    again = reforward.generate(prompts, logits_processor=Script(tokenizer, plans))
    for sample, other in zip(samples, again, strict=True):
        ref = reference(model, tokenizer, fmt, sample.reasoning, 1.0)
        np.testing.assert_allclose(sample.compression.scores, ref.scores, rtol=0, atol=1e-5)
        assert sample.compression.kept == ref.kept
        assert sample.text == other.text
        np.testing.assert_allclose(sample.compression.scores, other.compression.scores, atol=1e-5)
    by_prompt = dict(zip(prompts, samples, strict=True))
    assert by_prompt[late].reasoning == REASONINGS["q3?"]
    for prompt in ("q1", "q3?", late):  # q3? ends in "8": no merge, the same count
        assert suffix_tokens(tokenizer) <= by_prompt[prompt].probe_tokens
        assert by_prompt[prompt].probe_tokens < suffix_tokens(tokenizer) + chunk
    assert by_prompt[odd].probe_tokens > suffix_tokens(tokenizer) + 10


def test_answer_is_written_from_the_compressed_reasoning(model, tokenizer):
    fmt = ChatFormat()
    prompts = list(REASONINGS)
    generator = ThinkingGenerator(model, tokenizer, fmt, compress_tau=1.0)
    samples = generator.generate(
        prompts, logits_processor=Script(tokenizer, plans_for(tokenizer, REASONINGS))
    )
    assert any(s.compressed_reasoning != s.reasoning for s in samples), "nothing evicted"
    for s in samples:
        comp = s.compression
        prefix = tokenizer.encode(fmt.answer_prefix(comp.text), add_special_tokens=False)
        if comp.text != s.reasoning:
            assert s.token_ids[: len(prefix)] == tuple(prefix)
            assert s.tokens_after < s.tokens_before and s.tokens_saved > 0
        else:  # nothing evicted: the model's own tokens, then its answer
            assert s.token_ids[0] == OPEN and s.token_ids[s.reasoning_tokens + 1] == CLOSE
        assert s.answer == " \\boxed{8}"
        assert s.text == fmt.response_text(comp.text, s.answer)
        assert tokenizer.decode(list(s.token_ids)) == s.text
        assert s.finish_reason == "stop"
        assert fmt.parse(s.text).reasoning == comp.text


def test_without_eviction_it_decodes_exactly_as_plain_generate(model, tokenizer):
    """Batched, left-padded decoding with probe twins, then the answer from a fresh prefill,
    gives greedy `model.generate`'s tokens when nothing is evicted."""
    from transformers import LogitsProcessorList

    plans = {p: ([OPEN, *enc(tokenizer, r), CLOSE], None) for p, r in REASONINGS.items()}
    script = Script(tokenizer, plans)
    generator = ThinkingGenerator(model, tokenizer, ChatFormat(), compress_tau=0.0)
    ours = generator.generate(
        list(plans), max_new_tokens=100, temperature=0, logits_processor=script
    )
    rows = [tokenizer.encode(p, add_special_tokens=False) for p in plans]
    width = max(map(len, rows))
    ids = torch.tensor([[PAD] * (width - len(r)) + r for r in rows])
    out = model.generate(
        input_ids=ids,
        attention_mask=(ids != PAD).long(),
        max_new_tokens=100,
        do_sample=False,
        logits_processor=LogitsProcessorList([script]),
        eos_token_id=EOS,
        pad_token_id=PAD,
    )
    for sample, row in zip(ours, out[:, width:].tolist(), strict=True):
        theirs = row[: row.index(EOS)] if EOS in row else row
        assert sample.closed and list(sample.token_ids) == theirs
        assert sample.answer_tokens > 0


def test_tau_zero_keeps_the_reasoning_and_continues_it(model, tokenizer):
    generator = ThinkingGenerator(model, tokenizer, ChatFormat(), compress_tau=0.0)
    plans = plans_for(tokenizer, REASONINGS)
    samples = generator.generate(list(plans), logits_processor=Script(tokenizer, plans))
    for s in samples:
        assert not s.compression.compressed and s.compressed_reasoning == s.reasoning
        assert s.tokens_saved == 0
        think = plans[s.prompt][0]
        assert s.token_ids == (*think, *enc(tokenizer, " \\boxed{8}"))


def test_no_closer_means_no_compression(model, tokenizer):
    fmt = ChatFormat()
    plans = {
        "runs out": ([OPEN, *enc(tokenizer, "So on and on and on")], []),  # then eos
        "too long": ([OPEN, *enc(tokenizer, "Wait " * 20)], []),
    }
    generator = ThinkingGenerator(model, tokenizer, fmt, compress_tau=1.0)
    eos, length = generator.generate(
        list(plans), max_new_tokens=40, logits_processor=Script(tokenizer, plans)
    )
    assert (eos.finish_reason, length.finish_reason) == ("stop", "length")
    for s in (eos, length):
        assert not s.closed and s.compression is None and s.answer == ""
        assert s.text == "<think>" + s.reasoning and s.probe_tokens == 0
        assert s.tokens_before == s.tokens_after == s.reasoning_tokens
    assert eos.reasoning == "So on and on and on"
    assert len(length.token_ids) == 40 and length.reasoning_tokens == 39  # the opener counts


def test_prompt_opens_format(model, tokenizer):
    fmt = ChatFormat(opener_in_prompt=True)
    plans = {"q1<think>": ([*enc(tokenizer, REASONINGS["q1"]), CLOSE], enc(tokenizer, "4"))}
    generator = ThinkingGenerator(model, tokenizer, fmt, compress_tau=1.0, probe_chunk=1)
    (sample,) = generator.generate(["q1<think>"], logits_processor=Script(tokenizer, plans))
    ref = reference(model, tokenizer, fmt, sample.reasoning, 1.0)
    np.testing.assert_allclose(sample.compression.scores, ref.scores, rtol=0, atol=1e-5)
    assert sample.text == f"{sample.compressed_reasoning}</think>4"
    assert sample.probe_tokens == suffix_tokens(tokenizer)


def test_a_preamble_before_the_opener_is_kept_out_of_the_reasoning(model, tokenizer):
    fmt = ChatFormat()
    think = [*enc(tokenizer, "ok "), OPEN, *enc(tokenizer, REASONINGS["q1"]), CLOSE]
    plans = {"q1": (think, enc(tokenizer, "4"))}
    generator = ThinkingGenerator(model, tokenizer, fmt, compress_tau=1.0, probe_chunk=1)
    (sample,) = generator.generate(["q1"], logits_processor=Script(tokenizer, plans))
    assert sample.reasoning == REASONINGS["q1"]
    ref = reference(model, tokenizer, fmt, sample.reasoning, 1.0)
    np.testing.assert_allclose(sample.compression.scores, ref.scores, rtol=0, atol=1e-5)
    assert sample.probe_tokens == suffix_tokens(tokenizer)  # the cache starts at the opener
    assert sample.text == f"ok <think>{sample.compressed_reasoning}</think>4"


def test_a_model_that_never_opens_still_gets_exact_scores(model, tokenizer):
    fmt = ChatFormat()
    plans = {"q1": ([*enc(tokenizer, REASONINGS["q1"]), CLOSE], enc(tokenizer, "4"))}
    generator = ThinkingGenerator(model, tokenizer, fmt, compress_tau=1.0)
    (sample,) = generator.generate(["q1"], logits_processor=Script(tokenizer, plans))
    assert sample.reasoning == REASONINGS["q1"]  # what ChatFormat.parse calls the reasoning
    ref = reference(model, tokenizer, fmt, sample.reasoning, 1.0)
    np.testing.assert_allclose(sample.compression.scores, ref.scores, rtol=0, atol=1e-5)
    probe = tokenizer.encode(fmt.probe_text(sample.reasoning), add_special_tokens=False)
    assert sample.probe_tokens == len(probe) - 1  # only the opener was cached
    assert sample.text == f"{sample.compressed_reasoning}</think>4"


@pytest.mark.parametrize("probe", ["cached", "reforward"])
def test_a_probe_longer_than_the_model_takes_is_not_compressed(make_model, tokenizer, probe):
    model = make_model(tokenizer, max_positions=150)  # the probe of q1 is 162 tokens
    plans = plans_for(tokenizer, {"q1": REASONINGS["q1"]})
    generator = ThinkingGenerator(model, tokenizer, ChatFormat(), compress_tau=1.0, probe=probe)
    (sample,) = generator.generate(["q1"], logits_processor=Script(tokenizer, plans))
    assert sample.closed and sample.tokens_saved == 0 and sample.probe_tokens == 0
    assert "more than the model's 150 positions" in sample.note
    assert sample.text == f"<think>{REASONINGS['q1']}</think> \\boxed{{8}}"


def test_sampling_is_seeded_and_bounded(model, tokenizer):
    generator = ThinkingGenerator(model, tokenizer, ChatFormat())
    prompts = ["a", "bb", "ccc"]
    first = generator.generate(prompts, max_new_tokens=30, seed=3)
    assert [s.text for s in first] == [
        s.text for s in generator.generate(prompts, max_new_tokens=30, seed=3)
    ]
    assert [s.text for s in first] != [
        s.text for s in generator.generate(prompts, max_new_tokens=30, seed=4)
    ]
    for s in first:
        assert len(s.token_ids) <= 30 and s.reasoning_tokens + s.answer_tokens <= 30


def test_backend_gives_generations_with_tokens_saved(model, tokenizer):
    plans = plans_for(tokenizer, REASONINGS)
    generator = ThinkingGenerator(model, tokenizer, ChatFormat(), compress_tau=1.0)
    generator_generate = generator.generate
    generator.generate = lambda prompts, **kw: generator_generate(  # force the scripts
        prompts, logits_processor=Script(tokenizer, plans), **kw
    )
    backend = ThinkingBackend(generator)
    assert backend.max_context == 512 and backend.tokenizer is tokenizer
    outs = backend.generate(
        list(plans), Sampling(temperature=0, max_new_tokens=200), ["a", "b", "c"]
    )
    assert all(isinstance(g, Generation) for g in outs)
    saved = [g.extra["ttc_tokens_saved"] for g in outs]
    assert any(saved)
    for g, prompt in zip(outs, plans, strict=True):
        extra = g.extra
        assert extra["ttc_closed"] and extra["ttc_original_reasoning"] == REASONINGS[prompt]
        assert (
            extra["ttc_reasoning_tokens_before"] - extra["ttc_reasoning_tokens_after"]
            == (extra["ttc_tokens_saved"])
        )
        assert g.text.endswith("</think> \\boxed{8}") and g.finish_reason == "stop"
        assert g.interrupted is None and g.budget_think_tokens is None  # no think budget


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (lambda: {"compress_tau": 1.5}, "compress_tau"),
        (lambda: {"compress_tau": float("nan")}, "compress_tau"),
        (lambda: {"probe": "fast"}, "probe"),
        (lambda: {"probe_chunk": 0}, "probe_chunk"),
        (lambda: {"settings": CompressionSettings(uniformity_gate=2.0)}, "uniformity_gate"),
        (lambda: {"settings": CompressionSettings(probe_layers="9")}, "layers"),
        (lambda: {"settings": CompressionSettings(scorer="random")}, "attention scorer"),
    ],
)
def test_bad_settings_are_one_line_errors(model, tokenizer, kwargs, message):
    with pytest.raises(TraacError, match=message) as err:
        ThinkingGenerator(model, tokenizer, **kwargs())
    assert "\n" not in str(err.value)


def test_bad_prompts_and_budgets(model, tokenizer):
    generator = ThinkingGenerator(model, tokenizer, ChatFormat())
    with pytest.raises(TraacError, match="empty"):
        generator.generate(["ok", "  "])
    with pytest.raises(TraacError, match="lower max_new_tokens to at most 508"):
        generator.generate(["four"], max_new_tokens=600)
    with pytest.raises(TraacError, match="temperature"):
        generator.generate(["four"], temperature=-1)
    assert generator.generate([]) == []


LONG = "Wait, 2+2. So 4. Hmm, check it again. Then 4. Let me see once more. So 4 it is."


def interrupted_plans(tokenizer) -> dict[str, tuple[list[int], list[int]]]:
    """One model that thinks past any small budget, one that closes within it."""
    return plans_for(tokenizer, {"long one": LONG, "q1": REASONINGS["q1"][:9]})


@pytest.mark.parametrize("budget", [1, 12, 40])
def test_a_think_budget_interrupts_the_papers_way(model, tokenizer, budget):
    """At B tokens the auxiliary prompt and the closer are appended and the model answers: the
    response is well formed, and its think block is the model's first B tokens."""
    fmt = ChatFormat()
    plans = interrupted_plans(tokenizer)
    generator = ThinkingGenerator(model, tokenizer, fmt, think_budget=budget)
    cut, short = generator.generate(
        list(plans), max_new_tokens=200, logits_processor=Script(tokenizer, plans)
    )
    think, answer = plans["long one"]
    assert cut.interrupted and cut.closed and cut.compression is None
    assert cut.think_tokens == budget and cut.reasoning_tokens == budget - 1  # the opener counts
    reasoning = tokenizer.decode(think[1:budget])
    tail = fmt.aux_separator(reasoning) + AUX_PROMPT
    assert cut.reasoning == reasoning and cut.answer == " \\boxed{8}"
    assert cut.text == f"<think>{reasoning}{tail}</think> \\boxed{{8}}"
    assert cut.token_ids == (*think[:budget], *enc(tokenizer, tail), CLOSE, *answer)
    parsed = fmt.parse(cut.text)
    assert parsed.well_formed and parsed.closed and parsed.answer == " \\boxed{8}"
    if budget > len(plans["q1"][0]):  # closed within the budget: answered as it was
        assert not short.interrupted and short.closed
        assert short.token_ids == (*plans["q1"][0], *plans["q1"][1])
    else:
        assert short.interrupted and short.think_tokens == budget


def test_a_think_budget_with_compression_answers_from_the_pruned_steps(model, tokenizer):
    """With --compress-tau the interrupted reasoning is scored by the probe (the same scores a
    full re-forward gives) and pruned; the answer follows the kept steps, the auxiliary prompt
    and the closer."""
    fmt = ChatFormat()
    plans = interrupted_plans(tokenizer)
    budget = 60
    generator = ThinkingGenerator(model, tokenizer, fmt, compress_tau=1.0, think_budget=budget)
    cut, short = generator.generate(
        list(plans), max_new_tokens=200, logits_processor=Script(tokenizer, plans)
    )
    assert cut.interrupted and not short.interrupted
    assert cut.think_tokens == budget and cut.reasoning == tokenizer.decode(
        plans["long one"][0][1:budget]
    )
    ref = reference(model, tokenizer, fmt, cut.reasoning, 1.0)
    np.testing.assert_allclose(cut.compression.scores, ref.scores, rtol=0, atol=1e-5)
    assert cut.compression.kept == ref.kept and cut.compressed_reasoning == ref.text
    assert ref.text != cut.reasoning and cut.tokens_saved > 0, "nothing evicted"
    tail = fmt.aux_separator(ref.text) + AUX_PROMPT
    assert cut.text == f"<think>{ref.text}{tail}</think> \\boxed{{8}}"
    prefix = [OPEN, *tokenizer.encode(ref.text + tail + "</think>", add_special_tokens=False)]
    assert cut.token_ids == (*prefix, *enc(tokenizer, " \\boxed{8}"))
    assert fmt.parse(cut.text).well_formed
    assert short.compression is not None  # closed within the budget: test-time compression


def test_a_budget_at_or_past_the_token_limit_never_interrupts(model, tokenizer):
    plans = interrupted_plans(tokenizer)
    generator = ThinkingGenerator(model, tokenizer, ChatFormat(), think_budget=30)
    cut, _ = generator.generate(
        list(plans), max_new_tokens=30, logits_processor=Script(tokenizer, plans)
    )
    assert not cut.interrupted and not cut.closed and cut.finish_reason == "length"
    assert len(cut.token_ids) == 30
    # One token short of the limit: interrupted, and the answer has no room left.
    generator = ThinkingGenerator(model, tokenizer, ChatFormat(), think_budget=29)
    cut, _ = generator.generate(
        list(plans), max_new_tokens=30, logits_processor=Script(tokenizer, plans)
    )
    assert cut.interrupted and cut.think_tokens == 29 and cut.answer_tokens <= 1


def test_the_backend_records_the_interruption(model, tokenizer):
    plans = interrupted_plans(tokenizer)
    generator = ThinkingGenerator(model, tokenizer, ChatFormat(), think_budget=12)
    generator_generate = generator.generate
    generator.generate = lambda prompts, **kw: generator_generate(  # force the scripts
        prompts, logits_processor=Script(tokenizer, plans), **kw
    )
    cut, short = ThinkingBackend(generator).generate(
        list(plans), Sampling(temperature=0, max_new_tokens=200), ["a", "b"]
    )
    assert (cut.interrupted, cut.budget_think_tokens) == (True, 12)
    assert (short.interrupted, short.budget_think_tokens) == (False, len(plans["q1"][0]) - 1)
    assert cut.extra == {} and cut.text.endswith("</think> \\boxed{8}")


@pytest.mark.parametrize("budget", [0, -3, True])
def test_a_bad_think_budget_is_a_one_line_error(model, tokenizer, budget):
    with pytest.raises(TraacError, match="think_budget") as err:
        ThinkingGenerator(model, tokenizer, think_budget=budget)
    assert "\n" not in str(err.value)


class Force:
    """A logits processor forcing `tokens` after a prompt of `start` tokens, then `eos`."""

    def __init__(self, start: int, tokens: list[int], eos: int) -> None:
        self.start, self.tokens, self.eos = start, tokens, eos

    def __call__(self, history: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        done = history.shape[1] - self.start
        out = torch.full_like(logits, float("-inf"))
        out[:, self.tokens[done] if done < len(self.tokens) else self.eos] = 0.0
        return out


@pytest.mark.parametrize("chunk", [1, 32])
def test_cached_probe_equals_a_reforward_on_a_real_model_with_a_split_closer(smollm2, chunk):
    """SmolLM2 has no think tokens: `</think>` is `</`, `think`, `>`. Decoding stops once all
    three are sampled, and the cached probe, read from the closer's last piece, gives the
    re-forward's step scores."""
    model = AutoModelForCausalLM.from_pretrained(smollm2, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(smollm2)
    fmt = ChatFormat()
    assert len(tok.encode(fmt.think_close, add_special_tokens=False)) == 3
    reasoning = (
        "\nLet me add 3 and 4 first. 3 + 4 = 7. Wait, let me check: 7 - 4 = 3, yes. "
        "Then 7 * 2 = 14. So the answer is 14.\n"
    )
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": "What is (3 + 4) * 2?"}],
        tokenize=False,
        add_generation_prompt=True,
    )
    start = len(tok.encode(prompt, add_special_tokens=False))
    forced = tok.encode(f"<think>{reasoning}</think> \\boxed{{14}}", add_special_tokens=False)
    generator = ThinkingGenerator(model, tok, fmt, compress_tau=1.0, probe_chunk=chunk)
    (sample,) = generator.generate(
        [prompt], logits_processor=Force(start, forced, tok.eos_token_id), max_new_tokens=80
    )
    assert sample.closed and sample.reasoning == reasoning
    ref = reference(model, tok, fmt, reasoning, 1.0)
    np.testing.assert_allclose(sample.compression.scores, ref.scores, rtol=0, atol=1e-5)
    assert sample.compression.kept == ref.kept
    assert sample.compression.kept != [True] * len(ref.kept)  # the probe selects on this model


def test_a_foreign_scorer_evicts_what_its_own_compressor_does(model, tokenizer, smollm2):
    """Another model (SmolLM2, another tokenizer) scores the steps the tiny model thought: the
    kept steps are those a Compressor built from SmolLM2 keeps on the same reasoning; the
    probe re-runs after decoding and token counts stay the decoding model's."""
    scorer = AutoModelForCausalLM.from_pretrained(smollm2, dtype=torch.float32).eval()
    scorer_tokenizer = AutoTokenizer.from_pretrained(smollm2)
    fmt = ChatFormat()
    generator = ThinkingGenerator(
        model, tokenizer, fmt, compress_tau=1.0,
        scoring_model=scorer, scoring_tokenizer=scorer_tokenizer,
    )  # fmt: skip
    assert generator.probe == "reforward"
    plans = plans_for(tokenizer, REASONINGS)
    samples = generator.generate(list(plans), logits_processor=Script(tokenizer, plans))
    assert any(s.compressed_reasoning != s.reasoning for s in samples), "nothing evicted"
    for s in samples:
        ref = reference(scorer, scorer_tokenizer, fmt, s.reasoning, 1.0)
        np.testing.assert_allclose(s.compression.scores, ref.scores, rtol=0, atol=1e-6)
        assert s.compression.kept == ref.kept and s.compressed_reasoning == ref.text
        assert s.tokens_before == s.reasoning_tokens == len(enc(tokenizer, s.reasoning))
        assert s.tokens_after == len(enc(tokenizer, ref.text))
        assert s.answer == " \\boxed{8}"


def test_a_scoring_model_needs_its_tokenizer(model, tokenizer):
    with pytest.raises(TraacError, match="needs its tokenizer"):
        ThinkingGenerator(model, tokenizer, compress_tau=0.4, scoring_model=model)
