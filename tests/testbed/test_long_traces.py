"""The long teacher (issue 69): the trailing and interleaved traces of one draw hold the same
chains and the same redundant steps and differ in their position alone; the labels beside each
trace line up with its steps and agree with the grammar read back from the text; and today's
short teacher draws exactly the traces the shipped testbed was trained on."""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from traac.compression.formats import ChatFormat
from traac.compression.segmentation import split_steps
from traac.data.testbed_long import REDUNDANT
from traac.data.testbed_problems import CONCLUSION, Chain
from traac.testbed.build import teacher_traces
from traac.testbed.config import LongTeacherSettings, default_config, long_config
from traac.testbed.long_traces import reasoning_kinds, teach_long
from traac.testbed.traces import answer_text, summary_text

FORMAT = ChatFormat()
# sha256 over the default (shipped) testbed's 36,000 SFT problems and teacher traces, taken
# before the long teacher was added: the shipped weights were trained on exactly these.
SHIPPED_TRACES = "7f59b20f01d49ae00b989c814062794b14512a70356cd24db761b4723144c470"


def _entry(operands: list[int], operators: list[str]) -> dict:
    expression = " ".join(
        [str(operands[0])] + [f"{op} {x}" for op, x in zip(operators, operands[1:], strict=True)]
    )
    return {"question": f"{expression} =", "metadata": {"expression": expression}}


chains = st.integers(3, 9).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(0, 9), min_size=n, max_size=n),
        st.lists(st.sampled_from("+-"), min_size=n - 1, max_size=n - 1),
    )
)


def _both(entry: dict, seed: int, **changes) -> tuple:
    """The trailing and interleaved traces of one draw, and each rng's state after it."""
    out = []
    for position in ("trailing", "interleaved"):
        rng = random.Random(seed)
        config = LongTeacherSettings(position=position, **changes)
        out.append((teach_long(entry, rng, config), rng.getstate()))
    (trailing, after_t), (interleaved, after_i) = out
    assert after_t == after_i  # the same draws: the next trace is drawn alike too
    return trailing, interleaved


def test_the_default_teacher_draws_the_shipped_traces():
    entries, traces = teacher_traces(default_config())
    digest = hashlib.sha256()
    for e, t in zip(entries, traces, strict=True):
        fields = (t.reasoning, t.answer, t.final, t.correct, t.n_rechecks, t.slipped, t.guessed,
                  t.interrupted)  # fmt: skip
        digest.update(repr((e["question"], fields)).encode())
    assert digest.hexdigest() == SHIPPED_TRACES


@settings(max_examples=300, deadline=None)
@given(chains, st.integers(0, 10**6), st.sampled_from([0.0, 0.3, 1.0]), st.booleans())
def test_both_positions_hold_the_same_steps_in_other_places(chain, seed, slip_prob, carry):
    operands, operators = chain
    entry = _entry(operands, operators)
    trailing, interleaved = _both(entry, seed, slip_prob=slip_prob, guess_prob=0.3, carry=carry)
    for trace in (trailing, interleaved):
        steps = [s.text for s in split_steps(trace.reasoning)]
        assert steps == trace.reasoning.splitlines(keepends=True)  # one step a line
        assert list(trace.labels) == reasoning_kinds(trace.reasoning)  # beside = read back
        assert not any(label in trace.reasoning for label in ("needed", "recheck", "detour"))
        assert FORMAT.parse(trace.response()).answer == answer_text(trace.final)
    assert (trailing.final, trailing.correct, trailing.slipped, trailing.guessed) == (
        interleaved.final, interleaved.correct, interleaved.slipped, interleaved.guessed,
    )  # fmt: skip
    truth = Chain(tuple(operands), tuple(operators)).partials()[-1]
    assert trailing.correct == (trailing.final == truth)
    redundant = [Counter(k for k in t.labels if k in REDUNDANT) for t in (trailing, interleaved)]
    assert redundant[0] == redundant[1]
    assert trailing.labels.count("needed") == interleaved.labels.count("needed")
    lines = [t.reasoning.splitlines() for t in (trailing, interleaved)]
    if not trailing.slipped:  # the same lines, only elsewhere (a slip moves later values)
        body = [line for line in lines[0] if not line.startswith(CONCLUSION)]
        assert Counter(body) == Counter(lines[1][:-1])
    if trailing.guessed:
        assert trailing == interleaved
        return
    # trailing: every redundant step after the answer, the answer restated last
    first = trailing.labels.index("conclude")
    assert all(k == "needed" for k in trailing.labels[:first])
    assert all(k in REDUNDANT for k in trailing.labels[first + 1 : -1])
    assert lines[0][-1] == f"{CONCLUSION} {trailing.final}."
    # interleaved: one answer, last; each redundant step before it, after the step it refers to
    assert interleaved.labels.count("conclude") == 1 and interleaved.labels[-1] == "conclude"
    assert interleaved.labels[0] == "needed"
    needed_before = None
    for line, kind in zip(lines[1], interleaved.labels, strict=True):
        if kind == "needed":
            needed_before = line.split(" ", 1)[1].rsplit(" = ", 1)[0]  # its operation
        elif kind == "recheck":  # re-checks the operation just computed
            assert needed_before in line


