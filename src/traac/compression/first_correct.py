"""Where a reasoning trace first reaches the right answer: the first step whose stated answer
the dataset's verifier accepts.

Everything a model thinks after that step is overthinking (evaluation counts it) or, for
training's early-exit compression, what can be cut: the authors' `get_first_correct_answer_chain`
splits the think block into chunks, parses each chunk's answer and stops at the first one that
verifies against the ground truth. Here the chunks are traac's steps (`split_steps`) and a step's
answer is what `step_answer` reads from it.

This module is pure: it never verifies anything itself. The caller binds the dataset's verifier
(time-bounded, through `traac.verification`'s pool) into `accepts`, a batch callable:

    def accepts(asks: Sequence[tuple[int, str]]) -> Sequence[bool]:
        # asks[j] = (trace index, parsed answer); is that answer right for that trace's item?
        return verify_answers([items[t] for t, _ in asks], [a for _, a in asks])

with `parse=parse_for(item)` (`step_answer` for a numeric gold, else the step's whole text).

A trace then costs one check per distinct answer up to its first correct step, asked in waves
(step k of every unresolved trace at once), so a pool keeps its workers busy.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from traac.common.items import Item
from traac.compression.segmentation import Step, split_steps
from traac.errors import TraacError

# (trace index, parsed answer) pairs -> one verdict each, in order.
Accepts = Callable[[Sequence[tuple[int, str]]], Sequence[bool]]
# A step's text -> the answer it states, or None when it states none (no check is spent).
ParseAnswer = Callable[[str], "str | None"]

_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{")
# The last number of a step: a LaTeX fraction, or an integer or decimal (thousands commas
# allowed). A minus written against the digit is a sign unless a digit, letter or bracket comes
# right before it: "8-2" and "3 - 5" are differences, "is -2" a negative number.
_NUMBER = re.compile(
    r"\\[dt]?frac\s*\{\s*-?\d+\s*\}\s*\{\s*-?\d+\s*\}"
    r"|(?<![\w).])-?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?!\d)"
    r"|(?<![\w).])-?\d+(?:\.\d+)?(?:\s*/\s*\d+)?"
)


def _last_box(text: str) -> str | None:
    """Content of the last complete `\\boxed{...}` (nested braces handled), or None."""
    found = None
    for match in _BOX.finditer(text):
        depth, i = 1, match.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth == 0:
            found = text[match.end() : i - 1]
    return found


def step_answer(text: str) -> str | None:
    """The answer a step states: its last complete `\\boxed{...}`, else its last number (a
    LaTeX fraction, an integer or a decimal, thousands commas dropped); None when it has none.

    Like math-verify's `parse` on a chunk in the authors' code, this reads the last value a
    step writes: "Then 8 - 2 = 6." states 6, "So the answer is 6." states 6, "Seems solid."
    states nothing. An intermediate value that equals the final answer counts as reaching it,
    as it does there.
    """
    boxed = _last_box(text)
    if boxed is not None and boxed.strip():
        return boxed.strip()
    matches = _NUMBER.findall(text)
    if not matches:
        return None
    last = matches[-1]
    return last if last.startswith("\\") else re.sub(r"\s+", "", last.replace(",", ""))


def whole_step(text: str) -> str | None:
    """A step's whole text as its answer (stripped; None when empty), for golds that are not
    numbers: the verifier reads it as it reads a final answer ("so the answer is C")."""
    return text.strip() or None


_NUMERIC_GOLD = re.compile(r"\s*-?[\d,]*\.?\d+\s*(?:/\s*\d+\s*)?")


def parse_for(item: Item) -> ParseAnswer:
    """How a step's answer is read for `item`: `step_answer` when its gold is a number (math and
    reasoning-gym items), else `whole_step`."""
    if item.verifier in ("math", "task") and _NUMERIC_GOLD.fullmatch(str(item.answer)):
        return step_answer
    return whole_step


def first_correct_steps(
    traces: Sequence[Sequence[Step]],
    accepts: Accepts,
    *,
    parse: ParseAnswer = step_answer,
) -> list[int | None]:
    """For each trace (its steps, in order), the index of its first step whose parsed answer
    `accepts` calls right; None when no step's is.

    Asked in waves, step k of every trace not yet resolved; an answer a trace already had
    checked is not asked again, and a step that states no answer costs nothing. `accepts` must
    return one verdict per ask.
    """
    found: list[int | None] = [None] * len(traces)
    seen: list[dict[str, bool]] = [{} for _ in traces]
    live = [t for t, steps in enumerate(traces) if steps]
    k = 0
    while live:
        asks: list[tuple[int, str]] = []
        for t in live:
            answer = parse(traces[t][k].text)
            if answer is not None and answer not in seen[t]:
                seen[t][answer] = False
                asks.append((t, answer))
        verdicts = list(accepts(asks)) if asks else []
        if len(verdicts) != len(asks):
            raise TraacError(f"first_correct_steps: {len(asks)} asks but {len(verdicts)} verdicts")
        for (t, answer), right in zip(asks, verdicts, strict=True):
            seen[t][answer] = bool(right)
        still = []
        for t in live:
            answer = parse(traces[t][k].text)
            if answer is not None and seen[t][answer]:
                found[t] = k
            elif k + 1 < len(traces[t]):
                still.append(t)
        live, k = still, k + 1
    return found


@dataclass(frozen=True)
class FirstCorrect:
    """A reasoning split at its first correct step: `head` is the reasoning up to and including
    that step, `tail` the rest (the whole reasoning, and `head` empty, when no step is right;
    `head + tail == reasoning` always)."""

    reasoning: str
    steps: tuple[Step, ...]
    index: int | None

    @property
    def cut(self) -> int:
        """Character offset where the first correct step ends (0 when there is none)."""
        return 0 if self.index is None else self.steps[self.index].end

    @property
    def head(self) -> str:
        return self.reasoning[: self.cut]

    @property
    def tail(self) -> str:
        return self.reasoning[self.cut :]

    @property
    def steps_after(self) -> int:
        """Steps after the first correct one (0 when there is none)."""
        return 0 if self.index is None else len(self.steps) - self.index - 1


def first_correct(
    reasonings: Sequence[str],
    accepts: Accepts,
    *,
    phrases: Sequence[str] | None = None,
    parse: ParseAnswer = step_answer,
) -> list[FirstCorrect]:
    """Split each reasoning (a think block's content) into traac's steps and find its first
    correct step (`first_correct_steps`); `accepts` gets (index into `reasonings`, answer)."""
    traces = [tuple(split_steps(r, phrases)) for r in reasonings]
    found = first_correct_steps(traces, accepts, parse=parse)
    return [
        FirstCorrect(r, steps, k) for r, steps, k in zip(reasonings, traces, found, strict=True)
    ]
