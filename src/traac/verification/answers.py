"""What a response answers: the text after its think block, the boxes in it, its last line, and
the option letter or free text it picks. Pure string work, linear in the text, never executed.

A response's final answer is the text after its last think closer (no closer, or more than
`MAX_ANSWER_CHARS` after it: no answer). From it the boxes are taken (`boxed_answers`: the last
complete `\\boxed{...}` and the boxes math-verify reads with it as one list, nested braces
handled), else the last non-empty line (lines end at `\\n` only).
"""

from __future__ import annotations

import re

MAX_ANSWER_CHARS = 1 << 16  # a longer final answer (text after the closer) is wrong unread

# ---------------------------------------------------------------------------------------------
# Answer extraction


def answer_text(response: str, think_close: str = "</think>") -> str | None:
    """The text after the last think closer, or None when the think block never closed."""
    cut = response.rfind(think_close)
    return None if cut < 0 else response[cut + len(think_close) :]


def final_text(response: str, think_close: str) -> str | None:
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


def last_line(text: str) -> str:
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
    text = final_text(response, think_close)
    if text is None:
        return None
    boxes = boxed_answers(text)
    return ", ".join(boxes) if boxes else last_line(text)


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
# Multiple choice and free text

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


def letter_of(candidate: str) -> str | None:
    s = clean_answer(candidate)
    m = _CHOICE_ALONE.fullmatch(s) or _CHOICE_LEAD.match(s + " ") or _CHOICE_WORD.search(s)
    return _picked(m, s + " ")


def extract_choice(text: str) -> str | None:
    """The option letter an answer text picks, or None (no letter, or a hedge between two)."""
    boxes = boxed_answers(text)
    if boxes:
        letters = {letter_of(box) for box in boxes} - {None}
        return letters.pop() if len(letters) == 1 else None
    phrases = list(_CHOICE_PHRASE.finditer(text))
    if phrases:
        return _picked(phrases[-1], text)
    return letter_of(last_line(text))


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
    return last_line(text)
