"""maj@k's answer groups: spellings the verifier calls equal share a vote, an unreadable answer
casts none, and a right answer never shares a group with a wrong one."""

import pytest

from traac.common.items import Item
from traac.errors import TraacError
from traac.verification import verify_many
from traac.verification.votes import vote_groups, vote_groups_many, voting_form


def say(answer: str) -> str:
    return f"<think>\nLet me work.\n</think>\n{answer}"


def groups(item: Item, answers: list[str | None]) -> list[int | None]:
    """The groups of `answers` (None: a think block that never closed), with their verdicts from
    the item's own verifier."""
    responses = [say(a) if a is not None else "<think>\nstill thinking" for a in answers]
    verdicts = verify_many([item] * len(responses), responses)
    return vote_groups(item, responses, verdicts)


MATH = Item("m", "What is 1/2 - 1?", "-\\frac{1}{2}")


def test_unboxed_spellings_of_one_wrong_value_are_one_vote():
    # -5 three ways (a bare line, a sentence, inline math) against a wrong 7: one group of three.
    answers = ["-5", "The answer is -5", "$-5$", "7"]
    assert groups(MATH, answers) == [0, 0, 0, 3]


def test_boxed_fraction_slash_and_decimal_are_one_vote():
    # Wrong (gold -1/2): 1/2 spelt as \frac, a slash and a decimal; 0.25 is another answer.
    answers = ["\\boxed{\\frac{1}{2}}", "\\boxed{0.25}", "\\boxed{1/2}", "\\boxed{0.5}"]
    assert groups(MATH, answers) == [0, 1, 0, 0]


def test_right_spellings_are_one_vote_apart_from_wrong_ones():
    answers = ["\\boxed{1/2}", "\\boxed{-0.5}", "\\boxed{-\\frac{1}{2}}", "\\boxed{\\frac{1}{2}}"]
    assert groups(MATH, answers) == [0, 1, 1, 0]


def test_no_answer_casts_no_vote():
    # Unclosed, nothing after the closer, words without a number, code: no vote at all.
    answers = [None, "", "I am not sure.", "\\boxed{__import__('os')}", "\\boxed{3}"]
    assert groups(MATH, answers) == [None, None, None, None, 4]


def test_choice_letters_and_hedges():
    item = Item("c", "Pick", "A", verifier="choice")
    answers = ["B", "(B)", "\\boxed{B}", "B or C", "the answer is A", "C"]
    assert groups(item, answers) == [0, 0, 0, None, 4, 5]


def test_text_answers_match_as_bbeh_does():
    item = Item("t", "Capital?", "Paris", verifier="text")
    answers = ["Lyon", "**lyon**.", "Paris", "paris", "Nice"]
    assert groups(item, answers) == [0, 0, 2, 2, 4]


def test_task_answers_group_by_what_the_scorer_reads(entries):
    entry = entries["letter_counting"][0]
    item = Item("g", entry["question"], str(entry["answer"]), verifier="task", entry=entry)
    wrong = int(entry["answer"]) + 1
    answers = [f"{wrong}", f"There are {wrong} of them.", str(entry["answer"]), "", "none"]
    assert voting_form(item, say(answers[1])) == str(wrong)
    # "none" is what the scorer would read (and score wrong): a vote of its own.
    assert groups(item, answers) == [0, 0, 2, None, 4]


def test_task_answers_the_allow_list_refuses_cast_no_vote(entries):
    entry = entries["puzzle24"][0]
    item = Item("p", entry["question"], "", verifier="task", entry=entry)
    a, b, c, d = entry["metadata"]["numbers"]
    answers = [f"{a} + {b} + {c} + {d}", f"({a} + {b}) + ({c} + {d})", "__import__('os')"]
    assert groups(item, answers)[2] is None


def test_the_batch_form_and_its_checks():
    responses = [say("\\boxed{0.5}"), say("\\boxed{1/2}")]
    assert vote_groups_many([(MATH, responses, [False, False])] * 2) == [[0, 0], [0, 0]]
    with pytest.raises(TraacError, match="2 responses but 1 verdicts"):
        vote_groups(MATH, responses, [False])
