"""What may reach a scorer that evaluates. Read on the syntax tree, never run.

Some reasoning-gym scorers `eval` the answer or hand it to sympy's `parse_expr` (which evaluates
Python): `EVALUATING_TASKS` lists them, and there an answer must pass its task's allow-list
(`task_answer_allowed`: the oracle's plain form, or a Python literal / arithmetic tree read with
`ast`, never evaluated) or it scores 0 before it reaches a worker. math-verify needs no
allow-list: it hands `parse_expr` only digit-and-operator runs its own regex picked (pinned by a
test) and parses LaTeX with a grammar. Math answers that look like Python (`looks_like_code`)
are still wrong outright, as math-verify would read a number out of `1 if open(...) else 24`.

The first of two layers; the second is the workers' sandbox (`traac.verification.sandbox`).
"""

from __future__ import annotations

import ast
import re
import unicodedata
from collections.abc import Callable
from typing import Any

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
# answers each may receive. tests/verification/test_screening.py rescans reasoning-gym's sources
# for new ones.
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
