"""The procedural teacher: thinking traces that over- and under-think, for SFT.

A trace computes the chain one operation a step, every step opening with one of the paper's
split phrases ("First, 3 + 5 = 8." "Then 8 - 2 = 6." "So the answer is 6."), so the segmenter
finds the steps the model later writes. Then come the failure modes TRAAC addresses:

- overthinking: 0..K redundant re-checks after the answer, drawn independently of the chain's
  length, so easy problems think about as long as hard ones, then the answer restated; a
  re-check may slip and change the answer, so overthinking costs accuracy;
- underthinking: on long chains some traces stop early and estimate;
- interruption: some traces are cut by the auxiliary prompt during their re-checks, in exactly
  the layout of the compression probe, and answer with the final value followed by the key steps
  (never the re-checks). The closer then has to look up the answer and the key steps, so its
  attention, which the probe reads, learns to point at them. The cut is forced on the model
  (context, not trained on), so it learns to answer an interruption, not to interrupt itself.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from traac.compression.formats import AUX_PROMPT, ChatFormat
from traac.compression.segmentation import split_steps
from traac.data.testbed_problems import CONCLUSION, GUESS, Chain, StepKind
from traac.data.testbed_problems import step_kinds as testbed_step_kinds
from traac.testbed.config import TeacherSettings

QWEN3_FORMAT = ChatFormat()  # the response opens and closes the think block
PROMPT_STYLE = "question"  # the model is taught bare questions (evaluation.harness.prompts)


@dataclass(frozen=True)
class Trace:
    """One teacher trace. `reasoning` is the think block's content before any interruption."""

    reasoning: str
    answer: str  # the text after the closer (the chat template appends eos)
    final: int  # the boxed value
    correct: bool
    n_rechecks: int
    slipped: bool = False
    guessed: bool = False
    interrupted: bool = False
    # each reasoning line's kind (`testbed_long.LongKind`), beside the text: the long teacher's;
    # the short teacher's steps are labelled from their text (`step_kinds`)
    labels: tuple[str, ...] = ()

    @property
    def forced(self) -> str:
        """Text the model is given rather than writes: an interruption's think block, exactly
        in the compression probe's layout (opener + reasoning + auxiliary prompt + closer)."""
        return QWEN3_FORMAT.probe_text(self.reasoning, AUX_PROMPT) if self.interrupted else ""

    @property
    def written(self) -> str:
        """What the model is taught to write after the prompt (and the forced text, if any)."""
        if self.interrupted:
            return self.answer
        return QWEN3_FORMAT.response_text(self.reasoning, self.answer)

    def response(self) -> str:
        """The whole response text, forced part included."""
        return self.forced + self.written


def _op(a: int, op: str, b: int) -> str:
    return f"{a} {op} {b}"


def _apply(a: int, op: str, b: int) -> int:
    return a + b if op == "+" else a - b


def _recheck(a: int, op: str, b: int, value: int, rng: random.Random) -> str:
    """A redundant verification of one operation whose result `value` it restates."""
    e = _op(a, op, b)
    templates = (
        f"Wait, {e} = {value}.",
        f"Let me double-check {e} = {value}.",
        f"Hmm, {e} is {value}.",
        f"Looking back, {e} = {value}.",
        f"But wait, {e} is {value}.",
        f"Let me verify {e}: {value}.",
    )
    return rng.choice(templates)


def _filler(final: int, rng: random.Random) -> str:
    """A re-check that recomputes nothing."""
    return rng.choice(
        (
            f"That seems right, it is {final}.",
            f"I think the answer is {final}.",
            "That's correct.",
            "Seems solid.",
            "Good.",
        )
    )


def answer_text(final: int) -> str:
    return f"The answer is \\boxed{{{final}}}."


def summary_text(chain: Chain, final: int) -> str:
    """An answer that restates the key steps in order, then the box: what a reasoning model
    writes after its think block, and the only way to answer an interruption."""
    values = chain.partials()
    steps = ", ".join(
        f"{_op(values[i], op, x)} = {values[i + 1]}"
        for i, (op, x) in enumerate(zip(chain.operators, chain.operands[1:], strict=True))
    )
    return f"{steps}. {answer_text(final)}"


def teach(entry: dict[str, Any], rng: random.Random, config: TeacherSettings) -> Trace:
    """A trace for one reasoning-gym chain_sum entry, its failure modes drawn from `rng`."""
    chain = Chain.parse(entry["metadata"]["expression"])
    values = chain.partials()
    ops = list(zip(values[:-1], chain.operators, chain.operands[1:], values[1:], strict=True))
    truth = values[-1]

    if len(chain.operands) >= config.guess_min_terms and rng.random() < config.guess_prob:
        done = rng.randint(1, len(ops) - 2)
        steps = [_step(i, a, op, b, v) for i, (a, op, b, v) in enumerate(ops[:done])]
        guess = values[done] + rng.randint(-9, 9)
        steps += [GUESS, f"{CONCLUSION} {guess}."]
        return Trace(join_lines(steps), answer_text(guess), guess, guess == truth, 0, guessed=True)

    steps = [_step(i, a, op, b, v) for i, (a, op, b, v) in enumerate(ops)]
    steps.append(f"{CONCLUSION} {truth}.")
    n_rechecks = rng.randint(0, config.max_rechecks)
    interrupted = n_rechecks > 0 and rng.random() < config.interrupt_prob
    final, slipped, rechecks = truth, False, []
    for _ in range(n_rechecks):
        if rng.random() < 0.25:
            rechecks.append(_filler(final, rng))
            continue
        a, op, b, v = rng.choice(ops)
        if not interrupted and rng.random() < config.slip_prob:
            wrong = v + rng.choice((-2, -1, 1, 2))
            final += wrong - v
            rechecks.append(f"Wait, {_op(a, op, b)} = {wrong}.")
            slipped = True
            break
        rechecks.append(_recheck(a, op, b, v, rng))
    # Like reasoning models, restate the answer after re-checking: the last line is a conclusion.
    closing = [f"{CONCLUSION} {final}."] if rechecks else []
    if interrupted:
        cut = rng.randint(0, len(rechecks) + 1)  # the last cut point is after the closing line
        reasoning = join_lines(steps + (rechecks + closing)[:cut])
        return Trace(reasoning, summary_text(chain, truth), truth, True, min(cut, len(rechecks)),
                     interrupted=True)  # fmt: skip
    return Trace(join_lines(steps + rechecks + closing), answer_text(final), final, not slipped,
                 len(rechecks), slipped=slipped)  # fmt: skip


def _step(i: int, a: int, op: str, b: int, value: int) -> str:
    return f"{'First,' if i == 0 else 'Then'} {_op(a, op, b)} = {value}."


def join_lines(steps: list[str]) -> str:
    """One step per line; the block ends with a newline, so the probe needs no separator."""
    return "".join(f"{s}\n" for s in steps)


def step_kinds(reasoning: str) -> list[StepKind]:
    """Label the split steps of a reasoning (`testbed_problems.step_kinds`, the one rule): on
    any text the model writes, as the card's measurement applies it to the model's responses."""
    return testbed_step_kinds([step.text for step in split_steps(reasoning)])


def has_recheck(reasoning: str) -> bool:
    """Does the reasoning go on verifying after it first stated its answer?"""
    return "recheck" in step_kinds(reasoning)
