import contextlib
import json
import multiprocessing
import os
import random
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from traac.errors import TraacError
from traac.method import verify
from traac.method.items import Item

TASKS = (
    "ab",
    "advanced_geometry",
    "tsumego",
    "fraction_simplification",
    "propositional_logic",
    "bitwise_arithmetic",
    "letter_counting",
    "maze",
    "puzzle24",
    "quantum_lock",
)

# A hand-made knight swap (reasoning-gym takes seconds to generate one): a 6-cycle, white on A1,
# black on D1; each knight walks three squares round the cycle.
KNIGHT_SWAP = {
    "question": "Swap the knights.",
    "answer": '["w,A1,B1", "B,D1,E1", "w,B1,C1", "B,E1,F1", "w,C1,D1", "B,F1,A1"]',
    "metadata": {
        "source_dataset": "knight_swap",
        "board": {
            "A1": ["B1", "F1"],
            "B1": ["A1", "C1"],
            "C1": ["B1", "D1"],
            "D1": ["C1", "E1"],
            "E1": ["D1", "F1"],
            "F1": ["E1", "A1"],
        },
        "pieces": {"A1": "w", "B1": None, "C1": None, "D1": "B", "E1": None, "F1": None},
        "start_turn": "w",
        "solution": [
            ["w", "A1", "B1"],
            ["B", "D1", "E1"],
            ["w", "B1", "C1"],
            ["B", "E1", "F1"],
            ["w", "C1", "D1"],
            ["B", "F1", "A1"],
        ],
        "is_possible": True,
    },
}


SENTINEL = "traac_sentinel_mod"
INJECTIONS = [
    f"__import__('{SENTINEL}')",
    "__import__('os').system('touch {out}')",
    "open('{out}', 'w').write('x')",
    f'exec("import {SENTINEL}")',
    f"eval(\"__import__('{SENTINEL}')\")",
    f"(lambda: __import__('{SENTINEL}'))()",
    "getattr(__builtins__, 'open')('{out}', 'w')",
    "ｏｐｅｎ('{out}', 'w')",  # fullwidth: Python folds it to open
    f"__builtins__.__dict__['__import__']('{SENTINEL}')",
    'lambdify(x, \'open("{out}", "w")\')',
    f"import {SENTINEL}",
    "1 if open('{out}', 'w') else 24",
    "8*(10-8)+8 or open('{out}', 'w')",
    "compile('open(1)', 'f', 'exec')",
    "vars()['open']('{out}', 'w')",
    "breakpoint()",
    "().__class__.__bases__[0].__subclasses__()",
    "pathlib.Path('{out}').touch()",
    "os.mkdir('{out}')",
    f"\\_\\_import\\_\\_('{SENTINEL}')",
    "Path('{out}').touch()",
    'sympify(\'open("{out}", "w")\')',
    'parse_expr(\'open("{out}", "w")\')',
    "x.write('{out}')",
]


@pytest.fixture(scope="module", autouse=True)
def trap(tmp_path_factory):
    """For the whole module: a module that leaves a file when imported, importable by the workers
    and this process; a working directory to watch; a fresh worker pool started with the module
    on its path."""
    root = tmp_path_factory.mktemp("trap")
    (root / f"{SENTINEL}.py").write_text(
        f"open({str(root / 'IMPORTED')!r}, 'w').write('imported')\n"
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(root))
        mp.setenv("PYTHONPATH", os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))
        mp.chdir(root)
        pool = verify.configure_pool(verify.default_workers())
        yield root, pool
    verify.shutdown_pool()


def oracle(entry):
    """The gold answer (propositional logic has none: its metadata carries a valid conclusion)."""
    return entry["answer"] if entry["answer"] is not None else entry["metadata"]["example_answer"]


@pytest.fixture(scope="module")
def entries():
    """Two fresh reasoning-gym entries per task (regenerated, seeded), plus the knight swap."""
    import reasoning_gym

    config = {"quantum_lock": {"difficulty": 3}}
    out = {
        name: list(reasoning_gym.create_dataset(name, size=2, seed=3, **config.get(name, {})))
        for name in TASKS
    }
    out["knight_swap"] = [KNIGHT_SWAP]
    return out


def say(answer: str) -> str:
    return f"<think>\nLet me work.\n</think>\n{answer}"


# --- extraction -------------------------------------------------------------------------------


