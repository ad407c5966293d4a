"""The first correct step of a trace, with a verifier stand-in that compares numbers."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from traac.common.items import Item
from traac.compression.first_correct import (
    first_correct,
    first_correct_steps,
    parse_for,
    step_answer,
    whole_step,
)
from traac.compression.segmentation import split_steps
from traac.errors import TraacError


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("Then 8 - 2 = 6.", "6"),
        ("So the answer is -6.", "-6"),
        ("Then 3 - 5 = -2.", "-2"),
        ("8-2", "2"),
        ("Seems solid.", None),
        ("That's correct.", None),
        ("x is 1,000 now", "1000"),
        ("3.5 and then 4.", "4"),
        ("it is 3/4.", "3/4"),
        ("so \\frac{3}{4}.", "\\frac{3}{4}"),
        ("The answer is \\boxed{12}. Then 5", "12"),
        ("\\boxed{\\frac{1}{2}} done", "\\frac{1}{2}"),
    ],
)
def test_step_answer_reads_the_last_value_a_step_states(text: str, answer: str | None) -> None:
    assert step_answer(text) == answer


class Gold:
    """Accepts an answer when it equals the trace's gold number; records every ask."""

    def __init__(self, golds: Sequence[str]) -> None:
        self.golds = golds
        self.calls: list[list[tuple[int, str]]] = []

    def __call__(self, asks: Sequence[tuple[int, str]]) -> list[bool]:
        self.calls.append(list(asks))
        return [answer == self.golds[t] for t, answer in asks]


def test_the_testbed_example_stops_at_the_first_conclusion() -> None:
    reasoning = (
        "First, 3 + 1 = 4.\nSo the answer is 4.\nLet me verify 3 + 1: 4.\nSo the answer is 4.\n"
    )
    gold = Gold(["4"])
    [found] = first_correct([reasoning], gold)
    assert found.index == 0  # "First, 3 + 1 = 4." already states 4
    assert found.head == "First, 3 + 1 = 4.\n"
    assert found.head + found.tail == reasoning
    assert found.steps_after == 3
    assert gold.calls == [[(0, "4")]]  # nothing after the first right step is asked


def test_waves_ask_each_distinct_answer_once_and_skip_silent_steps() -> None:
    a = "First, 2 + 3 = 5.\nThen 5 + 1 = 6.\nHmm.\nWait, 2 + 3 = 5.\nSo the answer is 7.\n"
    b = "First, 9 - 1 = 8.\nSo the answer is 8.\n"
    c = "First, 1 + 1 = 2.\nGood.\n"  # never right
    gold = Gold(["7", "8", "3"])
    found = first_correct([a, b, c], gold)
    assert [f.index for f in found] == [4, 0, None]
    asked = [ask for wave in gold.calls for ask in wave]
    assert asked.count((0, "5")) == 1  # 5 comes back in step 3: not asked again
    assert (2, "2") in asked and len([t for t, _ in asked if t == 2]) == 1
    assert gold.calls[0] == [(0, "5"), (1, "8"), (2, "2")]  # step 0 of every trace, one batch
    assert found[2].head == "" and found[2].tail == c and found[2].steps_after == 0


def test_empty_traces_and_a_wrong_verdict_count() -> None:
    assert first_correct_steps([[], []], Gold(["1", "2"])) == [None, None]
    steps = split_steps("So the answer is 1.")
    with pytest.raises(TraacError, match="1 asks but 0 verdicts"):
        first_correct_steps([steps], lambda asks: [])


def test_a_custom_parse_reads_letters() -> None:
    steps = split_steps("Maybe it is B. Wait, no. So the answer is C.")
    pick = lambda text: text.rstrip(". ")[-1] if text.rstrip(". ")[-1] in "ABCD" else None  # noqa: E731
    assert first_correct_steps([steps], Gold(["C"]), parse=pick) == [2]


def test_parse_for_reads_numbers_for_numeric_golds_only() -> None:
    assert parse_for(Item("a", "q", "-12")) is step_answer
    assert parse_for(Item("b", "q", "3/4")) is step_answer
    assert parse_for(Item("c", "q", "x^2 + 1")) is whole_step
    assert parse_for(Item("d", "q", "C", "choice")) is whole_step
    assert whole_step("  So the answer is C. ") == "So the answer is C." and whole_step(" ") is None
