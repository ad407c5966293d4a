import contextlib
import json
import multiprocessing
import os
import random
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
    nested = "<think>t</think>So \\boxed{\\frac{1}{2}} or rather \\boxed{\\frac{\\sqrt{3}}{2}}."
    assert verify.extract_answer(nested) == "\\frac{\\sqrt{3}}{2}"
    assert verify.extract_answer("r</think>a<|im_end|>", think_close="</think>") == "a<|im_end|>"
    assert verify.extract_answer("x[/THINK]\\fbox{7}", think_close="[/THINK]") == "7"


def test_last_boxed_skips_an_unclosed_box():
    assert verify.last_boxed("\\boxed{3} then \\boxed{4") == "3"
    assert verify.last_boxed("\\boxed{\\{1, 2\\}}") == "\\{1, 2\\}"
    assert verify.last_boxed("none") is None


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
    ]
    start = time.monotonic()
    for text in junk:
        response = say(text)
        assert not verify.verify_choice(response, "B")
        assert not verify.verify_text(response, "yes")
        for name in ("puzzle24", "fraction_simplification", "advanced_geometry", "quantum_lock"):
            verify.task_answer(text, name, entries[name][0]["metadata"])
    assert time.monotonic() - start < 10


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


def test_the_threat_is_real(tmp_path):
    """sympy's parse_expr, which reasoning-gym's puzzle24 scorer calls on answers, runs Python."""
    from sympy.parsing.sympy_parser import parse_expr

    target = tmp_path / "REAL"
    with contextlib.suppress(Exception):
        parse_expr(f"open({str(target)!r}, 'w')")
    assert target.exists()


def test_injections_are_screened_and_never_run(trap, entries):
    root, pool = trap
    out = root / "PWNED"
    puzzle = entries["puzzle24"][0]
    for attack in _adversarial(out):
        assert verify.looks_like_code(attack) or not verify.is_plain_arithmetic(attack), attack
        for answer in (f"\\boxed{{{attack}}}", attack):
            assert not verify.verify_math(say(answer), "24")
            assert not verify.verify_task(say(answer), puzzle)
    assert not out.exists() and not (root / "IMPORTED").exists()
    assert _files(root) == set() and os.listdir(pool._workdir) == []


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


def test_workers_cannot_write_content_even_if_code_ran(trap, tmp_path):
    """Second line of defence, bypassing the screening on purpose: a worker that did run code
    could not write content to any file (no file-size allowance)."""
    _, pool = trap
    target = tmp_path / "WRITTEN"
    entry = {"answer": "1+1", "metadata": {"source_dataset": "puzzle24", "numbers": [1, 1]}}
    attack = f"open({str(target)!r}, 'w').write('payload')"
    message = {"op": "task", "task": "puzzle24", "answer": attack, "entry": entry}
    assert pool.call(message, 30, task="puzzle24") < 1
    assert not target.exists() or target.stat().st_size == 0


def test_a_stuck_check_times_out_and_the_pool_recovers():
    pool = verify.get_pool()
    before = pool.timeouts
    start = time.monotonic()
    assert not verify.verify_math(say("\\boxed{9^{9^{9^{9}}}}"), "1", timeout=1.0)
    assert time.monotonic() - start < 30
    assert pool.timeouts == before + 1
    assert verify.verify_math(say("\\boxed{2}"), "2")


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