def test_extract_answer():
    assert verify.extract_answer("<think>no end") is None
    assert verify.extract_answer("<think>a</think>") == ""
    assert verify.extract_answer("<think>\\boxed{1}</think>x\n\ny = 3\n\n") == "y = 3"
    nested = "<think>t</think>So \\boxed{\\frac{1}{2}}. Checking that once more gives "
    nested += "\\boxed{\\frac{\\sqrt{3}}{2}}."
    assert verify.extract_answer(nested) == "\\frac{\\sqrt{3}}{2}"
    assert verify.extract_answer("r</think>a<|im_end|>", think_close="</think>") == "a<|im_end|>"
    assert verify.extract_answer("x[/THINK]\\fbox{7}", think_close="[/THINK]") == "7"


def test_last_boxed_skips_an_unclosed_box():
    assert verify.last_boxed("\\boxed{3} then \\boxed{4") == "3"
    assert verify.last_boxed("\\boxed{\\{1, 2\\}}") == "\\{1, 2\\}"
    assert verify.last_boxed("none") is None


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
    assert ",".join(verify.boxed_answers(text)) == theirs


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
    assert verify.verify_math(say(answer), gold) is right


def test_several_boxes_for_text_and_tasks(entries):
    assert verify.verify_text(say("\\boxed{no}, \\boxed{yes}"), "no, yes")
    assert verify.extract_answer(say("\\boxed{2} and \\boxed{3}")) == "2, 3"
    lock = entries["quantum_lock"][0]
    presses = lock["answer"].split("→")
    boxed = ", ".join(f"\\boxed{{{p.strip()}}}" for p in presses)
    assert verify.verify_task(say(boxed), lock), boxed


def test_lines_end_at_newline_only(entries):
    """U+2028 and form feed end a line for str.splitlines, not for a reader of the answer."""
    for sep in ("\u2028", "\x0c", "\x1c", "\x85"):
        response = say(f"12{sep}(checked)")
        assert verify.extract_answer(response) == f"12{sep}(checked)"
        assert verify.verify_math(response, "12")
        maze = entries["maze"][0]
        assert verify.verify_task(say(f"{maze['answer']}{sep}(checked)"), maze)
    assert verify.extract_text(f"The answer is: yes{chr(0x2028)}no") == f"yes{chr(0x2028)}no"


def test_answers_over_the_cap_are_wrong_unread(monkeypatch, entries):
    fits = say("\\boxed{2}" + " " * (verify.MAX_ANSWER_CHARS - 20))
    over = say("\\boxed{2}" + " " * verify.MAX_ANSWER_CHARS)
    assert verify.extract_answer(fits) == "2" and verify.verify_math(fits, "2")
    assert verify.verify_choice(fits.replace("{2}", "{B}"), "B")

    def no_worker():
        raise AssertionError("an over-long answer reached the pool")

    monkeypatch.setattr(verify, "get_pool", no_worker)
    assert verify.extract_answer(over) is None
    assert not verify.verify_math(over, "2")
    assert not verify.verify_choice(over.replace("{2}", "{B}"), "B")
    assert not verify.verify_text(over, "2")
    maze = entries["maze"][0]
    assert not verify.verify_task(over.replace("{2}", f"{{{maze['answer']}}}"), maze)


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
    assert verify.verify_math(say(answer), gold) is right


def test_verify_math_needs_a_closed_think_block():
    assert not verify.verify_math("<think>\\boxed{4}", "4")
    assert verify.verify_math("prompt opened it</think>\\boxed{4}", "4")


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
    assert verify.verify_choice(say(answer), "C")
    assert verify.verify_choice(say(answer), "(C)")
    assert not verify.verify_choice(say(answer), "B")


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
        assert not verify.verify_choice(say(answer), gold), (answer, gold)


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
    assert verify.verify_choice(say(answer), gold)


def test_verify_choice_rejects():
    assert not verify.verify_choice(say("The answer is a bit unclear"), "A")
    assert not verify.verify_choice("<think>C", "C")
    assert verify.verify_choice(say("I pick B.\nThe answer is (D)."), "D")
    with pytest.raises(TraacError, match="not an option letter"):
        verify.verify_choice(say("C"), "forty")


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
    assert verify.verify_text(say(answer), gold) is right


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
            assert verify.verify_task(response, entry), (name, response)


def test_wrong_answers_score_wrong_for_every_task(entries):
    flat = [e for task_entries in entries.values() for e in task_entries]
    for k, entry in enumerate(flat):
        name = entry["metadata"]["source_dataset"]
        others = [e for e in flat[k + 1 :] + flat[:k] if e["metadata"]["source_dataset"] != name]
        for other in others[:3]:  # answers of other tasks
            assert not verify.verify_task(say(oracle(other)), entry), (name, oracle(other))


