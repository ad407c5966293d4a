"""Is a response right? Answer extraction and the four verifiers, time-bounded and never executing
model output.

A response's final answer is the text after its last think closer (no closer, or more than
`MAX_ANSWER_CHARS` after it: wrong). From it the boxes are taken (`boxed_answers`: the last
complete `\\boxed{...}` and the boxes math-verify reads with it as one list, nested braces
handled), else the last non-empty line (lines end at `\\n` only).

- `verify_math(response, gold)`: math-verify; the gold is wrapped in `\\boxed{}`, the prediction
  is the boxes (several read as one set, `\\boxed{2}, \\boxed{3}` = {2, 3}) or the last line.
- `verify_choice(response, gold_letter)`: a multiple-choice letter ("C", "(C)", `\\boxed{C}`,
  "the answer is C"); a hedge ("B or C", "A, B", two boxed letters) is no answer.
- `verify_text(response, gold)`: normalised string match for short free-text answers (BBEH).
- `verify_task(response, entry)`: reasoning-gym's own `score_answer` for the task named in
  `entry["metadata"]["source_dataset"]`; right means a score of 1.0 (`task_score` gives the raw
  score). Each task's answer is first brought into the shape its scorer reads (a JSON move list
  for knight_swap, "(x, y)" for an orthocenter, unicode connectives for propositional logic...).
- `verify_many(items, responses)`: the batch form for evaluation and training.

Model output is never executed. Two layers:

1. Screening on the syntax tree. Some reasoning-gym scorers `eval` the answer or hand it to
   sympy's `parse_expr` (which evaluates Python): `EVALUATING_TASKS` lists them, and there an
   answer must pass its task's allow-list (`task_answer_allowed`: the oracle's plain form, or a
   Python literal / arithmetic tree read with `ast`, never evaluated) or it scores 0 before it
   reaches a worker. math-verify needs no allow-list: it hands `parse_expr` only
   digit-and-operator runs its own regex picked (pinned by a test) and parses LaTeX with a
   grammar. Math answers that look like Python (`looks_like_code`) are still wrong outright, as
   math-verify would read a number out of `1 if open(...) else 24`.
2. The workers. Checks run in worker processes forked from a warmed-up zygote (a fresh
   interpreter, never a copy of the caller). A worker has no file-size allowance, a memory cap,
   a private empty working directory, and an audit hook (`install_guard`) that refuses spawning
   processes, opening files for writing or creating, deleting or renaming files, sockets, ctypes
   and signals to other processes. The hook is a second line, not a sandbox: Python code that
   ran inside a worker could still forge that worker's own replies or create an empty FIFO.

Deadlines: a math or task call returns within its `timeout` (waiting for a worker included) plus
the in-process screening, which the `MAX_ANSWER_CHARS` cap and linear-time extraction keep to
milliseconds. A check that misses the deadline counts as wrong; its worker is killed and a fresh
fork (milliseconds, every task loaded so far included) replaces it in the background. Not charged
to a call: the pool's start (one interpreter importing sympy, math-verify and reasoning-gym, up to
`STARTUP_TIMEOUT`) and loading a reasoning-gym task's scorer, once in the zygote for all later
workers and once in each worker forked before that.
This works from any thread or subprocess, unlike math-verify's own signal-based timeout, which is
disabled here.

We keep this small pool rather than a maintained one: `concurrent.futures` cannot kill a task
that overruns, and `pebble` (which can) starts workers through multiprocessing, which either forks
the caller (unsafe in a trainer holding CUDA and threads) or, with spawn/forkserver, re-imports
the caller's `__main__` in every worker and every replacement, and starts each as a new
interpreter (seconds for sympy; a fork of our zygote takes milliseconds).
"""

from __future__ import annotations

import ast
import atexit
import collections
import contextlib
import ctypes
import json
import logging
import math
import multiprocessing.util
import os
import re
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unicodedata
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from traac.errors import TraacError
from traac.method.items import Item

_T = TypeVar("_T")

DEFAULT_TIMEOUT = 5.0  # seconds one math or task check may take before it counts as wrong
STARTUP_TIMEOUT = 120.0  # seconds the zygote may take to import its libraries or load a task
MAX_ANSWER_CHARS = 1 << 16  # a longer final answer (text after the closer) is wrong unread
_MEMORY_LIMIT = 4 << 30  # bytes of address space per worker
_MAX_LINE = 1 << 24  # longest reply a worker may send

# ---------------------------------------------------------------------------------------------
# Answer extraction


def answer_text(response: str, think_close: str = "</think>") -> str | None:
    """The text after the last think closer, or None when the think block never closed."""
    cut = response.rfind(think_close)
    return None if cut < 0 else response[cut + len(think_close) :]


def _final_text(response: str, think_close: str) -> str | None:
    """`answer_text`, or None when it is longer than `MAX_ANSWER_CHARS`: the cap comes before any
    screening, so no answer costs more than that much string work."""
    text = answer_text(response, think_close)
    return None if text is None or len(text) > MAX_ANSWER_CHARS else text


_BOX_RE = re.compile(r"\\(?:boxed|fbox)\s*\{")
_BOX_SEPARATOR = re.compile(r"\b(?:and|or)\b|,|;")


def _complete_boxes(text: str) -> list[tuple[int, int, int]]:
    """(command start, content start, content end) of every closed box, in order.

    One pass over the text pairs every brace, so degenerate outputs ("\\boxed{" repeated
    thousands of times) cost linear time.
    """
    starts = [(m.start(), m.end()) for m in _BOX_RE.finditer(text)]
    if not starts:
        return []
    closing: dict[int, int] = {}  # position after an opening brace -> position of its closer
    open_at: list[int] = []
    for i, char in enumerate(text):
        if char in "{}" and i > 0 and text[i - 1] == "\\":
            continue  # an escaped, literal brace
        if char == "{":
            open_at.append(i + 1)
        elif char == "}" and open_at:
            closing[open_at.pop()] = i
    return [(command, start, closing[start]) for command, start in starts if start in closing]


def last_boxed(text: str) -> str | None:
    """Content of the last complete `\\boxed{...}` (or `\\fbox{...}`), nested braces handled."""
    boxes = _complete_boxes(text)
    return text[boxes[-1][1] : boxes[-1][2]] if boxes else None


