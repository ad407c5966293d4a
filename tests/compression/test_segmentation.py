import itertools

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from transformers import AutoTokenizer

from traac.compression.formats import ChatFormat
from traac.compression.scoring import encode_offsets
from traac.compression.segmentation import (
    SPLIT_PHRASES,
    Step,
    split_steps,
    steps_to_token_spans,
    token_step_index,
    trim_offsets,
)


def test_paper_phrase_list_has_32_entries():
    assert len(SPLIT_PHRASES) == 32
    assert len(set(SPLIT_PHRASES)) == 32


def test_splits_before_each_phrase():
    text = "First, 3 + 4 = 7. Then 7 * 2 = 14. So the answer is 14. Wait, let me check."
    steps = split_steps(text)
    assert [s.text for s in steps] == [
        "First, 3 + 4 = 7. ",
        "Then 7 * 2 = 14. ",
        "So the answer is 14. ",
        "Wait, let me check.",
    ]


def test_word_boundaries_so_does_not_split_solve():
    steps = split_steps("We Solve it. Sometimes Nowhere Thenceforth. So done.")
    assert [s.text for s in steps] == ["We Solve it. Sometimes Nowhere Thenceforth. ", "So done."]


def test_longest_phrase_wins():
    steps = split_steps("x. Let me double-check this. Let me see.")
    assert [s.text for s in steps] == ["x. ", "Let me double-check this. ", "Let me see."]
    # Where a shorter phrase starts a longer one that holds a third phrase, matching the shorter
    # first would cut inside the longer phrase.
    phrases = ("Let me", "Let me double-check", "double-check")
    steps = split_steps("x. Let me double-check this. Let me see.", phrases)
    assert [s.text for s in steps] == ["x. ", "Let me double-check this. ", "Let me see."]


def test_text_starting_with_phrase_has_no_empty_step():
    steps = split_steps("Hmm. Okay.")
    assert [s.text for s in steps] == ["Hmm. ", "Okay."]


def test_no_phrase_gives_one_step_and_empty_gives_none():
    assert split_steps("just one thought") == [Step("just one thought", 0, 16)]
    assert split_steps("") == []


def test_custom_phrases():
    assert [s.text for s in split_steps("a STOP b STOP c", ["STOP"])] == ["a ", "STOP b ", "STOP c"]
    assert len(split_steps("a So b", [])) == 1


words = st.sampled_from(
    ["So", "Wait", "Solve", "x", "Let me", "Let me double-check", " ", ".", "\n"]
)


@given(st.lists(words, max_size=40).map("".join))
def test_steps_partition_text(text):
    steps = split_steps(text)
    assert "".join(s.text for s in steps) == text
    position = 0
    for s in steps:
        assert s.start == position and s.end > s.start and text[s.start : s.end] == s.text
        position = s.end
    assert position == len(text)


def test_token_spans_from_offsets():
    text = "First a. Then b."
    steps = split_steps(text)  # "First a. " [0, 9), "Then b." [9, 16)
    offsets = np.array([(0, 5), (5, 7), (7, 8), (8, 13), (13, 15), (15, 16)])
    assert token_step_index(steps, offsets).tolist() == [0, 0, 0, 0, 1, 1]
    assert steps_to_token_spans(steps, offsets) == [(0, 4), (4, 6)]


def test_tokens_outside_steps_and_steps_without_tokens():
    steps = [Step("ab", 2, 4), Step("c", 4, 5), Step("de", 5, 7)]
    offsets = np.array([(0, 2), (2, 5), (5, 7), (7, 9), (3, 3)])  # token 1 swallows step 1
    assert token_step_index(steps, offsets).tolist() == [-1, 0, 2, -1, -1]
    assert steps_to_token_spans(steps, offsets) == [(1, 2), (2, 2), (2, 3)]


def test_steps_map_through_a_real_tokenizers_offsets_without_think_tokens(smollm2):
    """SmolLM2's tokenizer has no think tokens: the opener and closer are three tokens each,
    and byte-level BPE joins spaces to the next word. Every probe token still belongs to
    exactly one step (" Hmm" with the step "Hmm" opens, once its space is trimmed), the steps'
    token spans tile the probe in order, and the delimiters' tokens fall in the first and last
    steps (docs/method.md#probe, step scope `probe`)."""
    tok = AutoTokenizer.from_pretrained(smollm2)
    probe = ChatFormat().probe_text(
        "\nFirst, 12 - 5 = 7. Hmm, is that right? 7 + 5 = 12, yes. Now 7 * 3 = 21. "
        "Wait, 21 / 3 = 7, fine. So the answer is 21.\n"
    )
    ids, offsets = encode_offsets(tok, probe)  # the scorers' offsets
    assert tok.convert_ids_to_tokens(ids[:3]) == ["<", "think", ">"]
    assert tok.convert_ids_to_tokens(ids[-3:]) == ["</", "think", ">"]
    steps = split_steps(probe)
    assert [s.text.split()[0] for s in steps[1:]] == ["First,", "Hmm,", "Now", "Wait,", "So"]
    index = token_step_index(steps, offsets)
    assert (index >= 0).all() and (np.diff(index) >= 0).all()
    assert set(index[:3]) == {0} and set(index[-3:]) == {len(steps) - 1}
    spans = steps_to_token_spans(steps, offsets)
    assert spans[0][0] == 0 and spans[-1][1] == len(offsets)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(spans))
    for (first, last), step in zip(spans, steps, strict=True):
        text = tok.decode(ids[first:last])
        assert text.strip() == step.text.strip()


def test_trimmed_offsets_drop_leading_whitespace_only():
    text = "a. Wait, b\n\n c"
    offsets = np.array([[0, 2], [2, 7], [7, 10], [10, 12], [12, 14]])  # "a." " Wait" ", b" ...
    trimmed = trim_offsets(text, offsets)
    assert [text[a:b] for a, b in trimmed] == ["a.", "Wait", ", b", "\n", "c"]
    assert (trimmed[:, 1] == offsets[:, 1]).all()
