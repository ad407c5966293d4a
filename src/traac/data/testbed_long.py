"""The long testbed's problems and step grammar: longer chains, and redundancy of three kinds.

Attentive compression may cut what a length penalty cannot: redundancy *between* the steps
the answer needs, where stopping early cuts nothing. The long teacher
(`traac.testbed.long_traces`) writes each step in one of the shapes below, so a step's kind can
be read back from its text alone: from the teacher's traces (whose labels sit beside them, and
must agree) and from a model's own responses, which is how the share of redundant steps a model
writes is measured.

Problems are `testbed-long[:TIER][?n=N&seed=S&split=eval|rl]`: the testbed's pools and seeds
(`testbed_problems`), with longer chains in each tier (`LONG_TIERS`); their items carry the data
source `testbed-long`, whose steps telemetry labels with `coarse_kinds`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from traac.common import step_labels
from traac.common.items import Item
from traac.data.testbed_problems import CONCLUSION, GUESS, Split, TierSettings, parse_spec

LONG_SOURCE = "testbed-long"
LONG_TIERS = TierSettings(terms={"easy": 3, "medium": 5, "hard": 8})

# needed: a computation the answer uses; conclude: the answer stated; guess: the step before an
# estimate (underthinking); the REDUNDANT kinds; `other`: a step in no shape of the grammar
# (only a model writes those).
LongKind = Literal["needed", "conclude", "guess", "recheck", "restate", "detour", "other"]
REDUNDANT: tuple[LongKind, ...] = ("recheck", "restate", "detour")


def parse_long_spec(spec: str, split: Split = "eval") -> list[Item]:
    """Items for `testbed-long[:TIER][?n=N&seed=S&split=eval|rl]` (`parse_spec`, longer tiers)."""
    return parse_spec(spec, split, LONG_TIERS, LONG_SOURCE)


def is_long_spec(spec: str) -> bool:
    return spec.split("?")[0].split(":")[0] == LONG_SOURCE


_N = r"-?\d+"
_E = rf"{_N} [+-] {_N}"
RECHECKS = (  # a re-check of one operation's result: `{e}` the operation, `{v}` its value
    "Wait, {e} = {v}.",
    "Let me double-check {e} = {v}.",
    "Hmm, {e} is {v}.",
    "Looking back, {e} = {v}.",
    "But wait, {e} is {v}.",
    "Let me verify {e}: {v}.",
)
CARRIED = ", leaving "  # a carried needed step: its result, then what remains of the chain
RESTATE_PROBLEM = "Let me restate the problem: {expression}."
RESTATE_PARTIAL = "Okay, so far the total is {v}."
DETOUR_TRY = "Alternatively, let me group {e} first."
DETOUR_DROP = "Hmm, that does not make it easier, back to {v}."


def _regex(template: str) -> str:
    return re.escape(template).replace(r"\{e\}", _E).replace(r"\{v\}", _N)


_GRAMMAR: tuple[tuple[LongKind, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(rf"{pattern}\Z"))
    for kind, pattern in (
        ("needed", rf"(?:First,|Then) {_E} = {_N}(?:{CARRIED}{_N}(?: [+-] {_N})+)?\."),
        ("conclude", rf"{re.escape(CONCLUSION)} {_N}\."),
        ("guess", re.escape(GUESS)),
        *(("recheck", _regex(t)) for t in RECHECKS),
        ("restate", re.escape(RESTATE_PROBLEM).replace(r"\{expression\}", rf"{_N}(?: [+-] {_N})+")),
        ("restate", _regex(RESTATE_PARTIAL)),
        ("detour", _regex(DETOUR_TRY)),
        ("detour", _regex(DETOUR_DROP)),
    )
)


def long_step_kind(text: str) -> LongKind:
    """The kind of one step, by the grammar shape its text has (`other` if none)."""
    text = text.strip()
    return next((kind for kind, pattern in _GRAMMAR if pattern.match(text)), "other")


def long_step_kinds(steps: Sequence[str]) -> list[LongKind]:
    """The kind of each step of a long-testbed reasoning, given the steps' texts."""
    return [long_step_kind(text) for text in steps]


# The testbed's three kinds (`testbed_problems.StepKind`), which telemetry and the card's probe
# statistics count: a redundant step is a `recheck` wherever it sits; an unknown step counts
# as a computation, so a compressor evicting it counts as a loss.
_COARSE = {"needed": "compute", "guess": "compute", "other": "compute", "conclude": "conclude"}


def coarse_kinds(steps: Sequence[str]) -> list[str]:
    """`long_step_kinds` in the testbed's three kinds (compute, conclude, recheck)."""
    return [_COARSE.get(kind, "recheck") for kind in long_step_kinds(steps)]


step_labels.register(LONG_SOURCE, coarse_kinds)