def boxed_answers(text: str) -> list[str]:
    """The final answer's boxes, in order: the last complete box and those before it that
    math-verify (latex2sympy2's `extract_boxed_content`) reads with it as one list. A box joins
    when under 10 characters separate it from the next, or under 70 that hold "and", "or", ","
    or ";" and its content differs: `\\boxed{2} and \\boxed{3}` is [2, 3]."""
    boxes = _complete_boxes(text)
    if not boxes:
        return []
    chain = [boxes[-1]]
    for box in reversed(boxes[:-1]):
        later = chain[-1]
        if box[2] >= later[0]:  # encloses the later box
            break
        between = text[box[2] + 1 : later[0]]
        differs = text[box[1] : box[2]].strip() != text[later[1] : later[2]].strip()
        if len(between) >= 10 and not (
            differs and len(between) < 70 and _BOX_SEPARATOR.search(between)
        ):
            break
        chain.append(box)
    return [text[start:end].strip() for _, start, end in reversed(chain)]


def _last_line(text: str) -> str:
    """The last non-empty line. Lines end at `\\n` only: `str.splitlines` also cuts at U+2028 and
    form feeds, which would make `12\\u2028(checked)` read as "(checked)"."""
    lines = [line.strip() for line in text.split("\n") if line.strip()]
    return lines[-1] if lines else ""


def extract_answer(response: str, think_close: str = "</think>") -> str | None:
    """The final answer: the boxes after the last closer (several joined by ", "), else its last
    non-empty line.

    None when the response has no closer (the rollout never finished thinking) or the text after
    it is longer than `MAX_ANSWER_CHARS`; "" when nothing follows the closer.
    """
    text = _final_text(response, think_close)
    if text is None:
        return None
    boxes = boxed_answers(text)
    return ", ".join(boxes) if boxes else _last_line(text)


# ---------------------------------------------------------------------------------------------
# Screening

_CODE_PATTERNS = re.compile(
    r"__|\bimport\b|\blambda\b|\b(?:os|sys|subprocess|shutil|pathlib|builtins|io)\s*\."
    r"|\b(?:exec|eval|compile|open|getattr|setattr|delattr|globals|locals|vars|breakpoint|input"
    r"|help|exit|quit|system|popen|lambdify|sympify|parse_expr)\s*\("
    r"|[A-Za-z_)\]'\"]\.[A-Za-z_]\w*\s*\(",  # method calls: x.y(
    re.IGNORECASE,
)


def looks_like_code(text: str) -> bool:
    """True for text with Python syntax that no math answer needs (after NFKC normalisation,
    the folding Python applies to identifiers). Not a security layer, which the allow-lists and
    the workers are: it keeps code-shaped junk from scoring as a math answer."""
    return bool(_CODE_PATTERNS.search(unicodedata.normalize("NFKC", text)))


# The allow-lists of the tasks whose scorers evaluate answers

