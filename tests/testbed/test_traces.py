"""The procedural teacher: segmentable steps, right answers but for deliberate slips and guesses,
the probe's exact layout when interrupted, and the step labels the card's measurement uses."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from traac.compression.formats import AUX_PROMPT, ChatFormat
from traac.compression.segmentation import SPLIT_PHRASES, split_steps
from traac.data.testbed_problems import Chain
from traac.testbed.config import TeacherSettings
from traac.testbed.traces import (
    CONCLUSION,
    GUESS,
    answer_text,
    has_recheck,
    step_kinds,
    summary_text,
    teach,
)

FORMAT = ChatFormat()


def _entry(operands: list[int], operators: list[str]) -> dict:
    parts = [str(operands[0])]
    for op, x in zip(operators, operands[1:], strict=True):
        parts += [op, str(x)]
    expression = " ".join(parts)
    return {
        "question": f"State the final answer to the following arithmetic problem: {expression} =",
        "metadata": {"expression": expression, "source_dataset": "chain_sum"},
    }


chains = st.integers(2, 6).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(0, 9), min_size=n, max_size=n),
        st.lists(st.sampled_from("+-"), min_size=n - 1, max_size=n - 1),
    )
)


@settings(max_examples=200, deadline=None)
@given(chains, st.integers(0, 10**6))
def test_traces_are_segmentable_and_right_unless_slipped_or_guessed(chain, seed):
    operands, operators = chain
    entry = _entry(operands, operators)
    truth = Chain(tuple(operands), tuple(operators)).partials()[-1]
    trace = teach(entry, random.Random(seed), TeacherSettings(slip_prob=0.2, guess_prob=0.5))
    steps = split_steps(trace.reasoning)
    # every step opens with a split phrase, and the steps are exactly the lines
    assert [s.text for s in steps] == trace.reasoning.splitlines(keepends=True)
    assert all(any(s.text.startswith(p) for p in SPLIT_PHRASES) for s in steps)
    assert steps[0].text.startswith("First,")
    assert trace.correct == (trace.final == truth)
    if not trace.slipped and not trace.guessed:
        assert trace.final == truth
    if trace.guessed:
        assert len(operands) >= 5 and GUESS in trace.reasoning and trace.n_rechecks == 0
    parsed = FORMAT.parse(trace.response())
    assert parsed.well_formed
    assert parsed.answer.endswith(answer_text(trace.final))


@settings(max_examples=100, deadline=None)
@given(chains, st.integers(0, 10**6))
def test_interrupted_traces_use_the_probe_layout_and_summarise_key_steps(chain, seed):
    operands, operators = chain
    config = TeacherSettings(interrupt_prob=1.0, guess_prob=0.0)
    trace = teach(_entry(operands, operators), random.Random(seed), config)
    if not trace.interrupted:  # no re-checks drawn: nothing to interrupt
        assert trace.n_rechecks == 0
        return
    response = trace.response()
    assert response == FORMAT.probe_text(trace.reasoning) + trace.answer
    assert response.count(AUX_PROMPT) == 1
    assert FORMAT.parse(response).reasoning == trace.reasoning + AUX_PROMPT
    assert trace.correct and not trace.slipped
    chain_ = Chain(tuple(operands), tuple(operators))
    assert trace.answer == summary_text(chain_, chain_.partials()[-1])
    # key steps first, in order, from the question's first operand; the box last
    assert trace.answer.startswith(f"{operands[0]} ")
    assert trace.answer.endswith(f"\\boxed{{{trace.final}}}.")
    # the summary restates each key operation once, not the re-checks
    assert trace.answer.count(" = ") == len(operators)


def test_rechecks_are_drawn_independently_of_chain_length():
    rng = random.Random(0)
    config = TeacherSettings(guess_prob=0.0, interrupt_prob=0.0)
    by_terms = {
        n: [teach(_entry([1] * n, ["+"] * (n - 1)), rng, config).n_rechecks for _ in range(400)]
        for n in (2, 5)
    }
    means = {n: sum(v) / len(v) for n, v in by_terms.items()}
    assert abs(means[2] - means[5]) < 0.6
    assert 3.0 < means[2] < 5.0  # uniform over 0..8


def test_step_kinds_label_computations_conclusions_and_rechecks():
    reasoning = (
        "First, 3 + 5 = 8.\nThen 8 - 2 = 6.\nSo the answer is 6.\n"
        "Wait, 3 + 5 = 8.\nThat's correct.\nSo the answer is 6.\n"
    )
    assert step_kinds(reasoning) == [
        "compute", "compute", "conclude", "recheck", "recheck", "conclude",
    ]  # fmt: skip
    assert has_recheck(reasoning)
    assert not has_recheck("First, 3 + 5 = 8.\nSo the answer is 8.\n")
    assert not has_recheck("garbled text without steps")
    assert step_kinds("") == []


def test_teacher_traces_restate_the_answer_after_rechecking():
    rng = random.Random(3)
    config = TeacherSettings(guess_prob=0.0, interrupt_prob=0.0, slip_prob=0.0)
    for _ in range(50):
        trace = teach(_entry([4, 7, 1], ["-", "+"]), rng, config)
        kinds = step_kinds(trace.reasoning)
        assert kinds.count("recheck") == trace.n_rechecks
        assert kinds[:3] == ["compute", "compute", "conclude"]
        assert kinds[-1] == "conclude"
        assert trace.reasoning.count(CONCLUSION) == (2 if trace.n_rechecks else 1)


def test_a_slip_changes_the_restated_and_boxed_answer():
    rng = random.Random(0)
    config = TeacherSettings(guess_prob=0.0, interrupt_prob=0.0, slip_prob=1.0, max_rechecks=8)
    slipped = [
        t for t in (teach(_entry([4, 7], ["+"]), rng, config) for _ in range(40)) if t.slipped
    ]
    assert slipped
    for trace in slipped:
        last = trace.reasoning.splitlines()[-1]
        assert last == f"{CONCLUSION} {trace.final}." and trace.final != 11 and not trace.correct
