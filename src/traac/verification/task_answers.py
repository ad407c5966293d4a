"""Task answers: the shape each reasoning-gym scorer reads.

A model writes "the answer is (3, -2)" or `\\boxed{A1 -> B1, ...}`; reasoning-gym's scorers
compare exact strings or parse one layout. `task_answer` brings an answer text into that layout
(a JSON move list for knight_swap, "(x, y)" for an orthocenter, unicode connectives for
propositional logic...) so that a right answer in a usual form scores right.
"""

from __future__ import annotations

import json
import re
from typing import Any

from traac.verification.answers import boxed_answers, clean_answer, last_line
from traac.verification.screening import is_plain_arithmetic

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
    line = clean_answer(" ".join(source.split()) if boxes else last_line(source))
    extractor = _TASK_EXTRACTORS.get(name)
    return extractor(line, clean_answer(source), metadata or {}) if extractor else line