_MAX_EXPONENT = 1000  # largest constant in an exponent: no 9**9**9-style work for sympy
_SYMPY_CHARS = re.compile(r"[A-Za-z0-9_ .+\-*/(),]+")  # ASCII only: no lookalikes, no quotes
_ARITHMETIC_OPS = (ast.Add, ast.Sub, ast.Mult, ast.Div)
_INTEGRATION_FUNCTIONS = frozenset(
    {"sin", "cos", "tan", "cot", "sec", "csc", "asin", "acos", "atan", "acot", "exp", "log"}
    | {"sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "ln", "sqrt", "Abs"}
)


def _parse(text: str) -> ast.Expression | None:
    """Python's syntax tree of `text` (never evaluated), or None. (Leading blanks, which `eval`
    would drop, make `ast.parse` fail: such text is refused, never read differently.)"""
    try:
        return ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # MemoryError: parser depth
        return None


def _is_expression(
    text: str, names: frozenset[str], functions: frozenset[str] = frozenset(), power: bool = True
) -> bool:
    """True for arithmetic over int/float numbers and `names`: + - * / (and ** when `power`, not
    nested inside an exponent, whose numbers are at most `_MAX_EXPONENT`), unary signs,
    parentheses and calls of `functions` by name with positional arguments. What sympy's
    `parse_expr` runs for such text is that arithmetic on sympy numbers and symbols."""
    tree = _parse(text) if _SYMPY_CHARS.fullmatch(text) else None
    if tree is None:
        return False
    stack: list[tuple[ast.AST, bool]] = [(tree.body, False)]  # (node, inside an exponent)
    while stack:  # iterative: a long sum is a deep tree
        node, exponent = stack.pop()
        if isinstance(node, ast.Constant):
            if type(node.value) not in (int, float) or (
                exponent and abs(node.value) > _MAX_EXPONENT
            ):
                return False
        elif isinstance(node, ast.Name):
            if node.id not in names:
                return False
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            stack.append((node.operand, exponent))
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            if not power or exponent:
                return False
            stack += [(node.left, False), (node.right, True)]
        elif isinstance(node, ast.BinOp) and isinstance(node.op, _ARITHMETIC_OPS):
            stack += [(node.left, exponent), (node.right, exponent)]
        elif isinstance(node, ast.Call):
            if not (
                isinstance(node.func, ast.Name)
                and node.func.id in functions
                and node.args
                and not node.keywords
            ):
                return False
            stack += [(arg, exponent) for arg in node.args]  # a Starred arg fails when popped
        else:
            return False
    return True


def is_plain_arithmetic(text: str) -> bool:
    """True when `text` is only numbers, + - * / and parentheses (read from Python's syntax tree,
    never evaluated). Guards scorers that feed answers to sympy's `parse_expr`."""
    return bool(re.fullmatch(r"[\d\s+\-*/().]+", text)) and _is_expression(
        text.strip(), frozenset(), power=False
    )


def _is_literal(text: str, leaf: type, depth: int) -> bool:
    """True for a Python literal of `leaf` values (ints may carry a minus) in lists or tuples
    nested at most `depth` deep: what a scorer that `eval`s a list answer needs."""
    tree = _parse(text)
    if tree is None:
        return False
    stack: list[tuple[ast.AST, int]] = [(tree.body, 0)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, (ast.List, ast.Tuple)) and level < depth:
            stack += [(element, level + 1) for element in node.elts]
            continue
        if leaf is int and isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            node = node.operand
        if not (isinstance(node, ast.Constant) and type(node.value) is leaf):
            return False
    return True


def _names(metadata: dict[str, Any], *keys: str) -> frozenset[str]:
    """Variable names an entry declares (identifiers only)."""
    found: set[str] = set()
    for key in keys:
        value = metadata.get(key)
        for name in [value] if isinstance(value, str) else (value or []):
            if isinstance(name, str) and re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", name):
                found.add(name)
    return frozenset(found)


def _plain_or_literal(plain: str, leaf: type, depth: int) -> Callable[[str, dict[str, Any]], bool]:
    """The oracle's own form (letters, digits, blanks: `eval` can only fail on it, or look up a
    bare name), or a literal the scorer's `eval` may read for partial credit."""
    pattern = re.compile(plain)
    return lambda text, _: bool(pattern.fullmatch(text)) or _is_literal(text, leaf, depth)


# The reasoning-gym tasks (0.1.19) whose scorers `eval` or `parse_expr` the answer, with the
# answers each may receive. tests/method/test_verify.py rescans reasoning-gym's sources for new
# ones.
EVALUATING_TASKS: dict[str, Callable[[str, dict[str, Any]], bool]] = {
    # eval(answer) for partial credit; exact matches of the oracle need no eval
    "string_insertion": _plain_or_literal(r"[A-Z]+", str, 1),  # "".join(eval(answer))
    "spiral_matrix": _plain_or_literal(r"-?\d+(?: -?\d+)*", int, 1),
    "binary_matrix": _plain_or_literal(r"\d+(?:[ \n]\d+)*", int, 2),
    "n_queens": _plain_or_literal(r"[Q_](?:[ \n][Q_])*", str, 2),
    # sympy parse_expr(answer)
    "puzzle24": lambda text, _: is_plain_arithmetic(text),
    "countdown": lambda text, _: is_plain_arithmetic(text),
    "polynomial_multiplication": lambda text, meta: _is_expression(text, _names(meta, "variables")),
    "simple_integration": lambda text, meta: _is_expression(text, _names(meta, "variable") | {"C"}),
    "intermediate_integration": lambda text, meta: _is_expression(
        text, _names(meta, "variable") | {"C", "E", "pi"}, _INTEGRATION_FUNCTIONS
    ),
}


def task_answer_allowed(name: str, candidate: str, metadata: dict[str, Any] | None = None) -> bool:
    """May `candidate` reach task `name`'s scorer? Always for tasks whose scorer only compares or
    parses data; for `EVALUATING_TASKS` only when it passes the task's allow-list."""
    check = EVALUATING_TASKS.get(name)
    return check is None or check(candidate, metadata or {})


# ---------------------------------------------------------------------------------------------
# Normalisation shared by the choice, text and task verifiers

_LATEX_WORDS = {
    "leftrightarrow": "↔",
    "Leftrightarrow": "↔",
    "longleftrightarrow": "↔",
    "iff": "↔",
    "rightarrow": "→",
    "Rightarrow": "→",
    "longrightarrow": "→",
    "implies": "→",
    "to": "→",
    "lor": "∨",
    "vee": "∨",
    "land": "∧",
    "wedge": "∧",
    "neg": "¬",
    "lnot": "¬",
    "times": "*",
    "cdot": "*",
    "div": "/",
    "degree": "°",
    "quad": " ",
    "qquad": " ",
    "left": "",
    "right": "",
}
_LATEX_WORD_RE = re.compile(
    r"\\(" + "|".join(sorted(_LATEX_WORDS, key=len, reverse=True)) + r")(?![A-Za-z])"
)
_LATEX_WRAPPER_RE = re.compile(
    r"\\(?:text|textbf|textit|texttt|textrm|mathrm|mathbf|mathit|mathtt|operatorname|emph)\s*\{([^{}]*)\}"
)
# Markdown bold "**", not Python's power operator between two operands (x**2, (x+1)**-1)
_BOLD_RE = re.compile(r"(?<![\w)\]])\*\*|\*\*(?![\w(+\-])")
_ANSWER_PREFIX_RE = re.compile(
    r"^(?:the\s+)?(?:final\s+)?(?:answer|conclusion|result)\b\s*(?:is)?\s*[:=]?\s*", re.IGNORECASE
)


def clean_answer(text: str) -> str:
    """LaTeX and markdown dressing removed: `$`, `\\text{}`, `\\to`, `\\#`, bold `**` (not a power),
    "Answer:", a final period. Keeps the content a scorer compares."""
    s = text.strip()
    for _ in range(3):  # nested wrappers such as \text{\textbf{C}}
        s = _LATEX_WRAPPER_RE.sub(r"\1", s)
    s = _LATEX_WORD_RE.sub(lambda m: _LATEX_WORDS[m.group(1)], s)
    s = re.sub(r"\^\s*\{?\\circ\}?", "°", s)
    s = re.sub(r"\\([#%&_{}$ ])", r"\1", s)
    s = re.sub(r"\\[,;:! ]", " ", s)
    if s[:2] in ("\\(", "\\[") and s[-2:] in ("\\)", "\\]"):
        s = s[2:-2]
    s = _BOLD_RE.sub("", s).replace("`", "")
    s = s.strip().strip("$").strip()
    s = _ANSWER_PREFIX_RE.sub("", s)
    if s.endswith("."):
        s = s[:-1]
    return s.strip()


# ---------------------------------------------------------------------------------------------
# Multiple choice and free text (pure string work, in process)

_CHOICE_ALONE = re.compile(r"\(?([A-Za-z])\)?[.:]?")
_CHOICE_LEAD = re.compile(r"\(?([A-Z])[).:]\s")
_CHOICE_WORD = re.compile(r"\b(?:option|choice)\s*\(?([A-Z])\)?(?![A-Za-z])", re.IGNORECASE)
_CHOICE_PHRASE = re.compile(
    r"(?i:answer\s*(?:is\b|:))[\s:*$]*(?:(?i:option)[\s*$]*)?\(?([A-Z])\)?(?![A-Za-z])"
)
# At the picked letter: "or", "and", ",", "/" or "&" and a second letter ("B or C", "(A) or (B)",
# "A, B"). A second "A" or "I" before a lower-case word is English ("C, and I am sure").
_HEDGE = re.compile(
    r"[A-Za-z]\)?\s*(?:,\s*(?:or\b|and\b)?|\bor\b|\band\b|/|&)\s*"
    r"\(?(?:[B-HJ-Z]|[AI](?!\s+[a-z]))\)?(?![A-Za-z])"
)


def _picked(m: re.Match[str] | None, text: str) -> str | None:
    """The letter `m` picked, unless a hedge follows it."""
    if m is None or _HEDGE.match(text, m.start(1)):
        return None
    return m.group(1).upper()


def _letter_of(candidate: str) -> str | None:
    s = clean_answer(candidate)
    m = _CHOICE_ALONE.fullmatch(s) or _CHOICE_LEAD.match(s + " ") or _CHOICE_WORD.search(s)
    return _picked(m, s + " ")


def extract_choice(text: str) -> str | None:
    """The option letter an answer text picks, or None (no letter, or a hedge between two)."""
    boxes = boxed_answers(text)
    if boxes:
        letters = {_letter_of(box) for box in boxes} - {None}
        return letters.pop() if len(letters) == 1 else None
    phrases = list(_CHOICE_PHRASE.finditer(text))
    if phrases:
        return _picked(phrases[-1], text)
    return _letter_of(_last_line(text))


def verify_choice(response: str, gold_letter: str, think_close: str = "</think>", **_: Any) -> bool:
    """Does the response pick option `gold_letter` ("C" or "(C)")?"""
    gold = _letter_of(gold_letter)
    if gold is None:
        raise TraacError(f"verify_choice: gold answer {gold_letter!r} is not an option letter")
    text = _final_text(response, think_close)
    return text is not None and extract_choice(text) == gold


def normalize_text(text: str) -> str:
    """Lower-case, dressing removed, ", " -> ",", outer quotes dropped: the form BBEH compares."""
    s = clean_answer(text).lower()
    s = re.sub(r"\s+", " ", s).replace(", ", ",")
    return s.strip().strip("\"'").strip()


def text_match(prediction: str, gold: str) -> bool:
    """Normalised string match with the tolerances BBEH's own scorer allows: "(a)" vs "a",
    equal numbers, stray quotes, a [bracketed] form, a trailing question mark."""
    pred, ref = normalize_text(prediction), normalize_text(gold)
    if pred == ref:
        return True
    for a, b in ((pred, ref), (ref, pred)):
        if re.fullmatch(r"\(.\)", a):
            return a[1] == b
    try:
        if float(pred) == float(ref):
            return True
    except ValueError:
        pass
    return (
        pred.replace("'", "") == ref.replace("'", "")
        or pred in (f"[{ref}]", f"{ref}?")
        or ref == f"[{pred}]"
    )


def extract_text(text: str) -> str:
    """A free-text answer: the boxes (several joined by ", "), else what follows the last "answer
    is" on its line, else the last line."""
    boxes = boxed_answers(text)
    if boxes:
        return ", ".join(boxes)
    phrases = list(re.finditer(r"answer\s*(?:is|:)\s*:?", text, re.IGNORECASE))
    if phrases:
        rest = text[phrases[-1].end() :].strip()
        if rest:
            return rest.split("\n", 1)[0]
    return _last_line(text)


def verify_text(response: str, gold: str, think_close: str = "</think>", **_: Any) -> bool:
    """Does the response's final answer match `gold` as a normalised string (BBEH-style)?"""
    text = _final_text(response, think_close)
    return text is not None and text_match(extract_text(text), gold)


# ---------------------------------------------------------------------------------------------
# Task answers: the shape each reasoning-gym scorer reads

_NUMBER = r"-?\d+(?:\.\d+)?"
_AB_RUN = re.compile(r"(?:[AB]#|#[AB])(?:\s+(?:[AB]#|#[AB]))*")
_KNIGHT_MOVE = re.compile(r"([wB])\s*,\s*([A-Z]\d+)\s*,\s*([A-Z]\d+)")
_FORMULA = re.compile(r"(?:[\s¬∧∨→↔()]|(?<![A-Za-z])[A-Z](?![A-Za-z]))+")
_LOCK_SEQ = re.compile(r"(?<![A-Za-z])[A-C](?:\s*(?:[→,]\s*)?[A-C](?![A-Za-z0-9]))*(?![A-Za-z0-9])")


def _last(pattern: str | re.Pattern[str], text: str) -> re.Match[str] | None:
    matches = list(re.finditer(pattern, text))
    return matches[-1] if matches else None


def _ab(line: str, full: str, meta: dict[str, Any]) -> str:
    m = _last(_AB_RUN, line)
    if m:
        return " ".join(m.group(0).split())
    return "" if line.lower().strip("() ") in ("", "nothing", "empty", "none") else line


def _geometry(line: str, full: str, meta: dict[str, Any]) -> str:
    if meta.get("task_type") == "orthocenter":
        m = _last(rf"\(\s*({_NUMBER})\s*,\s*({_NUMBER})\s*\)", line) or _last(
            rf"(?<![\d.])({_NUMBER})\s*,\s*({_NUMBER})", line
        )
        return f"({m.group(1)}, {m.group(2)})" if m else line
    m = _last(_NUMBER, line)
    return m.group(0) if m else line


def _knight_swap(line: str, full: str, meta: dict[str, Any]) -> str:
    def moves(text: str) -> str | None:
        found = _KNIGHT_MOVE.findall(text)
        return json.dumps([",".join(move) for move in found]) if found else None

    if "[" in line or _KNIGHT_MOVE.search(line):
        return moves(line) or line
    if re.search(r"^\W*no\b|\bimpossible\b|\bnot possible\b", line, re.IGNORECASE):
        return "No"
    block = _last(r"\[[^\[\]]*\]", full)
    return (moves(block.group(0)) if block else None) or line


def _tsumego(line: str, full: str, meta: dict[str, Any]) -> str:
    m = _last(r"\b([A-Za-z])(\d{1,2})\b", line)
    return f"{m.group(1).upper()}{m.group(2)}" if m else line


def _fraction(line: str, full: str, meta: dict[str, Any]) -> str:
    m = _last(r"\\[dt]?frac\s*\{\s*(\d+)\s*\}\s*\{\s*(\d+)\s*\}|(?<!\d)(\d+)\s*/\s*(\d+)", line)
    if not m:
        return line
    num, den = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
    return f"{num}/{den}"


def _propositional(line: str, full: str, meta: dict[str, Any]) -> str:
    s = line
    for ascii_op, symbol in (("<->", "↔"), ("<=>", "↔"), ("->", "→"), ("=>", "→"), ("&&", "∧")):
        s = s.replace(ascii_op, symbol)
    for ascii_op, symbol in (("||", "∨"), ("&", "∧"), ("|", "∨"), ("~", "¬"), ("!", "¬")):
        s = s.replace(ascii_op, symbol)
    formulas = [m.group(0).strip() for m in _FORMULA.finditer(s) if re.search("[A-Z]", m.group(0))]
    return formulas[-1] if formulas else s


def _bitwise(line: str, full: str, meta: dict[str, Any]) -> str:
    m = _last(r"-?0x[0-9a-fA-F]+", line) or _last(r"(?<![\w.])-?\d+(?![\w.])", line)
    return m.group(0) if m else line


def _integer(line: str, full: str, meta: dict[str, Any]) -> str:
    m = _last(r"(?<![\w.])-?\d+(?![\w.])", line)
    return m.group(0) if m else line


def _arithmetic(line: str, full: str, meta: dict[str, Any]) -> str:
    s = line.replace("×", "*").replace("÷", "/").replace("−", "-")
    if "=" in s:  # "8*(10-8)+8 = 24" or "24 = 8*(10-8)+8": the side that computes
        sides = [side.strip() for side in s.split("=")]
        s = next((side for side in sides if re.search(r"\d[\s)]*[+\-*/]", side)), sides[0])
    runs = [m.group(0) for m in re.finditer(r"[\d\s+\-*/().]+", s)]
    expr = next((run for run in reversed(runs) if re.search(r"\d", run)), "")
    # "(" or "." dangling at the ends; the tail is cut on the reversed text, as an unanchored
    # `[...]+$` retries from every position of a long run (minutes for 64K of " +")
    expr = re.sub(r"^[\s)+*/.]+", "", expr)
    expr = expr[: len(expr) - re.match(r"[\s(+\-*/.]*", expr[::-1]).end()]
    return expr if is_plain_arithmetic(expr) else ""


def _puzzle24(line: str, full: str, meta: dict[str, Any]) -> str:
    """Arithmetic over exactly the puzzle's numbers: reasoning-gym's scorer checks only that four
    numbers in range make 24, which any fixed expression passes for every puzzle."""
    expr = _arithmetic(line, full, meta)
    given = meta.get("numbers")
    if given is not None and sorted(map(int, re.findall(r"\d+", expr))) != sorted(map(int, given)):
        return ""
    return expr


def _quantum_lock(line: str, full: str, meta: dict[str, Any]) -> str:
    m = _last(_LOCK_SEQ, line.replace("->", "→").replace("⟶", "→"))
    return m.group(0).strip() if m else line


_TASK_EXTRACTORS = {
    "ab": _ab,
    "advanced_geometry": _geometry,
    "knight_swap": _knight_swap,
    "tsumego": _tsumego,
    "fraction_simplification": _fraction,
    "propositional_logic": _propositional,
    "bitwise_arithmetic": _bitwise,
    "letter_counting": _integer,
    "maze": _integer,
    "puzzle24": _puzzle24,
    "countdown": _arithmetic,  # also parse_expr-scored: arithmetic only
    "quantum_lock": _quantum_lock,
}


def task_answer(text: str, name: str, metadata: dict[str, Any] | None = None) -> str:
    """The candidate a reasoning-gym scorer gets from an answer text (the text after the closer).

    The boxes (several joined by ", "; else the last line) are cleaned of LaTeX and markdown,
    then tasks with a fixed answer shape take the last thing of that shape from them;
    knight_swap may also take its move list from a multi-line answer. Other tasks get the
    cleaned boxes or line as they are.
    """
    boxes = boxed_answers(text)
    source = ", ".join(boxes) if boxes else text
    line = clean_answer(" ".join(source.split()) if boxes else _last_line(source))
    extractor = _TASK_EXTRACTORS.get(name)
    return extractor(line, clean_answer(source), metadata or {}) if extractor else line


# ---------------------------------------------------------------------------------------------
# The worker sandbox

_REFUSED_EVENTS = frozenset(
    {
        "subprocess.Popen",
        "os.system",
        "os.fork",
        "os.forkpty",
        "os.remove",
        "os.rename",
        "os.rmdir",
        "os.mkdir",
        "os.link",
        "os.symlink",
        "os.truncate",
        "os.chmod",
        "os.chown",
        "os.chflags",
        "os.utime",
        "os.setxattr",
        "os.removexattr",
        "os.kill",
        "os.killpg",
        "signal.pthread_kill",
        "resource.setrlimit",
        "resource.prlimit",
        "shutil.rmtree",
        "tempfile.mkstemp",
        "tempfile.mkdtemp",
        "webbrowser.open",
    }
)
# os.exec*, os.spawn*, os.posix_spawn*, sockets, ctypes (loading, calls, raw memory), sqlite
_REFUSED_PREFIXES = ("os.exec", "os.spawn", "os.posix_spawn", "socket.", "ctypes.", "sqlite3.")
# Modules whose (re-)import would bring back a spawner the guard took away, or that write files
# without Python's `open`: `_posixsubprocess.fork_exec` starts processes with no audit event.
_REFUSED_IMPORTS = frozenset({"_posixsubprocess", "_sqlite3", "_dbm", "_gdbm"})
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def install_guard() -> None:
    """Refuse, from now on in this process, what a verification worker never needs: starting
    processes, opening files to write or create, changing the file system, sockets, ctypes,
    signals to other processes and raising its limits (each raises PermissionError).

    Installed in a worker after its libraries are imported and warmed up, so their lazy imports
    have happened; the checks themselves only read. The hook takes everything it uses as
    defaults, and refuses the attribute writes that could replace its code or defaults.
    """

    def guard(
        event: str,
        args: tuple[Any, ...],
        refused: frozenset[str] = _REFUSED_EVENTS,
        prefixes: tuple[str, ...] = _REFUSED_PREFIXES,
        imports: frozenset[str] = _REFUSED_IMPORTS,
        write_flags: int = _WRITE_FLAGS,
        write_modes: frozenset[str] = frozenset("wax+"),
        function_attrs: frozenset[str] = frozenset({"__code__", "__defaults__", "__kwdefaults__"}),
        error: type[Exception] = PermissionError,
        string: type = str,
        integer: type = int,
        is_instance: Callable[[Any, Any], bool] = isinstance,
    ) -> None:
        if event in refused or event.startswith(prefixes):
            raise error(f"refused in a verification worker: {event}")
        if event == "open":
            _, mode, flags = args
            if (is_instance(flags, integer) and flags & write_flags) or (
                is_instance(mode, string) and not write_modes.isdisjoint(mode)
            ):
                raise error("refused in a verification worker: open for writing")
        elif event == "import" and args[0] in imports:
            raise error(f"refused in a verification worker: import {args[0]}")
        elif event == "object.__setattr__" and args[1] in function_attrs:
            raise error("refused in a verification worker: replacing a function's code")

    fork_exec = getattr(sys.modules.get("_posixsubprocess"), "fork_exec", None)
    for module in list(sys.modules.values()):  # also `from _posixsubprocess import fork_exec`
        for attr, value in list(getattr(module, "__dict__", {}).items()):
            if fork_exec is not None and value is fork_exec:
                setattr(module, attr, _refuse_spawn)
    sys.addaudithook(guard)


def _refuse_spawn(*_: Any) -> None:
    raise PermissionError("refused in a verification worker: _posixsubprocess.fork_exec")


def _limit_resources() -> None:
    """No file-size allowance (a write past 0 bytes fails, not kills), no core dumps, a memory
    cap; the zygote sets them and every worker inherits them."""
    with contextlib.suppress(ValueError, OSError):  # limits already lower
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_AS, (_MEMORY_LIMIT, _MEMORY_LIMIT))