def test_odd_answer_shapes(entries):
    def first(name):
        return entries[name][0]

    knight = KNIGHT_SWAP
    moves = json.loads(knight["answer"])
    multi_line = "Moves:\n[\n" + ",\n".join(f'  "{m}"' for m in moves) + "\n]"
    single_quotes = "\\boxed{[" + ", ".join(f"'{m}'" for m in moves) + "]}"
    assert verify.verify_task(say(multi_line), knight)
    assert verify.verify_task(say(single_quotes), knight)

    ab = first("ab")
    escaped = ab["answer"].replace("#", "\\#")
    assert verify.verify_task(say(f"\\boxed{{{escaped}}}"), ab)
    lock = first("quantum_lock")
    arrows = lock["answer"].replace("→", "\\to")
    assert verify.verify_task(say(f"\\boxed{{{arrows}}}"), lock)
    assert verify.verify_task(say(f"Press {lock['answer'].replace('→', '->')} (shortest)."), lock)
    logic = first("propositional_logic")
    latex = oracle(logic).replace("∧", "\\land ").replace("∨", "\\lor ").replace("¬", "\\neg ")
    latex = latex.replace("→", "\\rightarrow ").replace("↔", "\\leftrightarrow ")
    assert verify.verify_task(say(f"Therefore $\\boxed{{{latex}}}$"), logic)
    go = first("tsumego")
    assert verify.verify_task(say(f"The best move is {go['answer'].lower()}."), go)
    maze = first("maze")
    assert verify.verify_task(say(f"The minimum number of steps is {maze['answer']}."), maze)
    assert verify.verify_task(
        say(f"**{first('letter_counting')['answer']}**"), first("letter_counting")
    )
    bits = first("bitwise_arithmetic")
    assert verify.verify_task(say(f"The result is `{bits['answer']}`."), bits)
    fraction = first("fraction_simplification")
    n, d = (
        fraction["metadata"]["simplified_numerator"],
        fraction["metadata"]["simplified_denominator"],
    )
    assert verify.verify_task(say(f"\\boxed{{\\dfrac{{{n}}}{{{d}}}}}"), fraction)
    puzzle = first("puzzle24")
    assert verify.verify_task(say(f"{puzzle['answer'].replace('*', '×')} = 24"), puzzle)
    assert verify.verify_task(say(f"{puzzle['answer']} (each number once)."), puzzle)


def test_degenerate_outputs_cost_linear_time(entries):
    """Extraction runs in this process, outside the workers' deadline: no regex may backtrack
    badly on the repetitive junk RL policies emit."""
    junk = [
        "\\boxed{" * 20_000,
        "(" * 50_000,
        "1" * 50_000 + "x",
        "A" + " " * 50_000 + "x",
        "answer is" + " " * 50_000 + "x",
        "1, " * 20_000,
        "8 " + "\\ " * 20_000,
        "1" + " +" * 30_000 + "2",  # was quadratic in the arithmetic extractor: 45 s at 64K
        "1" + " " * 60_000 + "2",
        "1" + "." * 60_000 + "2",
        "w, A1, " * 9_000,
        "P ∧ " * 16_000,
        "A or B, " * 8_000,
    ]
    start = time.process_time()  # CPU seconds of this process: other jobs on the cores don't count
    for text in (t[: verify.MAX_ANSWER_CHARS - 50] for t in junk):  # longer is wrong unread
        response = say(text)
        assert not verify.verify_choice(response, "B")
        assert not verify.verify_text(response, "yes")
        verify.extract_answer(response)
        for name, task_entries in entries.items():
            candidate = verify.task_answer(text, name, task_entries[0]["metadata"])
            verify.task_answer_allowed(name, candidate, task_entries[0]["metadata"])
    assert time.process_time() - start < 20  # the quadratic " +" run alone took 45 s


def test_puzzle24_must_use_the_given_numbers(entries):
    puzzle = entries["puzzle24"][0]
    assert puzzle["metadata"]["numbers"] != [6, 4, 1, 1]
    assert not verify.verify_task(say("6*4*1*1"), puzzle)  # reasoning-gym alone would accept it


def test_task_score_keeps_partial_credit_out_of_verify_task(entries):
    go = entries["tsumego"][0]
    assert 0 < verify.task_score(say("Z99"), go) < 1
    assert not verify.verify_task(say("Z99"), go)


