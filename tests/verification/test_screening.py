"""Never executing model output: the allow-lists, math-verify's own parsing, and hostile answers
end to end through the workers, alone and under load."""

import contextlib
import os
import random
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from traac.common.items import Item
from traac.verification import screening, verifiers

# The module the trap fixture (conftest.py) plants: importing it leaves a file.
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


def oracle(entry):
    """The gold answer (propositional logic has none: its metadata carries a valid conclusion)."""
    return entry["answer"] if entry["answer"] is not None else entry["metadata"]["example_answer"]


def say(answer: str) -> str:
    return f"<think>\nLet me work.\n</think>\n{answer}"


# --- never executing model output -------------------------------------------------------------


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
    assert found - set(not_the_answer) == set(screening.EVALUATING_TASKS)


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
                assert verifiers.verify_task(say(entry["answer"]), entry), name
            assert screening.task_answer_allowed(name, one_line, entry["metadata"]), name
            if name in literal_forms:
                literal = literal_forms[name](entry)
                assert screening.task_answer_allowed(name, literal, entry["metadata"]), name
                assert 0 < verifiers.task_score(say(literal), entry) < 1, name  # eval'd in a worker
    intermediate = evaluating_entries["intermediate_integration"][0]
    x = intermediate["metadata"]["variable"]
    for answer in (f"exp({x})*sin({x}) + E**({x}/2) + C", f"log(Abs({x})) + pi*{x}**(3/2)"):
        assert screening.task_answer_allowed(
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

    monkeypatch.setattr(verifiers, "get_pool", Recorder)
    for name, entries in evaluating_entries.items():
        meta = entries[0]["metadata"]
        assert not screening.task_answer_allowed(name, attack, meta), (name, attack)
        for answer in (attack, f"\\boxed{{{attack}}}"):
            verifiers.task_score(say(answer), entries[0])
            # what extraction made of it and sent on (plain arithmetic or a literal) is allowed
            assert all(screening.task_answer_allowed(name, s, meta) for s in sent), (name, sent)
            assert not any("__" in s or ("(" in s and "[" in s) for s in sent), (name, sent)
            sent.clear()


def test_injections_are_screened_and_never_run(trap, entries, evaluating_entries):
    """End to end through the real workers: nothing an answer says is run."""
    root, pool = trap
    out = root / "PWNED"
    targets = [entries["puzzle24"][0]] + [e[0] for e in evaluating_entries.values()]
    for attack in _adversarial(out) + [b.replace("{out}", str(out)) for b in BYPASSES]:
        for answer in (f"\\boxed{{{attack}}}", attack):
            assert not verifiers.verify_math(say(answer), "24")
            for entry in targets:
                assert not verifiers.verify_task(say(answer), entry)
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
    assert screening.is_plain_arithmetic("8*(10 - 8) + 8")
    assert screening.is_plain_arithmetic("-(3/4) + 1.5")
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
        assert not screening.is_plain_arithmetic(text), text


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
        timeout = 2.0 if case[0].id == "h" else verifiers.DEFAULT_TIMEOUT
        return verifiers.verify_item(case[0], case[1], timeout=timeout)

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