def _die_with_parent() -> None:
    """Linux: the kernel kills this worker when its zygote dies. (Not for the zygote: the signal
    follows the forking *thread*, and the pool may be started from a short-lived one; the zygote
    leaves when its socket closes.)"""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class _Checker:
    """What a worker runs: math-verify and the reasoning-gym scorers the zygote loaded."""

    def __init__(self) -> None:
        logging.disable(logging.WARNING)  # math-verify warns that its own timeout is off
        # The parsers are imported here, in the zygote, never by the process that verifies
        # through the pool: they load in the process whose guard then contains them.
        import reasoning_gym
        import sympy
        from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

        self._reasoning_gym = reasoning_gym
        self._parse, self._verify = parse, verify
        self._extraction = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]
        self.scorers: dict[str, Any] = {}
        # Warm-up before any guard: the LaTeX grammar, parse_expr, differentiation and
        # simplification import and build what they need on first use.
        self.math("\\boxed{1}", "\\boxed{1}")
        self.math("\\boxed{\\frac{1}{2}, 3}", "1+2*3")
        x = sympy.Symbol("x")
        expr = sympy.parse_expr("-4*(-2*x - 8)**(3/2)/3 + exp(x)*sin(x)", local_dict={"x": x})
        sympy.simplify(sympy.diff(expr, x) - expr)

    def math(self, gold_text: str, pred_text: str) -> bool:
        gold = self._parse(gold_text, extraction_config=self._extraction, parsing_timeout=None)
        pred = self._parse(pred_text, extraction_config=self._extraction, parsing_timeout=None)
        return bool(gold and pred and self._verify(gold, pred, timeout_seconds=None))

    def load(self, name: str) -> None:
        if name not in self.scorers:
            self.scorers[name] = self._reasoning_gym.get_score_answer_fn(name)

    def handle(self, request: dict[str, Any]) -> Any:
        op = request["op"]
        if op == "load":  # a task the zygote loaded after this worker was forked
            self.load(request["task"])
            return True
        try:  # a scorer that chokes on an answer has judged it wrong
            if op == "math":
                return self.math(request["gold"], request["pred"])
            if op == "task":
                return float(self.scorers[request["task"]](request["answer"], request["entry"]))
        except Exception:
            return 0.0 if op == "task" else False
        raise ValueError(f"unknown op {op!r}")