@settings(max_examples=100, deadline=None)
@given(chains, st.integers(0, 10**6))
def test_a_carried_step_holds_what_the_next_needed_step_computes(chain, seed):
    operands, operators = chain
    _, interleaved = _both(_entry(operands, operators), seed, slip_prob=0.0, guess_prob=0.0,
                           carry=True)  # fmt: skip
    needed = [line for line, kind in zip(interleaved.reasoning.splitlines(), interleaved.labels,
                                         strict=True) if kind == "needed"]  # fmt: skip
    values = Chain(tuple(operands), tuple(operators)).partials()
    assert len(needed) == len(operators)
    for i, line in enumerate(needed[:-1]):
        left = line.split(", leaving ")[1].removesuffix(".")
        tail = " ".join(
            f"{op} {x}" for op, x in zip(operators[i + 1 :], operands[i + 2 :], strict=True)
        )
        assert left == f"{values[i + 1]} {tail}"
        assert needed[i + 1].split(" ", 1)[1].startswith(" ".join(left.split()[:3]) + " = ")
    assert ", leaving" not in needed[-1]


def test_interleaved_redundancy_sits_among_the_needed_steps():
    """Over many traces, the interleaved ones put most redundant steps before the last needed
    step; the trailing ones never do."""
    config = long_config("interleaved")
    short = replace(config, train=replace(config.train, n_traces=400))
    _, interleaved = teacher_traces(short)
    _, trailing = teacher_traces(replace(short, teacher=LongTeacherSettings(position="trailing")))
    inside = {"trailing": 0, "interleaved": 0}
    total = 0
    for name, traces in (("trailing", trailing), ("interleaved", interleaved)):
        for t in traces:
            last = max((k for k, x in enumerate(t.labels) if x == "needed"), default=-1)
            inside[name] += sum(x in REDUNDANT for x in t.labels[:last])
            total += name == "trailing" and sum(x in REDUNDANT for x in t.labels)
    assert inside["trailing"] == 0 and inside["interleaved"] > 0.6 * total


def test_a_slip_carries_on_in_the_interleaved_chain():
    entry = _entry([4, 7, 1, 5, 2], ["+", "-", "+", "-"])
    seeds = [s for s in range(300) if _both(entry, s, slip_prob=0.5, guess_prob=0.0)[0].slipped]
    assert seeds
    for seed in seeds:
        trailing, interleaved = _both(entry, seed, slip_prob=0.5, guess_prob=0.0)
        assert not trailing.correct and trailing.final != 13
        lines = interleaved.reasoning.splitlines()
        at = next(k for k, line in enumerate(lines) if interleaved.labels[k] == "recheck"
                  and not _states_truth(line))  # fmt: skip
        assert lines[at].startswith("Wait, ") and sum(not _states_truth(x) for x in lines) == 1
        wrong = int(lines[at].rsplit(" = ", 1)[1].rstrip("."))
        following = next((line for line in lines[at + 1 :] if line.startswith("Then ")), None)
        if following is not None:  # the next needed step starts from the wrong value
            assert following.startswith(f"Then {wrong} ")
        assert lines[-1] == f"{CONCLUSION} {interleaved.final}."


def _states_truth(line: str) -> bool:
    """Is a step's `a op b = v` (if it has one) arithmetic that holds?"""
    words = line.rstrip(".").replace(":", " =").split()
    if "=" not in words or words[words.index("=") - 2] not in "+-":
        return True
    a, op, b, _, v = words[words.index("=") - 3 : words.index("=") + 2]
    return (int(a) + int(b) if op == "+" else int(a) - int(b)) == int(v)


def test_easy_chains_overthink_most():
    config = LongTeacherSettings(guess_prob=0.0, slip_prob=0.0)
    rng = random.Random(0)
    mean = {}
    for n in (3, 8):
        traces = [teach_long(_entry([1] * n, ["+"] * (n - 1)), rng, config) for _ in range(200)]
        mean[n] = sum(sum(k in REDUNDANT for k in t.labels) for t in traces) / len(traces)
    assert mean[3] > 1.4 * mean[8]


def test_no_interruptions_unless_asked():
    config = long_config("interleaved")
    _, traces = teacher_traces(replace(config, train=replace(config.train, n_traces=300)))
    assert not any(t.interrupted for t in traces)
    entry = _entry([3, 5, 2, 6], ["+", "-", "+"])
    for seed in range(20):
        for position in ("trailing", "interleaved"):
            settings_ = LongTeacherSettings(position=position, interrupt_prob=1.0, guess_prob=0.0)
            trace = teach_long(entry, random.Random(seed), settings_)
            assert trace.interrupted and trace.correct
            assert trace.answer == summary_text(Chain.parse("3 + 5 - 2 + 6"), 12)
            assert trace.labels.count("needed") == 3
            assert list(trace.labels) == reasoning_kinds(trace.reasoning)
