"""The `chain_sum` task's score, traac's own: the testbed's verifier needs no reasoning-gym.

It scores as reasoning-gym 0.1.25's `chain_sum` does (`utils.compute_decimal_reward`): 1.0 when
the answer, commas dropped, is the gold as a decimal ("+01,000.00" is 1000); otherwise partial
credit, the gold's length over the answer's, when the gold appears in the answer; else 0.
tests/verification/test_chain_sum.py compares it with reasoning-gym's where that is installed.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any


def decimal_score(answer: str | None, gold: str) -> float:
    """1.0 for the same decimal value, `len(gold) / len(answer)` when `answer` contains `gold`."""
    if not answer:
        return 0.0
    answer, gold = answer.replace(",", ""), gold.replace(",", "")
    try:
        if Decimal(answer) == Decimal(gold):
            return 1.0
    except (ArithmeticError, ValueError, TypeError):  # not a number, a signalling NaN...
        pass
    return len(gold) / len(answer) if gold in answer else 0.0


def chain_sum_score(answer: str | None, entry: dict[str, Any]) -> float:
    """A chain_sum entry's score of `answer` (the entry's `answer` is the gold)."""
    return decimal_score(answer, str(entry["answer"]))


# The tasks traac scores itself, reasoning-gym or not: name -> (answer, entry) -> score.
OWN_SCORERS: dict[str, Callable[[str | None, dict[str, Any]], float]] = {
    "chain_sum": chain_sum_score,
}
