"""Extraction: the final answer, its boxes, its last line, the length cap."""

import pytest

from traac.verification import answers, verifiers


def say(answer: str) -> str:
    return f"<think>\nLet me work.\n</think>\n{answer}"


# --- extraction -------------------------------------------------------------------------------


def test_extract_answer():
    assert answers.extract_answer("<think>no end") is None
    assert answers.extract_answer("<think>a</think>") == ""
    assert answers.extract_answer("<think>\\boxed{1}</think>x\n\ny = 3\n\n") == "y = 3"
    nested = "<think>t</think>So \\boxed{\\frac{1}{2}}. Checking that once more gives "
    nested += "\\boxed{\\frac{\\sqrt{3}}{2}}."
    assert answers.extract_answer(nested) == "\\frac{\\sqrt{3}}{2}"
    assert answers.extract_answer("r</think>a<|im_end|>", think_close="</think>") == "a<|im_end|>"
    assert answers.extract_answer("x[/THINK]\\fbox{7}", think_close="[/THINK]") == "7"


def test_last_boxed_skips_an_unclosed_box():
    assert answers.last_boxed("\\boxed{3} then \\boxed{4") == "3"
    assert answers.last_boxed("\\boxed{\\{1, 2\\}}") == "\\{1, 2\\}"
    assert answers.last_boxed("none") is None


@pytest.mark.parametrize(
    "text",
    [
        "\\boxed{2} and \\boxed{3}",
        "\\boxed{2}, \\boxed{3}, \\boxed{5}",
        "$x = \\boxed{2}$ or $x = \\boxed{-1}$",
        "So \\boxed{1/2} or rather \\boxed{\\sqrt{3}/2}.",
        "First \\boxed{5}. Hmm, actually \\boxed{6}",
        "\\boxed{5}. A long aside with no list separator in it at all. \\boxed{6}",
        "\\boxed{4} is the area; so the perimeter, which we need next, comes out as \\boxed{8}",
        "\\boxed{7}\\boxed{8}",
        "\\boxed{\\boxed{9}}",
        "\\boxed{1} then \\boxed{2",
    ],
)
def test_boxed_answers_are_the_boxes_math_verify_reads(text):
    """Parity with math-verify's own box reader (latex2sympy2's extract_boxed_content), which
    joins the boxes it reads with ","; nothing here has a comma inside a box."""
    from latex2sympy2_extended.math_normalization import extract_boxed_content

    theirs = extract_boxed_content(text, mode="last")
    if theirs.endswith("{2"):  # they keep an unclosed last box as it is; we skip it
        theirs = "1"
    assert ",".join(answers.boxed_answers(text)) == theirs


@pytest.mark.parametrize(
    ("answer", "gold", "right"),
    [
        ("The solutions are \\boxed{2} and \\boxed{3}.", "2, 3", True),
        ("$x = \\boxed{2}$ or $x = \\boxed{3}$", "\\{2,3\\}", True),
        ("\\boxed{3}, \\boxed{2}", "2, 3", True),
        ("\\boxed{2} and \\boxed{3}", "3", False),
        ("\\boxed{2}. Then we keep going for a good while longer before \\boxed{3}", "3", True),
    ],
)
def test_several_boxes_are_one_set_answer(answer, gold, right):
    assert verifiers.verify_math(say(answer), gold) is right


def test_several_boxes_for_text_and_tasks(entries):
    assert verifiers.verify_text(say("\\boxed{no}, \\boxed{yes}"), "no, yes")
    assert answers.extract_answer(say("\\boxed{2} and \\boxed{3}")) == "2, 3"
    lock = entries["quantum_lock"][0]
    presses = lock["answer"].split("→")
    boxed = ", ".join(f"\\boxed{{{p.strip()}}}" for p in presses)
    assert verifiers.verify_task(say(boxed), lock), boxed


def test_lines_end_at_newline_only(entries):
    """U+2028 and form feed end a line for str.splitlines, not for a reader of the answer."""
    for sep in ("\u2028", "\x0c", "\x1c", "\x85"):
        response = say(f"12{sep}(checked)")
        assert answers.extract_answer(response) == f"12{sep}(checked)"
        assert verifiers.verify_math(response, "12")
        maze = entries["maze"][0]
        assert verifiers.verify_task(say(f"{maze['answer']}{sep}(checked)"), maze)
    assert answers.extract_text(f"The answer is: yes{chr(0x2028)}no") == f"yes{chr(0x2028)}no"


def test_answers_over_the_cap_are_wrong_unread(monkeypatch, entries):
    fits = say("\\boxed{2}" + " " * (answers.MAX_ANSWER_CHARS - 20))
    over = say("\\boxed{2}" + " " * answers.MAX_ANSWER_CHARS)
    assert answers.extract_answer(fits) == "2" and verifiers.verify_math(fits, "2")
    assert verifiers.verify_choice(fits.replace("{2}", "{B}"), "B")

    def no_worker():
        raise AssertionError("an over-long answer reached the pool")

    monkeypatch.setattr(verifiers, "get_pool", no_worker)
    assert answers.extract_answer(over) is None
    assert not verifiers.verify_math(over, "2")
    assert not verifiers.verify_choice(over.replace("{2}", "{B}"), "B")
    assert not verifiers.verify_text(over, "2")
    maze = entries["maze"][0]
    assert not verifiers.verify_task(over.replace("{2}", f"{{{maze['answer']}}}"), maze)