def test_task_entry_errors():
    with pytest.raises(TraacError, match="source_dataset"):
        verify.verify_task(say("1"), {"answer": "1", "metadata": {}})
    with pytest.raises(TraacError, match="no_such_task"):
        verify.verify_task(
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
    assert verify.verify_many(items, responses) == [True, False, True, True]
    assert verify.verify_many([], []) == []
    with pytest.raises(TraacError, match="2 items but 1 responses"):
        verify.verify_many(items[:2], responses[:1])


# --- never executing model output -------------------------------------------------------------


def _adversarial(out: Path) -> list[str]:
    return [s.replace("{out}", str(out)) for s in INJECTIONS]


def _files(root: Path) -> set[str]:
    return {p.name for p in root.iterdir()} - {f"{SENTINEL}.py", "__pycache__"}


# Attempts of our own on the allow-lists: each must be refused for every evaluating task.
BYPASSES = [
    "().__class__.__base__.__subclasses__()",
    "[].__class__.__mro__[1].__subclasses__()[0]",
    "[c for c in ().__class__.__bases__[0].__subclasses__() if c.__name__ == 'Popen']",
    "getattr(__builtins__, '__imp' + 'ort__')('os')",
    "__builtins__['ev' + 'al']('1')",
    "vars(__builtins__)[chr(101) + chr(118) + chr(97) + chr(108)]('1')",
    "chr(95) + chr(95) + 'import' + chr(95) + chr(95)",
    "globals()['__builtins__']",
    "'{0.__class__.__base__}'.format(1)",
    "f'{1}'",
    "'%s' % 1",
    "ｅｘｅｃ('1')",  # fullwidth: NFKC folds it to exec
    "𝐞𝐯𝐚𝐥('1')",  # mathematical bold
    "ｘ**2",  # a lookalike of an allowed name
    "(lambda: 1)()",
    "[x for x in (1,)]",
    "(x := 1)",
    "[*'AB']",
    "{'A': 1}",
    "{1, 2}",
    "1 if 1 else 2",
    "x.__class__",
    "sin(x).func",
    "Integral(x, x)",
    "Symbol('x')",
    "S('1')",
    "sin(x=1)",
    "exp(*[x])",
    "x**9**9**9",
    "9**9**9",
    "E**(x**x)",
    "2**99999",
    "['A', 'B'].__class__",
    "[1, 2] + [3]",
    "[[[1]]]",
    "b'AB'",
    "[True, None]",
    " [1, 2]",  # eval strips leading blanks that ast.parse rejects
    "[1, 2]\x00",
    "__import__('os').system('touch {out}')",
    "open('{out}', 'w')",
    f"__import__('{SENTINEL}')",
]


@pytest.fixture(scope="module")
def evaluating_entries():
    """Two entries of every task whose scorer evaluates answers."""
    import reasoning_gym

    return {
        name: list(reasoning_gym.create_dataset(name, size=2, seed=3))
        for name in verify.EVALUATING_TASKS
    }


def test_every_evaluating_scorer_has_an_allow_list():
    """Rescans the installed reasoning-gym: a task whose module `eval`s, `exec`s or
    `parse_expr`s must have an allow-list, or be listed here with why its answers are safe."""
    import inspect

    from reasoning_gym.factory import DATASETS

    not_the_answer = {
        "basic_arithmetic": "evals its own generated expressions",
        "bitwise_arithmetic": "evals the entry's problem; int(answer, 0) for the answer",
        "codeio": "execs its dataset's code when generating",
        "number_sorting": "evals the entry's answer; json.loads for the answer",
        "propositional_logic": "its parse_expr is its own recursive-descent parser",
    }
    pattern = re.compile(r"\b(?:eval|exec|literal_eval|parse_expr|sympify|parse_latex)\s*\(")
    found = set()
    for name, (cls, _) in DATASETS.items():
        modules = {k.__module__ for k in cls.__mro__ if k.__module__.startswith("reasoning_gym")}
        if any(pattern.search(inspect.getsource(sys.modules[m])) for m in modules):
            found.add(name)
    assert found - set(not_the_answer) == set(verify.EVALUATING_TASKS)


def test_each_listed_scorer_really_evaluates(tmp_path, evaluating_entries):
    """The threat is real: in this process, unguarded, each listed scorer runs Python."""
    import reasoning_gym

    for name, entries in evaluating_entries.items():
        target = tmp_path / name
        with contextlib.suppress(Exception):
            reasoning_gym.get_score_answer_fn(name)(f"open({str(target)!r}, 'w')", entries[0])
        assert target.exists(), name


def test_allow_lists_pass_right_answers(evaluating_entries):
    literal_forms = {  # the Python-list answers these scorers eval for partial credit
        "string_insertion": lambda e: repr(list(e["answer"])),
        "spiral_matrix": lambda e: repr([int(n) for n in e["answer"].split()]),
        "binary_matrix": lambda e: repr(
            [list(map(int, r.split())) for r in e["answer"].split("\n") if r]
        ),
        "n_queens": lambda e: repr([r.split() for r in e["answer"].split("\n")]),
    }
    for name, entries in evaluating_entries.items():
        for entry in entries:
            one_line = " ".join(entry["answer"].split())
            if name not in ("binary_matrix", "n_queens"):  # no multi-line answers yet
                assert verify.verify_task(say(entry["answer"]), entry), name
            assert verify.task_answer_allowed(name, one_line, entry["metadata"]), name
            if name in literal_forms:
                literal = literal_forms[name](entry)
                assert verify.task_answer_allowed(name, literal, entry["metadata"]), name
                assert 0 < verify.task_score(say(literal), entry) < 1, name  # eval'd in a worker
    intermediate = evaluating_entries["intermediate_integration"][0]
    x = intermediate["metadata"]["variable"]
    for answer in (f"exp({x})*sin({x}) + E**({x}/2) + C", f"log(Abs({x})) + pi*{x}**(3/2)"):
        assert verify.task_answer_allowed(
            "intermediate_integration", answer, intermediate["metadata"]
        )


@pytest.mark.parametrize("attack", BYPASSES)
def test_allow_lists_refuse_bypasses(attack, evaluating_entries, tmp_path, monkeypatch):
    attack = attack.replace("{out}", str(tmp_path / "PWNED"))
    sent = []

    class Recorder:
        def call(self, message, timeout, task=None):
            sent.append(message["answer"])
            return 0.0

    monkeypatch.setattr(verify, "get_pool", Recorder)
    for name, entries in evaluating_entries.items():
        meta = entries[0]["metadata"]
        assert not verify.task_answer_allowed(name, attack, meta), (name, attack)
        for answer in (attack, f"\\boxed{{{attack}}}"):
            verify.task_score(say(answer), entries[0])
            # what extraction made of it and sent on (plain arithmetic or a literal) is allowed
            assert all(verify.task_answer_allowed(name, s, meta) for s in sent), (name, sent)
            assert not any("__" in s or ("(" in s and "[" in s) for s in sent), (name, sent)
            sent.clear()


def test_injections_are_screened_and_never_run(trap, entries, evaluating_entries):
    """End to end through the real workers: nothing an answer says is run."""
    root, pool = trap
    out = root / "PWNED"
    targets = [entries["puzzle24"][0]] + [e[0] for e in evaluating_entries.values()]
    for attack in _adversarial(out) + [b.replace("{out}", str(out)) for b in BYPASSES]:
        for answer in (f"\\boxed{{{attack}}}", attack):
            assert not verify.verify_math(say(answer), "24")
            for entry in targets:
                assert not verify.verify_task(say(answer), entry)
    assert not out.exists() and not (root / "IMPORTED").exists()
    assert _files(root) == set() and os.listdir(pool._workdir) == []


def test_math_verify_hands_parse_expr_only_digits_and_operators(tmp_path, monkeypatch):
    """math-verify needs no screen because it only gives sympy's parse_expr the digit-and-operator
    runs its regex picks (LaTeX goes to a grammar). Pins that, in this process, for the
    injections: every string that would reach parse_expr or a sympify is recorded, not run."""
    import latex2sympy2_extended.latex2sympy2 as l2s
    import latex2sympy2_extended.logic as l2s_logic
    import latex2sympy2_extended.sets as l2s_sets
    import math_verify.parser as mv_parser
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

    seen: list[str] = []

    def record(text, *args, **kwargs):
        if isinstance(text, str):
            seen.append(text)
            raise ValueError("recorded, not parsed")
        return text

    for module in (mv_parser, l2s):
        monkeypatch.setattr(module, "parse_expr", record)
    for module in (l2s_logic, l2s_sets):
        monkeypatch.setattr(module, "sympify", record)
    mv_parser.parse_expr_cached.cache_clear()
    mv_parser.parse_latex_cached.cache_clear()
    extraction = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]
    attacks = _adversarial(tmp_path / "PWNED") + [b.replace("{out}", "x") for b in BYPASSES]
    for attack in [*attacks, "1+2*3", "2^10 - 1"]:
        for answer in (f"\\boxed{{{attack}}}", attack, f"The answer is {attack}."):
            with contextlib.suppress(Exception):
                parse(answer, extraction_config=extraction, parsing_timeout=None)
    assert seen, "the recorder saw nothing: math-verify no longer calls parse_expr this way"
    assert all(re.fullmatch(r"[\d.\s+\-*/()]+", s) for s in seen), sorted(set(seen))
    assert not list(tmp_path.iterdir())


