"""Overthinking and underthinking, measured on each response's own steps.

- For every right response, the first step of its think block (traac's segmentation) whose
  stated answer the dataset's verifier accepts (`traac.compression.first_correct`, each check
  time-bounded in the verification pool, never executing the text). What follows it is
  overthinking: its think tokens (absolute, and as a share of the block) and its steps, split
  into re-checks (steps that open with a checking phrase, `RECHECK_OPENERS`) and other steps
  (restatements, new work). A right response none of whose steps states the answer (it was
  reached only after the closer) counts in `right` but not in `found`, and not in the means.
- For every wrong response of a problem that some response got right: underthinking when it
  closed its think block with fewer steps than the median right response of that problem.
- Token efficiency (EvalScope's ThinkEval `token_efficiency`): per response, the think tokens up
  to the end of its first correct step over all its think tokens; 0 for a wrong response and
  for a right one none of whose steps states the answer; the mean over all responses.
- Reasoning switches (EvalScope's `thought_num`, its underthinking signal): per response, the
  occurrences of `SWITCH_PHRASES` in its lower-cased think block; the mean over all responses.

A step's answer is read per item: for a numeric gold (math and reasoning-gym items) the step's
last boxed value or number (`step_answer`); otherwise the step's whole text, which the verifier
reads as it reads a final answer (a choice letter in "so the answer is C").
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from traac.common.items import Item
from traac.common.tables import Table, fmt
from traac.compression.first_correct import Accepts, first_correct_steps, parse_for
from traac.compression.formats import AUX_PROMPT
from traac.compression.segmentation import Step, split_steps
from traac.verification import verify_answers

# Steps that check what came before rather than move on (the segmentation's phrases that
# open a verification, and the confirmations reasoning models write after one).
RECHECK_OPENERS: tuple[str, ...] = (
    "Wait", "But wait", "Hold on", "Hmm", "Looking back", "Let me double-check",
    "Let me verify", "Let me check", "Let me recheck", "Let me re-check", "Let me confirm",
    "Double-check", "Double check", "Verify", "Check", "I don't see any errors",
    "That's correct", "That seems right", "Seems solid", "Correct", "Good", "Got it",
)  # fmt: skip
_RECHECK = re.compile(
    r"\s*(?:" + "|".join(re.escape(p) for p in sorted(RECHECK_OPENERS, key=len, reverse=True))
    + r")(?!\w)"
)  # fmt: skip

# EvalScope's switch phrases (ThinkEval's `switch_tokens`), counted as substrings of the
# lower-cased think block as it counts them.
SWITCH_PHRASES: tuple[str, ...] = (
    "alternatively", "but wait", "let me reconsider", "another way", "another approach",
    "another method", "another angle",
)  # fmt: skip

# Texts -> their lengths in the run's unit (tokens of its tokenizer, or words).
CountMany = Callable[[Sequence[str]], list[int]]


class Response(Protocol):
    """What this module reads of a sample record (`SampleRecord` has these)."""

    id: str
    sample: int
    response: str
    correct: bool
    closed: bool
    tier: str | None


def is_recheck(step: str) -> bool:
    """Does the step open with a checking phrase?"""
    return _RECHECK.match(step) is not None


def switches(reasoning: str) -> int:
    """Reasoning switches in a think block: occurrences of `SWITCH_PHRASES`, case-folded."""
    text = reasoning.lower()
    return sum(text.count(phrase) for phrase in SWITCH_PHRASES)


def reasoning_of(response: str, think_open: str = "<think>", think_close: str = "</think>") -> str:
    """The think block's text: before the first closer, after an opener that precedes it (a
    response whose prompt opened the block has none), without the auxiliary prompt a think
    budget appends (the model did not write it); the whole response if it never closed."""
    cut = response.find(think_close)
    head = response if cut < 0 else response[:cut]
    opened = head.find(think_open)
    head = head if opened < 0 else head[opened + len(think_open) :]
    return head.removesuffix(AUX_PROMPT)


def verifier_accepts(items: Sequence[Item], think_close: str = "</think>") -> Accepts:
    """`accepts` for `first_correct_steps`: trace t's answer is offered to `items[t]`'s own
    verifier as a final answer, through `verify_answers` (the pool, time-bounded; a check that
    runs out of time counts as wrong)."""

    def accepts(asks: Sequence[tuple[int, str]]) -> list[bool]:
        return verify_answers(
            [items[t] for t, _ in asks], [answer for _, answer in asks], think_close=think_close
        )

    return accepts


@dataclass(frozen=True)
class Overthought:
    """One right response: its steps, its first correct step (None: no step states the
    answer) and what follows it."""

    id: str
    sample: int
    tier: str | None
    steps: int
    first_correct: int | None
    steps_after: int
    rechecks_after: int
    think_tokens: int
    tokens_after: int
    tokens_to_first: int  # think tokens up to the end of the first correct step (0: none)


@dataclass(frozen=True)
class OverthinkStats:
    """A group's overthinking (means over right responses whose first correct step was found;
    shares in percent) and underthinking (share of the `eligible` wrong responses)."""

    right: int
    found: int
    first_step: float | None  # 1-based position of the first correct step
    steps: float | None
    steps_after: float | None
    rechecks_after: float | None
    other_after: float | None
    tokens_after: float | None
    share_after: float | None
    eligible_wrong: int
    underthinking: float | None
    # over all responses (None in summaries written before them): EvalScope's token efficiency
    # (a fraction, as it prints it) and reasoning switches per response
    token_efficiency: float | None = None
    switches: float | None = None

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> OverthinkStats:
        later = ("token_efficiency", "switches")  # absent from older summaries
        return cls(**{k: row.get(k) if k in later else row[k] for k in cls.__dataclass_fields__})


def find_overthinking(
    records: Sequence[Response],
    items: Mapping[str, Item],
    count: CountMany,
    *,
    think_open: str = "<think>",
    think_close: str = "</think>",
) -> list[Overthought]:
    """The first correct step of every right, closed response, and what follows it."""
    right = [r for r in records if r.correct and r.closed]
    reasonings = [reasoning_of(r.response, think_open, think_close) for r in right]
    traces = [tuple(split_steps(text)) for text in reasonings]
    found: list[int | None] = [None] * len(right)
    groups: dict[Callable[[str], str | None], list[int]] = {}
    for k, r in enumerate(right):
        groups.setdefault(parse_for(items[r.id]), []).append(k)
    for parse, members in groups.items():
        group_items = [items[right[k].id] for k in members]
        hits = first_correct_steps(
            [traces[k] for k in members], verifier_accepts(group_items, think_close), parse=parse
        )
        for k, hit in zip(members, hits, strict=True):
            found[k] = hit
    tails = [
        _tail(text, steps, hit) for text, steps, hit in zip(reasonings, traces, found, strict=True)
    ]
    heads = [
        "" if hit is None else text[: steps[hit].end]
        for text, steps, hit in zip(reasonings, traces, found, strict=True)
    ]
    lengths = count([*reasonings, *tails, *heads])
    out = []
    for k, r in enumerate(right):
        steps, hit = traces[k], found[k]
        after = steps[hit + 1 :] if hit is not None else ()
        out.append(
            Overthought(
                id=r.id,
                sample=r.sample,
                tier=r.tier,
                steps=len(steps),
                first_correct=hit,
                steps_after=len(after),
                rechecks_after=sum(is_recheck(s.text) for s in after),
                think_tokens=lengths[k],
                tokens_after=lengths[len(right) + k],
                tokens_to_first=lengths[2 * len(right) + k],
            )
        )
    return out


def _tail(reasoning: str, steps: Sequence[Step], hit: int | None) -> str:
    return "" if hit is None else reasoning[steps[hit].end :]


def underthinking(
    records: Sequence[Response], *, think_open: str = "<think>", think_close: str = "</think>"
) -> tuple[int, int]:
    """(wrong responses of problems some response got right, those among them that closed the
    think block with fewer steps than the median right response of their problem)."""
    right_steps: dict[str, list[int]] = {}
    for r in records:
        if r.correct and r.closed:
            text = reasoning_of(r.response, think_open, think_close)
            right_steps.setdefault(r.id, []).append(len(split_steps(text)))
    eligible = early = 0
    for r in records:
        if r.correct or r.id not in right_steps:
            continue
        eligible += 1
        if r.closed:
            steps = len(split_steps(reasoning_of(r.response, think_open, think_close)))
            early += steps < statistics.median(right_steps[r.id])
    return eligible, early


def efficiency(
    records: Sequence[Response],
    found: Sequence[Overthought],
    *,
    think_open: str = "<think>",
    think_close: str = "</think>",
) -> tuple[float | None, float | None]:
    """(token efficiency, switches per response), means over all `records`; `found` holds the
    right ones' first correct steps (`find_overthinking`). None without records."""
    if not records:
        return None, None
    hits = {(o.id, o.sample): o for o in found if o.first_correct is not None}
    ratios = []
    for r in records:
        o = hits.get((r.id, r.sample)) if r.correct else None
        ratios.append(o.tokens_to_first / o.think_tokens if o and o.think_tokens else 0.0)
    counts = [switches(reasoning_of(r.response, think_open, think_close)) for r in records]
    return statistics.fmean(ratios), statistics.fmean(counts)


