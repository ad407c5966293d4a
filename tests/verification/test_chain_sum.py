"""The chain_sum score is traac's own (the testbed's verifier without reasoning-gym): it scores
as reasoning-gym's does, checked against it on many answers where it is installed, and on a
frozen table everywhere; the pool scores testbed items with it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from traac.verification import task_score
from traac.verification.chain_sum import chain_sum_score, decimal_score

# (answer, gold, reasoning-gym 0.1.19's compute_decimal_reward)
FROZEN = [
    ("3", "3", 1.0), ("+03", "3", 1.0), ("3.00", "3", 1.0), ("-1,000", "-1000", 1.0),
    ("1,000", "-1000", 0.0), ("-3", "3", 0.5), ("33", "3", 0.5), ("x = 3", "3", 0.2),
    ("4", "3", 0.0), ("", "3", 0.0), (None, "3", 0.0), ("NaN", "3", 0.0), ("sNaN", "3", 0.0),
    ("1e0", "1", 1.0), ("three", "3", 0.0), (" 7 ", "7", 1.0),
]  # fmt: skip


@pytest.mark.parametrize(("answer", "gold", "score"), FROZEN)
def test_the_frozen_scores(answer: str | None, gold: str, score: float) -> None:
    assert decimal_score(answer, gold) == pytest.approx(score)


NUMBERISH = st.text(alphabet="0123456789+-., eEnNaAsx", max_size=8)


@given(answer=st.one_of(NUMBERISH, st.text(max_size=6)), gold=st.integers(-999, 999).map(str))
def test_it_scores_as_reasoning_gym_does(answer: str, gold: str) -> None:
    utils = pytest.importorskip("reasoning_gym.utils", reason="the dev extra brings it")
    theirs = utils.compute_decimal_reward(answer, oracle_answer=gold)
    assert decimal_score(answer, gold) == theirs
    assert chain_sum_score(answer, {"answer": gold}) == theirs


def test_the_pool_scores_a_testbed_item_with_it() -> None:
    entry = {"question": "2 + 3 =", "answer": "5",
             "metadata": {"source_dataset": "chain_sum", "expression": "2 + 3"}}  # fmt: skip
    assert task_score("</think>5", entry) == 1.0
    assert task_score("</think>\\boxed{5}", entry) == 1.0
    assert task_score("</think>6", entry) == 0.0
