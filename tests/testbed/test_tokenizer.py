"""The testbed tokenizer: byte-level round trip, offsets, single-digit tokens, think delimiters,
chat template, and the pre-tokenized SFT records."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traac.compression.formats import ChatFormat, resolve_chat_format
from traac.testbed import config as testbed_config
from traac.testbed.build import _corpus, sft_records, teacher_traces, tokenize_records
from traac.testbed.tokenizer import EOS, PAD, THINK_CLOSE, THINK_OPEN, build_tokenizer


@pytest.fixture(scope="module")
def teacher():
    config = testbed_config.TestbedSettings(train=testbed_config.TrainSettings(n_traces=300))
    return teacher_traces(config)


@pytest.fixture(scope="module")
def tokenizer(teacher):
    return build_tokenizer(_corpus(*teacher), 512)


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=80))
def test_any_text_round_trips(tokenizer, text):
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids) == text
    assert tokenizer.unk_token_id is None or tokenizer.unk_token_id not in ids


def test_offsets_cover_the_text_and_digits_are_single(tokenizer, teacher):
    text = teacher[1][0].response() + " 1234567890 -42"
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    pieces = [text[a:b] for a, b in enc["offset_mapping"]]
    assert "".join(pieces) == text
    assert all(sum(c.isdigit() for c in piece) <= 1 for piece in pieces)


def test_think_delimiters_are_single_tokens_kept_by_decode(tokenizer):
    text = f"{THINK_OPEN}First, 1 + 2 = 3.\n{THINK_CLOSE}The answer is \\boxed{{3}}.{EOS}"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    for delimiter in (THINK_OPEN, THINK_CLOSE, EOS):
        assert tokenizer.convert_tokens_to_ids(delimiter) in ids
    assert len(tokenizer(THINK_CLOSE, add_special_tokens=False)["input_ids"]) == 1
    kept = tokenizer.decode(ids, skip_special_tokens=True)
    assert kept == text.removesuffix(EOS)  # eos is special, the think delimiters are not
    assert tokenizer.eos_token == EOS and tokenizer.pad_token == PAD
    assert tokenizer.pad_token_id != tokenizer.eos_token_id


def test_chat_template_wraps_the_question_and_saves(tokenizer, tmp_path):
    from transformers import AutoTokenizer

    messages = [{"role": "user", "content": "What is 2 + 2?"}]
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert prompt == "<|im_start|>user\nWhat is 2 + 2?<|im_end|>\n<|im_start|>assistant\n"
    with_system = [{"role": "system", "content": "Be brief."}, *messages]
    assert tokenizer.apply_chat_template(
        with_system, add_generation_prompt=True, tokenize=False
    ).endswith(prompt)
    # the response writes the opener itself (Qwen3 layout), and auto-detection agrees
    assert resolve_chat_format("auto", tokenizer=tokenizer) == ChatFormat()
    tokenizer.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert loaded.is_fast
    assert (
        loaded.apply_chat_template(messages, add_generation_prompt=True, tokenize=False) == prompt
    )
    text = "<think>So the answer is 4.\n</think>The answer is \\boxed{4}."
    assert loaded(text)["input_ids"] == tokenizer(text)["input_ids"]
    assert loaded.padding_side == "left"


def test_sft_records_tokenize_like_the_chat_template(tokenizer, teacher):
    entries, traces = teacher
    records = sft_records(entries, traces, tokenizer)
    dataset = tokenize_records(records, tokenizer)
    seen_interrupted = False
    for entry, trace, record, ids, mask in zip(
        entries, traces, records, dataset["input_ids"], dataset["completion_mask"], strict=True
    ):
        user = [{"role": "user", "content": entry["question"]}]
        prompt = tokenizer.apply_chat_template(user, add_generation_prompt=True, tokenize=False)
        assert record["prompt"] == prompt + trace.forced
        if trace.interrupted:  # the forced think block is context, not trained on
            seen_interrupted = True
            assert trace.forced.endswith(THINK_CLOSE) and THINK_CLOSE not in record["completion"]
        else:
            full = [*user, {"role": "assistant", "content": record["completion"]}]
            rendered = tokenizer.apply_chat_template(full, tokenize=False)
            assert rendered == record["prompt"] + record["completion"] + EOS
        text = record["prompt"] + record["completion"] + EOS
        assert ids == tokenizer(text, add_special_tokens=False)["input_ids"]
        n_prompt = len(tokenizer(record["prompt"], add_special_tokens=False)["input_ids"])
        assert mask == [0] * n_prompt + [1] * (len(ids) - n_prompt)
        assert ids[-1] == tokenizer.eos_token_id
    assert seen_interrupted