def _serve(checker: _Checker, requests_fd: int, replies_fd: int) -> None:
    """A worker, just forked from the zygote: guard, then one JSON reply per request line.
    Never returns: the zygote's loop must not run on in a copy of it."""
    try:
        requests = os.fdopen(requests_fd, "r", encoding="utf-8")
        replies = os.fdopen(replies_fd, "w", encoding="utf-8")
        _die_with_parent()
        install_guard()
        replies.write('{"ok": true, "value": "ready"}\n')
        replies.flush()
        for line in requests:
            try:
                reply = {"ok": True, "value": checker.handle(json.loads(line))}
            except Exception as exc:
                reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
            replies.write(json.dumps(reply) + "\n")
            replies.flush()
    finally:
        os._exit(0)


_ZYGOTE_BOOT = "from traac.method.verify import _zygote_main; _zygote_main()"


def _zygote_main() -> None:
    """The zygote: imports and warms up once, then, one datagram per command on its socket (fd 0),
    forks workers (handing each the two pipe ends that came with the command), loads a
    reasoning-gym task's scorer for all later workers, or kills and reaps a worker."""
    _limit_resources()
    checker = _Checker()
    channel = socket.socket(fileno=0)
    channel.send(b'{"ok": true}')
    while True:
        data, fds, _, _ = socket.recv_fds(channel, 1 << 16, 2)
        if not data:  # the pool is gone
            return
        request = json.loads(data)
        reply: dict[str, Any] = {"ok": True}
        try:
            if request["op"] == "fork":
                pid = os.fork()
                if pid == 0:
                    channel.close()
                    _serve(checker, *fds)
                reply["pid"], reply["tasks"] = pid, sorted(checker.scorers)
            elif request["op"] == "load":
                checker.load(request["task"])
            elif request["op"] == "kill":
                os.kill(request["pid"], signal.SIGKILL)
                os.waitpid(request["pid"], 0)
        except Exception as exc:
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        finally:
            for fd in fds:
                os.close(fd)
        channel.send(json.dumps(reply).encode())