def test_plain_arithmetic():
    assert verify.is_plain_arithmetic("8*(10 - 8) + 8")
    assert verify.is_plain_arithmetic("-(3/4) + 1.5")
    for text in (
        "2**99999999",
        "x + 1",
        "8*(10-8)+8 or 1",
        "open(1)",
        "(1).real",
        "[1]",
        "",
        "1e9",
    ):
        assert not verify.is_plain_arithmetic(text), text


GUARD_ATTEMPTS = {
    "write": "open('WRITTEN', 'w')",
    "append": "open('APPENDED', 'a')",
    "create": "os.close(os.open('CREATED', os.O_RDONLY | os.O_CREAT))",
    "mkdir": "os.mkdir('DIR')",
    "remove": "os.remove('EXISTING')",
    "rename": "os.rename('EXISTING', 'RENAMED')",
    "system": "os.system('touch SPAWNED_SYSTEM')",
    "popen": "subprocess.run(['touch', 'SPAWNED_POPEN'])",
    "fork": "os.fork()",
    "posix_spawn": "os.posix_spawn('/bin/touch', ['touch', 'SPAWNED_SPAWN'], {})",
    "exec": "os.execv('/bin/touch', ['touch', 'SPAWNED_EXEC'])",
    "fork_exec": "subprocess._fork_exec",
    "fork_exec_reimport": (
        "importlib.util.module_from_spec(importlib.util.find_spec('_posixsubprocess'))"
    ),
    "socket": "socket.create_connection(('127.0.0.1', PORT), timeout=2)",
    "ctypes": "ctypes.CDLL(None).system(b'touch SPAWNED_CTYPES')",
    "kill": "os.kill(os.getppid(), 0)",
    "rlimit": "resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))",
    "code": "(lambda: 0).__setattr__('__code__', (lambda: 1).__code__)",
}


