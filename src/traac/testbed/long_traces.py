"""The long teacher: where a trace's redundancy sits is a setting, and nothing else.

A trace computes a chain one operation a step and, beside the needed steps, writes redundant
units of the kinds real long traces show (`traac.data.testbed_long`): a re-check of an
operation's result, a restatement of the problem or of the running total, a detour (a
regrouping tried, then abandoned: two steps). Easy problems get the most. Every choice is drawn
from the rng in the same order and number whatever the position, so the `trailing` and
`interleaved` traces of one seed hold the same chains and the same units and differ only in
where the units sit:

- trailing: the needed steps, the answer, the units in the order drawn, the answer restated;
- interleaved: each unit right after the needed step it refers to (its anchor), the answer last.

A re-check that slips states a wrong result and ends the units: in the interleaved trace the
chain goes on from the wrong value, in the trailing one the restated answer moves by as much,
so both box the same wrong answer. Each reasoning line's kind is in `Trace.labels`, beside the
text, never in it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from traac.compression.segmentation import split_steps
from traac.data.testbed_long import (
    CARRIED,
    DETOUR_DROP,
    DETOUR_TRY,
    RECHECKS,
    REDUNDANT,
    RESTATE_PARTIAL,
    RESTATE_PROBLEM,
    LongKind,
    coarse_kinds,
    long_step_kinds,
)
from traac.data.testbed_problems import CONCLUSION, GUESS, Chain
from traac.testbed.config import LongTeacherSettings
from traac.testbed.traces import Trace, answer_text, join_lines, summary_text

SLIP = "Wait, {e} = {v}."  # a re-check that states a wrong result


@dataclass(frozen=True)
class _Unit:
    """One redundant unit as drawn: its kind, the operation it follows (and refers to), its
    template(s); `slip` is how far a slipped re-check moves the result (0: no slip)."""

    kind: LongKind
    anchor: int
    templates: tuple[str, ...]
    grouped: int = 0  # a detour's regrouped operation
    slip: int = 0


def teach_long(entry: dict[str, Any], rng: random.Random, config: LongTeacherSettings) -> Trace:
    """A long trace for one chain_sum entry, its redundancy at `config.position`."""
    chain = Chain.parse(entry["metadata"]["expression"])
    values = chain.partials()
    n_ops, truth = len(chain.operators), values[-1]

    if len(chain.operands) >= config.guess_min_terms and rng.random() < config.guess_prob:
        done = rng.randint(1, n_ops - 2)
        lines = [_needed(chain, values, i, config.carry) for i in range(done)]
        guess = values[done] + rng.randint(-9, 9)
        lines += [GUESS, f"{CONCLUSION} {guess}."]
        labels = ("needed",) * done + ("guess", "conclude")
        return Trace(join_lines(lines), answer_text(guess), guess, guess == truth, 0, guessed=True,
                     labels=labels)  # fmt: skip

    most = config.max_redundant - config.fewer_per_term * (len(chain.operands) - config.min_terms)
    n_units = rng.randint(config.min_redundant, max(config.min_redundant, most))
    interrupted = n_units > 0 and rng.random() < config.interrupt_prob
    units = _draw_units(n_units, n_ops, rng, config, interrupted)
    cut = rng.random() if interrupted else 1.0
    slip = units[-1] if units and units[-1].slip else None
    final = truth + (slip.slip if slip else 0)

    if config.position == "trailing":
        lines = [_needed(chain, values, i, config.carry) for i in range(n_ops)]
        lines.append(f"{CONCLUSION} {truth}.")
        labels: list[str] = ["needed"] * n_ops + ["conclude"]
        for unit in units:
            lines += _render(unit, chain, values)
            labels += [unit.kind] * len(unit.templates)
        if units:  # like reasoning models, restate the answer after re-checking
            lines.append(f"{CONCLUSION} {final}.")
            labels.append("conclude")
    else:
        shifted = values if slip is None else _shift(values, slip)
        lines, labels = [], []
        ordered = sorted(units, key=lambda u: u.anchor)  # stable: the draw order at one anchor
        for i in range(n_ops):
            # after the slip the chain goes on from its wrong value
            believed = shifted if slip and i > slip.anchor else values
            lines.append(_needed(chain, believed, i, config.carry))
            labels.append("needed")
            for unit in (u for u in ordered if u.anchor == i):
                lines += _render(unit, chain, shifted if slip and i > slip.anchor else values)
                labels += [unit.kind] * len(unit.templates)
        lines.append(f"{CONCLUSION} {final}.")
        labels.append("conclude")

    n_rechecks = labels.count("recheck")
    if interrupted:  # cut somewhere after the last needed step, as the short teacher does
        start = max(k for k, label in enumerate(labels) if label == "needed") + 1
        end = start + int(cut * (len(lines) - start + 1))
        reasoning = join_lines(lines[:end])
        return Trace(reasoning, summary_text(chain, truth), truth, True,
                     labels[:end].count("recheck"), interrupted=True,
                     labels=tuple(labels[:end]))  # fmt: skip
    return Trace(join_lines(lines), answer_text(final), final, final == truth, n_rechecks,
                 slipped=slip is not None, labels=tuple(labels))  # fmt: skip


def _draw_units(
    n: int, n_ops: int, rng: random.Random, config: LongTeacherSettings, interrupted: bool
) -> list[_Unit]:
    """The redundant units in the order drawn; a slip is the last. The draws never depend on
    the position."""
    units: list[_Unit] = []
    for _ in range(n):
        kind = rng.choices(REDUNDANT, config.weights)[0]
        anchor = rng.randrange(n_ops)
        if kind == "recheck":
            template = rng.choice(RECHECKS)
            if not interrupted and rng.random() < config.slip_prob:
                units.append(_Unit(kind, anchor, (SLIP,), slip=rng.choice((-2, -1, 1, 2))))
                break
            units.append(_Unit(kind, anchor, (template,)))
        elif kind == "restate":
            units.append(_Unit(kind, anchor, (rng.choice((RESTATE_PROBLEM, RESTATE_PARTIAL)),)))
        else:
            units.append(
                _Unit(kind, anchor, (DETOUR_TRY, DETOUR_DROP), grouped=rng.randrange(n_ops))
            )
    return units


def _shift(values: list[int], slip: _Unit) -> list[int]:
    """The running values a trace believes after a slip at its anchor."""
    return [v + slip.slip if k > slip.anchor else v for k, v in enumerate(values)]


def _operation(chain: Chain, values: list[int], i: int) -> str:
    return f"{values[i]} {chain.operators[i]} {chain.operands[i + 1]}"


def _needed(chain: Chain, values: list[int], i: int, carry: bool = False) -> str:
    """Operation i and its result; with `carry`, what remains of the chain after it."""
    step = f"{'First,' if i == 0 else 'Then'} {_operation(chain, values, i)} = {values[i + 1]}"
    rest = [
        f"{op} {x}" for op, x in zip(chain.operators[i + 1 :], chain.operands[i + 2 :], strict=True)
    ]
    if carry and rest:
        step += CARRIED + " ".join([str(values[i + 1]), *rest])
    return step + "."


def _render(unit: _Unit, chain: Chain, values: list[int]) -> list[str]:
    """The unit's lines, its numbers read from `values` (the running values where it sits)."""
    i = unit.anchor
    fields = {
        "e": _operation(chain, values, i),
        "v": values[i + 1] + unit.slip,
        "expression": " ".join(
            [str(chain.operands[0])]
            + [f"{op} {x}" for op, x in zip(chain.operators, chain.operands[1:], strict=True)]
        ),
    }
    if unit.kind == "detour":
        k = unit.grouped
        fields["e"] = f"{chain.operands[k]} {chain.operators[k]} {chain.operands[k + 1]}"
    return [t.format(**fields) for t in unit.templates]


def reasoning_kinds(reasoning: str) -> list[LongKind]:
    """Each split step's kind by the teacher's grammar: on any text, the teacher's (where it
    agrees with `Trace.labels`) or a model's own response."""
    return long_step_kinds([step.text for step in split_steps(reasoning)])


def coarse_reasoning_kinds(reasoning: str) -> list[str]:
    """`reasoning_kinds` as compute, conclude and recheck (any redundant step), what the
    card's probe statistics count."""
    return coarse_kinds([step.text for step in split_steps(reasoning)])