# ---------------------------------------------------------------------------------------------
# The worker pool


def _readable(fd: int, timeout: float) -> bool:
    """Does `fd` have data or end-of-file within `timeout` seconds? (poll, not select: a
    trainer's descriptors may number past select's 1024.)"""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(max(0, math.ceil(timeout * 1000))))


class _Worker:
    """The pool's end of one worker: a request pipe, a reply pipe, and the tasks it can score."""

    def __init__(self, pid: int, requests_fd: int, replies_fd: int, tasks: frozenset[str]) -> None:
        self.pid = pid
        self.tasks = tasks
        self._requests = os.fdopen(requests_fd, "wb")
        self._replies = replies_fd
        self._buffer = b""
        self._closed = False

    def request(self, message: dict[str, Any], timeout: float) -> dict[str, Any] | None:
        """Send one request; its reply, or None when the deadline passed or the worker died."""
        try:
            self._requests.write(json.dumps(message).encode() + b"\n")
            self._requests.flush()
        except (OSError, ValueError):  # a dead worker, or a pool closed under the call
            return None
        return self.read_reply(time.monotonic() + timeout)

    def read_reply(self, deadline: float) -> dict[str, Any] | None:
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or len(self._buffer) > _MAX_LINE:
                return None
            try:
                if not _readable(self._replies, remaining):
                    continue
                chunk = os.read(self._replies, 1 << 16)
            except (OSError, ValueError):  # closed under the call: the pool is closing
                return None
            if not chunk:  # the worker died
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            return json.loads(line)
        except ValueError:
            return None

    def idle(self) -> bool:
        """Alive and silent, as a worker between requests is (a dead one reads as end-of-file)."""
        return not self._buffer and not _readable(self._replies, 0)

    def close(self) -> None:
        """Once only: a second `os.close` could hit a descriptor number reused meanwhile."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError):  # flushing to a dead worker: nothing left to say
            self._requests.close()
        os.close(self._replies)


class _Zygote:
    """The pool's end of the zygote process: a datagram socket that also carries pipe ends."""

    def __init__(self, workdir: str) -> None:
        package_root = str(Path(__file__).resolve().parents[1])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        env.update(PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _ZYGOTE_BOOT],
            stdin=theirs,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=workdir,
            env=env,
            start_new_session=True,  # a Ctrl-C aimed at the parent does not hit the workers
        )
        theirs.close()
        self._channel = ours
        self._lock = threading.Lock()
        try:
            self._receive(STARTUP_TIMEOUT)
        except TraacError:
            self.close()
            raise TraacError(
                f"verification workers did not start within {STARTUP_TIMEOUT:.0f} s; check that "
                f"`{sys.executable} -c 'import math_verify, reasoning_gym'` works"
            ) from None

    def _receive(self, timeout: float) -> dict[str, Any]:
        self._channel.settimeout(timeout)
        try:
            data = self._channel.recv(1 << 16)
        except OSError:
            data = b""
        if not data:
            raise TraacError("the verification zygote died or stopped answering")
        return json.loads(data)

    def command(self, message: dict[str, Any], fds: Sequence[int] = ()) -> dict[str, Any]:
        """One command and its reply (TraacError when the zygote is gone)."""
        with self._lock:
            try:
                socket.send_fds(self._channel, [json.dumps(message).encode()], list(fds))
            except OSError:
                raise TraacError("the verification zygote died") from None
            return self._receive(STARTUP_TIMEOUT)

    def fork(self) -> _Worker:
        """A new worker, guarded and ready (milliseconds)."""
        requests_read, requests_write = os.pipe()
        replies_read, replies_write = os.pipe()
        try:
            reply = self.command({"op": "fork"}, [requests_read, replies_write])
        except TraacError:
            for fd in (requests_write, replies_read):
                os.close(fd)
            raise
        finally:
            os.close(requests_read)
            os.close(replies_write)
        if not reply["ok"]:
            for fd in (requests_write, replies_read):
                os.close(fd)
            raise TraacError(f"cannot fork a verification worker: {reply['error']}")
        worker = _Worker(reply["pid"], requests_write, replies_read, frozenset(reply["tasks"]))
        ready = worker.read_reply(time.monotonic() + STARTUP_TIMEOUT)
        if ready is None:
            self.kill(worker)
            raise TraacError("a verification worker died while installing its guard")
        return worker

    def kill(self, worker: _Worker) -> None:
        """Kill and reap `worker` (its pid stays reserved until the zygote reaps it)."""
        worker.close()
        self.command({"op": "kill", "pid": worker.pid})

    def close(self) -> None:
        """Kill the zygote and every worker (one process group)."""
        with contextlib.suppress(OSError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self._channel.close()


@dataclass
class _Waiter:
    """A call waiting for a worker; `_release` fills `worker` and sets `ready`."""

    ready: threading.Event = field(default_factory=threading.Event)
    worker: _Worker | None = None


class VerifierPool:
    """Workers forked from one zygote, a hard deadline per call; any thread may call it.

    A call that misses its deadline (waiting for a worker included) returns None; its worker is
    killed and replaced in the background by a fork that has every task loaded so far. A task's
    first use loads its scorer in the zygote, and a worker forked before that loads it the first
    time it meets the task; neither is charged to the call.
    """

    def __init__(self, workers: int) -> None:
        if workers < 1:
            raise TraacError(f"verifier pool: workers must be >= 1, got {workers}")
        self.workers = workers
        self.pid = os.getpid()
        self._workdir = tempfile.mkdtemp(prefix="traac-verify-")
        self._lock = threading.Lock()
        self._load_lock = threading.Lock()  # held while the zygote loads a task (seconds)
        self._zygote_lock = threading.Lock()  # held while a dead zygote is replaced
        self._live: set[_Worker] = set()
        self._free: list[_Worker] = []  # idle workers, when no call is waiting
        self._waiters: collections.deque[_Waiter] = collections.deque()  # calls, first come first
        self._tasks: frozenset[str] = frozenset()
        self._error: str | None = None  # why replacements stopped coming, for the next caller
        self._closed = False
        self.timeouts = 0  # calls that missed their deadline, for reports
        try:
            self._zygote = _Zygote(self._workdir)
            for _ in range(workers):
                self._release(self._fork())
        except TraacError:
            self.close()
            raise
        # Forked children (DataLoader workers, multiprocessing) leave through os._exit, which
        # skips atexit but runs multiprocessing's finalizers.
        multiprocessing.util.Finalize(None, self.close, exitpriority=0)

    def _with_zygote(self, action: Callable[[_Zygote], _T]) -> _T:
        """`action(zygote)`; if the zygote died (killed for memory, say), once more on a new one
        that has loaded the pool's tasks (its workers died with it)."""
        zygote = self._zygote
        try:
            return action(zygote)
        except TraacError:
            if self._closed or zygote.proc.poll() is None:
                raise
        with self._zygote_lock:
            if self._zygote is zygote:
                zygote.close()
                fresh = _Zygote(self._workdir)
                for task in sorted(self._tasks):
                    fresh.command({"op": "load", "task": task})
                self._zygote = fresh
        return action(self._zygote)

    def _fork(self) -> _Worker:
        worker = self._with_zygote(_Zygote.fork)
        with self._lock:
            self._live.add(worker)
        return worker

    def _retire(self, worker: _Worker) -> None:
        """Kill `worker` and fork its replacement, off the caller's clock."""
        with self._lock:
            self._live.discard(worker)
        threading.Thread(target=self._replace, args=(worker,), daemon=True).start()

    def _replace(self, worker: _Worker) -> None:
        try:
            with contextlib.suppress(TraacError):  # a dead zygote took its workers along
                self._zygote.kill(worker)
            if not self._closed:
                self._release(self._fork())
        except TraacError as exc:
            if not self._closed:
                self._error = f"verification worker lost and not replaced: {exc}"

    def _release(self, worker: _Worker) -> None:
        """Hand `worker` to the longest-waiting call, else keep it idle. (A plain queue lets the
        thread that just returned a worker take it straight back, and a waiting call starves.)"""
        with self._lock:
            if self._waiters:
                waiter = self._waiters.popleft()
                waiter.worker = worker
                waiter.ready.set()
            else:
                self._free.append(worker)

    def _acquire(self, deadline: float) -> _Worker | None:
        while True:
            waiter = _Waiter()
            with self._lock:
                if self._free and not self._waiters:
                    waiter.worker = self._free.pop()
                    waiter.ready.set()
                else:
                    self._waiters.append(waiter)
            waiter.ready.wait(max(0.0, deadline - time.monotonic()))
            with self._lock:
                worker = waiter.worker
                if worker is None:
                    self._waiters.remove(waiter)
            if worker is None:
                if self._error is not None:
                    raise TraacError(self._error)
                return None
            if worker.idle():
                return worker
            self._retire(worker)  # died between calls

    def _load(self, task: str) -> None:
        with self._load_lock:
            if task in self._tasks:
                return
            reply = self._with_zygote(lambda zygote: zygote.command({"op": "load", "task": task}))
            if not reply["ok"]:
                raise TraacError(
                    f"verify_task: cannot load reasoning-gym task {task!r}: {reply['error']}"
                )
            self._tasks |= {task}

    def call(self, message: dict[str, Any], timeout: float, task: str | None = None) -> Any:
        """Run one request; its value, or None on timeout. Raises TraacError on a bad request."""
        start = time.monotonic()
        if task is not None and task not in self._tasks:
            self._load(task)  # once per pool, outside the deadline
            start = time.monotonic()
        deadline = start + timeout
        while True:
            worker = self._acquire(deadline)
            if worker is None or task is None or task in worker.tasks:
                break
            # Forked before the zygote loaded the task: the worker loads it too (once, outside
            # the deadline), or is replaced by a fork that has it.
            loaded = worker.request({"op": "load", "task": task}, STARTUP_TIMEOUT)
            if loaded is not None and loaded["ok"]:
                worker.tasks |= {task}
                deadline = time.monotonic() + timeout
                break
            self._retire(worker)
        reply = None if worker is None else worker.request(message, deadline - time.monotonic())
        if reply is None:
            if worker is not None:
                self._retire(worker)
            with self._lock:
                self.timeouts += 1
            return None
        self._release(worker)
        if not reply["ok"]:
            raise TraacError(f"verification failed: {reply['error']}")
        return reply["value"]

    def close(self) -> None:
        with self._lock:
            self._closed = True
            workers, self._live = self._live, set()
        zygote = getattr(self, "_zygote", None)
        if zygote is not None:
            zygote.close()  # kills the workers too
        for worker in workers:
            worker.close()
        shutil.rmtree(self._workdir, ignore_errors=True)


_pool: VerifierPool | None = None
_pool_lock = threading.Lock()


def default_workers() -> int:
    """Worker count: $TRAAC_VERIFY_WORKERS, else the CPU count capped at 4."""
    value = os.environ.get("TRAAC_VERIFY_WORKERS")
    if value is not None:
        if not value.isdigit() or int(value) < 1:
            raise TraacError(f"TRAAC_VERIFY_WORKERS must be a positive integer, got {value!r}")
        return int(value)
    return max(1, min(4, os.cpu_count() or 1))


def get_pool() -> VerifierPool:
    """The process-wide pool (a forked child gets its own; the parent's pipes stay the parent's)."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool.pid != os.getpid():
            _pool = VerifierPool(default_workers())
        return _pool


def configure_pool(workers: int) -> VerifierPool:
    """Replace the process-wide pool with one of `workers` processes."""
    global _pool
    with _pool_lock:
        if _pool is not None and _pool.pid == os.getpid():
            _pool.close()
        _pool = VerifierPool(workers)
        return _pool


@atexit.register
def shutdown_pool() -> None:
    """Stop the workers (also run at interpreter exit)."""
    global _pool
    with _pool_lock:
        if _pool is not None and _pool.pid == os.getpid():
            _pool.close()
        _pool = None


# ---------------------------------------------------------------------------------------------
# Math and task verifiers


def _strip_math_delimiters(text: str) -> str:
    s = text.strip()
    for left, right in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
        if s.startswith(left) and s.endswith(right) and len(s) >= len(left) + len(right):
            s = s[len(left) : len(s) - len(right)].strip()
    return s


def verify_math(
    response: str,
    gold: str,
    think_close: str = "</think>",
    timeout: float = DEFAULT_TIMEOUT,
    **_: Any,
) -> bool:
    """Does the final answer equal `gold` mathematically (math-verify)? A timeout is wrong."""
    text = _final_text(response, think_close)
    if text is None:
        return False
    boxes = boxed_answers(text)
    pred = ", ".join(f"\\boxed{{{box}}}" for box in boxes) if boxes else _last_line(text)
    if not pred or looks_like_code(pred):
        return False
    gold_text = _strip_math_delimiters(str(gold))
    if "\\boxed" not in gold_text:
        gold_text = f"\\boxed{{{gold_text}}}"
    return bool(get_pool().call({"op": "math", "gold": gold_text, "pred": pred}, timeout))


def _task_name(entry: dict[str, Any]) -> str:
    try:
        name = entry["metadata"]["source_dataset"]
    except (KeyError, TypeError):
        raise TraacError(
            "verify_task: entry has no metadata.source_dataset naming its reasoning-gym task"
        ) from None
    if not isinstance(name, str) or not name:
        raise TraacError(f"verify_task: metadata.source_dataset must be a task name, got {name!r}")
    return name


def task_score(
    response: str,
    entry: dict[str, Any],
    think_close: str = "</think>",
    timeout: float = DEFAULT_TIMEOUT,
) -> float:
    """reasoning-gym's own score (0..1) of the final answer; 0 on a timeout, with no closer, or
    for an answer its task's allow-list refuses (`task_answer_allowed`)."""
    name = _task_name(entry)
    text = _final_text(response, think_close)
    if text is None:
        return 0.0
    candidate = task_answer(text, name, entry.get("metadata"))
    if not task_answer_allowed(name, candidate, entry.get("metadata")):
        return 0.0
    payload = json.loads(json.dumps(entry, default=str))  # the worker gets plain JSON
    message = {"op": "task", "task": name, "answer": candidate, "entry": payload}
    score = get_pool().call(message, timeout, task=name)
    return 0.0 if score is None else float(score)


def verify_task(
    response: str,
    entry: dict[str, Any],
    think_close: str = "</think>",
    timeout: float = DEFAULT_TIMEOUT,
    min_score: float = 1.0,
    **_: Any,
) -> bool:
    """Is the response right for this reasoning-gym entry (its task's score reaches `min_score`)?

    Scorers give partial credit (a longer valid path, a near answer); only a full score counts.
    """
    return task_score(response, entry, think_close, timeout) >= min_score - 1e-9


def verify_item(item: Item, response: str, **kwargs: Any) -> bool:
    """Is `response` (a full model response, think block included) right for `item`, by the
    item's own verifier?"""
    if item.verifier == "math":
        return verify_math(response, item.answer, **kwargs)
    if item.verifier == "choice":
        return verify_choice(response, item.answer, **kwargs)
    if item.verifier == "text":
        return verify_text(response, item.answer, **kwargs)
    return verify_task(response, item.entry or {}, **kwargs)


def verify_many(
    items: Sequence[Item], responses: Sequence[str], *, threads: int | None = None, **kwargs: Any
) -> list[bool]:
    """Verify `responses[i]` against `items[i]`, keeping every worker busy. kwargs: think_close,
    timeout."""
    if len(items) != len(responses):
        raise TraacError(f"verify_many: {len(items)} items but {len(responses)} responses")
    if not items:
        return []
    threads = threads or 2 * get_pool().workers
    with ThreadPoolExecutor(max_workers=threads) as executor:
        return list(
            executor.map(
                lambda pair: verify_item(*pair, **kwargs), zip(items, responses, strict=True)
            )
        )
