"""The compressions that know the first correct step: a trace cut after it, that prefix joined
to a compression of the rest, and `after_answer`, which keeps whole a trace with no such step."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from traac.compression.compression import CompressionResult, count_tokens
from traac.compression.early_exit import (
    COMPRESSION_KINDS,
    early_exit,
    kept_whole,
    scored_part,
    with_head,
)
from traac.compression.first_correct import first_correct
from traac.compression.segmentation import Step

REASONING = (
    "First, 2 + 3 = 5. Then 5 + 4 = 9. Wait, let me verify: 2 + 3 = 5, 5 + 4 = 9. "
    "So the answer is 9."
)  # traac's steps: "First, ... 5. ", "Then ... 9. ", "Wait, ... 9. ", "So the answer is 9."


class Words:
    """A tokenizer stand-in: one token per whitespace-separated word."""

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict:
        return {"input_ids": text.split()}


def gold(answer: str):
    def accepts(asks: Sequence[tuple[int, str]]) -> list[bool]:
        return [a == answer for _, a in asks]

    return accepts


def test_early_exit_keeps_up_to_the_first_correct_step() -> None:
    [split] = first_correct([REASONING], gold("9"))
    assert split.index == 1  # "Then 5 + 4 = 9." is the first step that states 9
    result = early_exit(split, Words())
    assert result.kept == [True, True, False, False]
    assert result.text == "First, 2 + 3 = 5. Then 5 + 4 = 9. " == split.head
    assert (result.tokens_before, result.tokens_after) == (31, 12)
    assert result.n_evicted == 2 and result.eviction_fraction == 0.5


def test_early_exit_cuts_nothing_without_a_correct_step_or_a_tail() -> None:
    for answer, text in (("7", REASONING), ("9", "Then 5 + 4 = 9.")):
        [split] = first_correct([text], gold(answer))
        result = early_exit(split, Words())
        assert not result.compressed and result.text == text


def test_the_prefix_is_kept_whole_and_the_rest_compressed() -> None:
    [split] = first_correct([REASONING], gold("5"))  # the very first step states 5
    tail_text = split.tail
    tail_steps = [
        Step("Then 5 + 4 = 9. ", 0, 16),
        Step("Wait, let me verify: 2 + 3 = 5, 5 + 4 = 9. ", 16, 59),
        Step("So the answer is 9.", 59, 78),
    ]
    assert "".join(s.text for s in tail_steps) == tail_text
    kept_tail = "Then 5 + 4 = 9. So the answer is 9."
    tail = CompressionResult(
        tail_text, tail_steps, np.array([0.5, 0.1, 0.4]), [True, False, True], 0.7, 0.4,
        kept_tail, count_tokens(Words(), tail_text), count_tokens(Words(), kept_tail), 0.7,
    )  # fmt: skip
    result = with_head(split, tail, Words())
    assert result.text == "First, 2 + 3 = 5. " + kept_tail
    assert result.kept == [True, True, False, True]
    assert [s.start for s in result.steps] == [0, 18, 34, 77]
    assert all(REASONING[s.start : s.end] == s.text for s in result.steps)
    assert (result.uniformity, result.eviction_fraction, result.rule_uniformity) == (0.7, 0.4, 0.7)
    assert result.scores.tolist() == [0.0, 0.5, 0.1, 0.4]
    assert result.n_evicted == 1 and result.tokens_after == 31 - 14


def test_after_answer_scores_what_follows_the_answer_and_nothing_without_one() -> None:
    [found] = first_correct([REASONING], gold("9"))
    [missing] = first_correct([REASONING], gold("7"))
    attention, after = (COMPRESSION_KINDS[k] for k in ("early_exit_attention_weights",
                                                       "after_answer"))  # fmt: skip
    for kind in (attention, after):
        assert scored_part(found, kind) == found.tail
    assert found.tail == "Wait, let me verify: 2 + 3 = 5, 5 + 4 = 9. So the answer is 9."
    assert scored_part(missing, attention) == REASONING  # from its start
    assert scored_part(missing, after) == ""  # every step precedes the answer: kept
    whole = kept_whole(missing, Words())
    assert not whole.compressed and whole.text == REASONING
    assert whole.tokens_before == whole.tokens_after == count_tokens(Words(), REASONING)


def test_each_compression_kind_says_what_it_does() -> None:
    """The table the step asks (`StepCompressor`, `TraacSettings.check`): only the scorer's own
    finds no prefix, only early_exit runs no scorer, only early_exit_attention_weights needs the
    attention probe, only after_answer keeps a trace with no accepted step whole."""
    rows = {
        name: (k.prefix, k.scores, k.needs_attention, k.keeps_unanswered)
        for name, k in COMPRESSION_KINDS.items()
    }
    assert rows == {
        "scorer": (False, True, False, False),
        "early_exit": (True, False, False, False),
        "early_exit_attention_weights": (True, True, True, False),
        "after_answer": (True, True, False, True),
    }