def test_the_guard_refuses_writes_spawns_and_sockets(tmp_path):
    """install_guard in a fresh interpreter: every attempt raises PermissionError, nothing
    appears on disk or on the listening socket, and reading and importing still work."""
    import socket

    (tmp_path / "EXISTING").write_text("x")
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    program = "\n".join(
        [
            "import ctypes, importlib.util, os, resource, socket, subprocess, sys",
            "from traac.method.verify import install_guard",
            "original = [subprocess._fork_exec]  # a module global would be replaced too",
            "install_guard()",
            "assert subprocess._fork_exec is not original[0]",
            "for name, attempt in ATTEMPTS.items():",
            "    try:",
            "        value = eval(attempt)",
            "        if name == 'fork_exec':",
            "            value(*[None] * 23)",
            "        print(name, 'ALLOWED', flush=True)",
            "    except PermissionError:",
            "        print(name, 'refused', flush=True)",
            "    except Exception as exc:",
            "        print(name, 'ERROR', type(exc).__name__, exc, flush=True)",
            "print('read', open('EXISTING').read())",
            "import decimal, fractions, json",
            "print('imports ok')",
        ]
    )
    attempts = {k: v.replace("PORT", str(port)) for k, v in GUARD_ATTEMPTS.items()}
    package_root = str(Path(verify.__file__).resolve().parents[1])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([package_root, os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-c", f"ATTEMPTS = {attempts!r}\n{program}"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )
    lines = done.stdout.splitlines()
    assert [f"{name} refused" for name in GUARD_ATTEMPTS] == lines[: len(GUARD_ATTEMPTS)], (
        done.stdout + done.stderr
    )
    assert lines[len(GUARD_ATTEMPTS) :] == ["read x", "imports ok"]
    assert {p.name for p in tmp_path.iterdir()} == {"EXISTING"}
    with pytest.raises(TimeoutError):
        listener.accept()
    listener.close()


def test_workers_refuse_even_if_code_ran(trap, tmp_path):
    """Second line of defence, bypassing the screening on purpose: n_queens' scorer evals the
    answer inside a real worker, which writes, spawns and connects nothing."""
    import socket

    _, pool = trap
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    entry = {"answer": "Q", "metadata": {"source_dataset": "n_queens", "valid_answers": ["Q"]}}
    out = str(tmp_path / "OUT")
    attacks = [
        f"open({out!r}, 'w').write('payload')",
        f"__import__('os').system('touch {out}')",
        f"__import__('subprocess').run(['touch', {out!r}])",
        f"__import__('socket').create_connection(('127.0.0.1', {port}), timeout=2)",
        f"__import__('os').mkdir({out!r})",
    ]
    for attack in attacks:
        message = {"op": "task", "task": "n_queens", "answer": attack, "entry": entry}
        assert pool.call(message, 30, task="n_queens") == 0.0, attack
    assert not (tmp_path / "OUT").exists()
    with pytest.raises(TimeoutError):
        listener.accept()
    listener.close()
    good = {"op": "task", "task": "n_queens", "answer": "Q", "entry": entry}
    assert pool.call(good, 30, task="n_queens") == 1.0  # and the worker still serves


def test_a_stuck_check_times_out_and_the_pool_recovers():
    pool = verify.get_pool()
    before = pool.timeouts
    start = time.monotonic()
    assert not verify.verify_math(say("\\boxed{9^{9^{9^{9}}}}"), "1", timeout=1.0)
    assert time.monotonic() - start < 30
    assert pool.timeouts == before + 1
    assert verify.verify_math(say("\\boxed{2}"), "2")


def test_the_pool_recovers_when_its_zygote_dies():
    """The zygote killed (say, for memory): its workers die with it (a call that meets one counts
    as a timeout), and later calls get workers of a new zygote with the pool's tasks loaded."""
    pool = verify.VerifierPool(1)
    entry = {"answer": "Q", "metadata": {"valid_answers": ["Q"]}}
    message = {"op": "task", "task": "n_queens", "answer": "Q", "entry": entry}
    try:
        assert pool.call(message, 30, task="n_queens") == 1.0
        old = pool._zygote.proc
        os.kill(old.pid, signal.SIGKILL)
        old.wait()
        deadline = time.monotonic() + 120
        while pool.call(message, 30, task="n_queens") is None:
            assert time.monotonic() < deadline
        assert pool._zygote.proc is not old and pool.timeouts <= 1
        assert pool.call(message, 30, task="n_queens") == 1.0
    finally:
        pool.close()


def test_closing_the_pool_under_a_call(monkeypatch):
    """A call in flight when its pool closes returns None at once; nothing fails in the
    background (its worker is closed once, by whichever side gets there first)."""
    import threading

    errors = []
    monkeypatch.setattr(threading, "excepthook", errors.append)
    pool = verify.VerifierPool(1)
    message = {"op": "math", "gold": "\\boxed{1}", "pred": "\\boxed{9^{9^{9^{9}}}}"}
    with ThreadPoolExecutor(max_workers=1) as threads:
        pending = threads.submit(pool.call, message, 30)
        time.sleep(0.5)
        start = time.monotonic()
        pool.close()
        assert pending.result(timeout=10) is None
        assert time.monotonic() - start < 5
    time.sleep(0.5)  # the retiring thread has run
    assert not errors, errors


def test_a_worker_is_closed_once():
    """Its pipes close on the first close only: a second os.close could hit a descriptor number
    reused meanwhile (the pool and a retiring thread may both close a worker)."""
    requests_read, requests_write = os.pipe()
    replies_read, replies_write = os.pipe()
    worker = verify._Worker(0, requests_write, replies_read, frozenset())
    worker.close()
    reused = [os.open(os.devnull, os.O_RDONLY) for _ in range(2)]  # take the freed numbers
    worker.close()
    for fd in (*reused, requests_read, replies_write):
        os.fstat(fd)  # still open
        os.close(fd)


BOUND_TIMEOUT_S = 2.0


def test_one_call_takes_its_timeout_plus_one_second_from_4_threads(evaluating_entries, monkeypatch):
    """Hostile answers from 4 threads on 2 workers: worker-killing checks, a 10 MB answer, a
    regex-pathological run, parser-pathological nesting and sums. No call may take more than its
    timeout + 1 s (waiting for a worker and replacing a killed one included); the pool's start
    and each task's first load are setup, done before timing."""
    pool = verify.VerifierPool(2)
    monkeypatch.setattr(verify, "get_pool", lambda: pool)
    t = BOUND_TIMEOUT_S
    n = verify.MAX_ANSWER_CHARS - 100
    puzzle, queens = evaluating_entries["puzzle24"][0], evaluating_entries["n_queens"][0]
    poly = evaluating_entries["polynomial_multiplication"][0]
    integral = evaluating_entries["intermediate_integration"][0]
    x = integral["metadata"]["variable"]
    heavy = f"({x}+1)**999*sin({x})**999*exp({x})*log({x})**999 + C"
    cases = [
        lambda: verify.verify_math(say("\\boxed{9^{9^{9^{9}}}}"), "1", timeout=t),
        lambda: verify.verify_task(say(heavy), integral, timeout=t),
        lambda: verify.verify_math(say("\\boxed{1}" * 1_000_000), "1", timeout=t),
        lambda: verify.verify_task(say("1" + " +" * (n // 2) + "2"), puzzle, timeout=t),
        lambda: verify.verify_task(say("[" * n), queens, timeout=t),
        lambda: verify.verify_task(say("x+" * (n // 2) + "x"), poly, timeout=t),
        lambda: verify.verify_choice(say("answer is A or B, " * (n // 18)), "A"),
    ]
    for entry in (puzzle, queens, poly, integral):  # setup: load the scorers
        verify.verify_task(say("1"), entry)

    def timed(case):
        start = time.monotonic()
        assert not case()
        return time.monotonic() - start

    try:
        with ThreadPoolExecutor(max_workers=4) as threads:
            seconds = list(threads.map(timed, cases * 2))
        print(f"\nworst call from 4 threads on 2 workers: {max(seconds):.2f} s")
        assert max(seconds) <= t + 1.0, seconds
        assert verify.verify_math(say("\\boxed{2}"), "2")  # replacements are up
    finally:
        pool.close()


def _check_in_child(queue):
    queue.put(verify.verify_math(say("\\boxed{3}"), "3") and not verify.verify_math(say("4"), "3"))


def test_works_in_forked_and_spawned_subprocesses():
    assert verify.verify_math(say("\\boxed{5}"), "5")  # the parent's pool exists before the fork
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_check_in_child, args=(queue,))
    child.start()
    assert queue.get(timeout=120) is True
    child.join(timeout=30)
    code = (
        "from traac.method.verify import verify_math; "
        "print(verify_math('</think>\\\\boxed{2}', '2'))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "True", done.stderr
    assert verify.verify_math(say("\\boxed{5}"), "5")  # the parent's pool is untouched


# --- the stress test ------------------------------------------------------------------------------

STRESS_BOUND_S = 120.0  # generous: the machine running the suite may be shared


def test_stress_1000_answers_from_8_threads(trap, entries):
    root, pool = trap
    rng = random.Random(0)
    cases: list[tuple[Item, str, bool]] = []
    task_entries = [e for es in entries.values() for e in es]
    while len(cases) < 950:
        kind = rng.choice(["math", "math", "choice", "text", "task", "task"])
        right = rng.random() < 0.5
        if kind == "math":
            a, b = rng.randint(1, 50), rng.randint(1, 50)
            gold = f"\\frac{{{a}}}{{{b}}}"
            pred = (
                f"\\boxed{{\\frac{{{2 * a}}}{{{2 * b}}}}}" if right else f"\\boxed{{{a + b + 0.5}}}"
            )
            cases.append((Item(id="m", question="", answer=gold), say(pred), right))
        elif kind == "choice":
            gold = rng.choice("ABCD")
            pred = gold if right else "E"
            cases.append(
                (Item(id="c", question="", answer=gold, verifier="choice"), say(f"({pred})"), right)
            )
        elif kind == "text":
            item = Item(id="t", question="", answer="no, no, yes", verifier="text")
            cases.append((item, say("No, no, yes." if right else "no, yes"), right))
        else:
            entry = rng.choice(task_entries)
            name = entry["metadata"]["source_dataset"]
            other = rng.choice([e for e in task_entries if e["metadata"]["source_dataset"] != name])
            item = Item(id="g", question="", answer="-", verifier="task", entry=entry)
            cases.append((item, say(oracle(entry) if right else oracle(other)), right))
    attacks = _adversarial(root / "PWNED")
    puzzle = entries["puzzle24"][0]
    for i in range(48):
        attack = attacks[i % len(attacks)]
        item = (
            Item(id="a", question="", answer="24")
            if i % 2
            else Item(id="a", question="", answer="-", verifier="task", entry=puzzle)
        )
        cases.append((item, say(f"\\boxed{{{attack}}}" if i % 4 < 2 else attack), False))
    for _ in range(2):  # too big to check in time: the deadline kills the worker
        cases.append((Item(id="h", question="", answer="1"), say("\\boxed{9^{9^{9^{9}}}}"), False))
    rng.shuffle(cases)
    assert len(cases) == 1000

    def check(case: tuple[Item, str, bool]) -> bool:
        timeout = 2.0 if case[0].id == "h" else verify.DEFAULT_TIMEOUT
        return verify.verify_item(case[0], case[1], timeout=timeout)

    timeouts_before = pool.timeouts
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=8) as threads:
        verdicts = list(threads.map(check, cases))
    elapsed = time.monotonic() - start
    print(
        f"\nstress: 1000 answers (50 adversarial) from 8 threads on {pool.workers} workers: "
        f"{elapsed:.1f} s, {pool.timeouts - timeouts_before} timeouts"
    )
    mismatches = [c for c, v in zip(cases, verdicts, strict=True) if v != c[2]]
    assert not mismatches, mismatches[:5]
    assert elapsed < STRESS_BOUND_S
    assert pool.timeouts - timeouts_before == 2
    assert _files(root) == set() and os.listdir(pool._workdir) == []
