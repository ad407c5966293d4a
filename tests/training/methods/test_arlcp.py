"""ARLCP's reflection and length penalty on a hand-built group (the values worked below)."""

from __future__ import annotations

import pytest

from traac.compression.formats import ChatFormat
from traac.training.methods.arlcp import arlcp_penalty, reflections

WORDS = ["so", "wait", "hmm", "4", "5"]


class WordTokenizer:
    """One token per word of `WORDS`, so lengths and keywords are counted by hand."""

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return " ".join(WORDS[i] for i in ids)


def test_the_authors_keywords_are_counted_as_whole_words_in_any_case() -> None:
    assert reflections("But wait, let me double-check. Hmm, checked; Oh, however.") == 6
    assert reflections("waiting, bout, Checking") == 0


def test_a_right_answer_pays_for_its_reflections_and_length_against_the_right_ones(peer) -> None:
    """Right rollouts with 0, 1 and 3 keywords and 2, 5 and 4 tokens: both have sample std
    sqrt(7/3) = 1.5275 around means 4/3 and 11/3, so z(keywords) = -0.873, -0.218, 1.091 and
    z(length) = -1.091, 0.873, 0.218. Thresholds 1 and 2: w1 = 0.05, 0.05, 0.15 and w2 = 0.2 -
    w1. Rollout 0: -0.05 sigmoid(-0.873) - 0.15 sigmoid(-1.091) = -0.05 x 0.2946 - 0.15 x
    0.2514 = -0.05244; likewise -0.12808 and -0.14000. The wrong rollout pays 0; a right answer
    is worth 4 here."""
    expected = [-0.05244486, -0.12808446, -0.14000495, 0.0]
    lengths, correct, counts = [2, 5, 4, 2], [True, True, True, False], [0, 1, 3, 0]
    assert arlcp_penalty(lengths, correct, counts, 1, 2) == pytest.approx(expected, abs=1e-7)
    ids = [[0, 3], [1, 0, 0, 0, 3], [1, 2, 1, 3], [0, 4]]
    rewards = peer("arlcp", reflection_low=1, reflection_high=2)
    rewards.bind(WordTokenizer(), ChatFormat())
    assert rewards.func.__name__ == "arlcp_length_reward" and rewards.scale == 4.0
    out = rewards.func(completions=["x"] * 4, completion_ids=ids, correct=correct)
    assert out == pytest.approx([4 * e for e in expected], abs=1e-6)
    # The authors' thresholds (40, 80): w1 0.05 for all three.
    authors = arlcp_penalty(lengths, correct, counts, 40, 80)
    assert authors[2] == pytest.approx(-0.05 * 0.748594 - 0.15 * 0.554323, abs=1e-5)


def test_a_single_right_answer_pays_half_the_weights() -> None:
    """One right answer: its z-scores are 0 (deviation 1 by the authors' rule), sigmoid 0.5."""
    assert arlcp_penalty([9, 3], [False, True], [0, 7], 40, 80) == pytest.approx([0.0, -0.1])