def overthink_stats(
    found: Sequence[Overthought],
    eligible: int,
    early: int,
    efficient: tuple[float | None, float | None] = (None, None),
) -> OverthinkStats:
    """Means over the responses with a first correct step; underthinking from its counts;
    `efficient`: token efficiency and switches over all responses (`efficiency`)."""
    hits = [o for o in found if o.first_correct is not None]

    def mean(values: Sequence[float]) -> float | None:
        return statistics.fmean(values) if values else None

    return OverthinkStats(
        right=len(found),
        found=len(hits),
        first_step=mean([o.first_correct + 1 for o in hits]),  # type: ignore[operator]
        steps=mean([o.steps for o in hits]),
        steps_after=mean([o.steps_after for o in hits]),
        rechecks_after=mean([o.rechecks_after for o in hits]),
        other_after=mean([o.steps_after - o.rechecks_after for o in hits]),
        tokens_after=mean([o.tokens_after for o in hits]),
        share_after=mean([100.0 * o.tokens_after / o.think_tokens for o in hits if o.think_tokens]),
        eligible_wrong=eligible,
        underthinking=100.0 * early / eligible if eligible else None,
        token_efficiency=efficient[0],
        switches=efficient[1],
    )


def overthinking_by_tier(
    records: Sequence[Response],
    items: Mapping[str, Item],
    count: CountMany,
    *,
    think_open: str = "<think>",
    think_close: str = "</think>",
) -> tuple[OverthinkStats, dict[str, OverthinkStats]]:
    """Overall and per tier (tiers in first-seen order; none when no record has one)."""
    delimiters = {"think_open": think_open, "think_close": think_close}
    found = find_overthinking(records, items, count, **delimiters)
    overall = overthink_stats(
        found,
        *underthinking(records, **delimiters),
        efficiency(records, found, **delimiters),
    )
    tiers: dict[str, OverthinkStats] = {}
    for tier in dict.fromkeys(r.tier for r in records if r.tier is not None):
        mine = [r for r in records if r.tier == tier]
        theirs = [o for o in found if o.tier == tier]
        tiers[tier] = overthink_stats(
            theirs, *underthinking(mine, **delimiters), efficiency(mine, theirs, **delimiters)
        )
    return overall, tiers


def overthinking_table(
    groups: Mapping[str, OverthinkStats], unit: str, label: str = "group"
) -> Table:
    """One row per group: right responses, the share whose first correct step was found, where
    it lies, the steps and think tokens after it, and underthinking."""
    table = Table(
        [label, "right", "found (%)", "first step", "steps", "after", "re-checks", "other",
         f"think after ({unit})", "share after (%)", "wrong", "underthinking (%)",
         "token eff.", "switches"],
    )  # fmt: skip
    for name, s in groups.items():
        table.add(
            name, str(s.right), fmt(100.0 * s.found / s.right if s.right else None),
            fmt(s.first_step, 2), fmt(s.steps, 2), fmt(s.steps_after, 2),
            fmt(s.rechecks_after, 2), fmt(s.other_after, 2), fmt(s.tokens_after),
            fmt(s.share_after), str(s.eligible_wrong), fmt(s.underthinking),
            fmt(s.token_efficiency, 3), fmt(s.switches, 2),
        )  # fmt: skip
    return table
