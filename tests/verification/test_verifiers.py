"""The four verifiers, the registry that picks one per item, and verify_many."""

from typing import get_args

import pytest

from traac.common.items import Item, VerifierKind
from traac.errors import TraacError
from traac.verification import verifiers


def oracle(entry):
    """The gold answer (propositional logic has none: its metadata carries a valid conclusion)."""
    return entry["answer"] if entry["answer"] is not None else entry["metadata"]["example_answer"]


def say(answer: str) -> str:
    return f"<think>\nLet me work.\n</think>\n{answer}"


# --- math ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "gold", "right"),
    [
        ("\\boxed{\\frac{1}{2}}", "0.5", True),
        ("The answer is 42.", "42", True),
        ("\\boxed{41}", "42", False),
        ("\\boxed{\\sqrt{18}}", "3\\sqrt{2}", True),
        ("$\\boxed{1+x^2}$", "x^2+1", True),
        ("\\boxed{(-118, -202)}", "(-118.000, -202.000)", True),
        ("so 179/879", "$\\frac{179}{879}$", True),
        ("", "1", False),
    ],
)
def test_verify_math(answer, gold, right):
    assert verifiers.verify_math(say(answer), gold) is right


def test_verify_math_needs_a_closed_think_block():
    assert not verifiers.verify_math("<think>\\boxed{4}", "4")
    assert verifiers.verify_math("prompt opened it</think>\\boxed{4}", "4")


# --- multiple choice and text ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        "C",
        "(C)",
        "\\boxed{C}",
        "\\boxed{\\text{(C)}}",
        "The answer is C.",
        "**Answer: (c)**",
        "Option C",
        "C) 42",
    ],
)
def test_verify_choice_accepts_the_usual_forms(answer):
    assert verifiers.verify_choice(say(answer), "C")
    assert verifiers.verify_choice(say(answer), "(C)")
    assert not verifiers.verify_choice(say(answer), "B")


@pytest.mark.parametrize(
    "answer",
    [
        "B or C",
        "(A) or (B)",
        "A, B",
        "A and B",
        "B/C",
        "The answer is B or C.",
        "**Answer: (A) or (B)**",
        "Option B or C",
        "\\boxed{B or C}",
        "\\boxed{A, B}",
        "\\boxed{B} or \\boxed{C}",
        "The answer is \\boxed{A} and \\boxed{B}",
    ],
)
def test_verify_choice_rejects_a_hedge(answer):
    for gold in "ABC":
        assert not verifiers.verify_choice(say(answer), gold), (answer, gold)


@pytest.mark.parametrize(
    ("answer", "gold"),
    [
        ("The answer is C, and I am sure of it.", "C"),
        ("(B) A decrease in pressure", "B"),
        ("The value is \\boxed{42}, so the answer is \\boxed{C}", "C"),
        ("\\boxed{C}, \\boxed{C}", "C"),
        ("The answer is (C). Options B or D would overshoot.", "C"),
        ("C) 42, not B or D", "C"),
    ],
)
def test_verify_choice_is_not_fooled_by_words_that_look_like_letters(answer, gold):
    assert verifiers.verify_choice(say(answer), gold)


def test_verify_choice_rejects():
    assert not verifiers.verify_choice(say("The answer is a bit unclear"), "A")
    assert not verifiers.verify_choice("<think>C", "C")
    assert verifiers.verify_choice(say("I pick B.\nThe answer is (D)."), "D")
    with pytest.raises(TraacError, match="not an option letter"):
        verifiers.verify_choice(say("C"), "forty")


@pytest.mark.parametrize(
    ("answer", "gold", "right"),
    [
        ("The answer is (E).", "(E)", True),
        ("\\boxed{e}", "(E)", True),
        ("yes.", "Yes", True),
        ("thursday", "[thursday]", True),
        ("The answer is: no, no, yes", "no, no, yes", True),
        ("7.350", "7.35", True),
        ("**2016-11-07**", "2016-11-07", True),
        ("'1 egg'", "1 egg", True),
        ("2 eggs", "1 egg", False),
        ("(D)", "(E)", False),
    ],
)
def test_verify_text(answer, gold, right):
    assert verifiers.verify_text(say(answer), gold) is right


# --- reasoning-gym tasks --------------------------------------------------------------------------


@pytest.mark.parametrize("style", ["plain", "boxed", "sentence"])
def test_oracle_answers_score_right_for_every_task(entries, style):
    forms = {
        "plain": lambda a: say(a),
        "boxed": lambda a: say(f"So the final answer is $\\boxed{{{a}}}$."),
        "sentence": lambda a: say(f"After working it out:\n\nThe answer is {a}."),
    }
    for name, task_entries in entries.items():
        for entry in task_entries:
            response = forms[style](oracle(entry))
            assert verifiers.verify_task(response, entry), (name, response)


def test_wrong_answers_score_wrong_for_every_task(entries):
    flat = [e for task_entries in entries.values() for e in task_entries]
    for k, entry in enumerate(flat):
        name = entry["metadata"]["source_dataset"]
        others = [e for e in flat[k + 1 :] + flat[:k] if e["metadata"]["source_dataset"] != name]
        for other in others[:3]:  # answers of other tasks
            assert not verifiers.verify_task(say(oracle(other)), entry), (name, oracle(other))


def test_task_score_keeps_partial_credit_out_of_verify_task(entries):
    go = entries["tsumego"][0]
    assert 0 < verifiers.task_score(say("Z99"), go) < 1
    assert not verifiers.verify_task(say("Z99"), go)


def test_task_entry_errors():
    with pytest.raises(TraacError, match="source_dataset"):
        verifiers.verify_task(say("1"), {"answer": "1", "metadata": {}})
    with pytest.raises(TraacError, match="no_such_task"):
        verifiers.verify_task(
            say("1"), {"answer": "1", "metadata": {"source_dataset": "no_such_task"}}
        )


def test_items_and_verify_many(entries):
    items = [
        Item(id="m", question="q", answer="2", verifier="math"),
        Item(id="c", question="q", answer="B", verifier="choice"),
        Item(id="t", question="q", answer="(A)", verifier="text"),
        Item(id="g", question="q", answer="-", verifier="task", entry=entries["maze"][0]),
    ]
    responses = [say("\\boxed{2}"), say("(C)"), say("a"), say(entries["maze"][0]["answer"])]
    assert verifiers.verify_many(items, responses) == [True, False, True, True]
    assert verifiers.verify_many([], []) == []
    with pytest.raises(TraacError, match="2 items but 1 responses"):
        verifiers.verify_many(items[:2], responses[:1])


def test_every_verifier_kind_has_a_verifier():
    assert set(verifiers.VERIFIERS) == set(get_args(VerifierKind))
