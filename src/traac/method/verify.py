"""Is a response right? Answer extraction and the four verifiers, time-bounded and never executing
model output.

A response's final answer is the text after its last think closer (no closer: wrong). From it the
last `\\boxed{...}` (nested braces handled) is taken, else the last non-empty line.

- `verify_math(response, gold)`: math-verify; the gold is wrapped in `\\boxed{}`, the prediction
  is parsed as LaTeX or as a plain expression.
- `verify_choice(response, gold_letter)`: a multiple-choice letter ("C", "(C)", `\\boxed{C}`,
  "the answer is C").
- `verify_text(response, gold)`: normalised string match for short free-text answers (BBEH).
- `verify_task(response, entry)`: reasoning-gym's own `score_answer` for the task named in
  `entry["metadata"]["source_dataset"]`; right means a score of 1.0 (`task_score` gives the raw
  score). Each task's answer is first brought into the shape its scorer reads (a JSON move list
  for knight_swap, "(x, y)" for an orthocenter, unicode connectives for propositional logic...).
- `verify_many(items, responses)`: the batch form for evaluation and training.

Math and task checks run in a small pool of persistent worker processes (`VerifierPool`). Each
call has a hard deadline; a worker that misses it is killed and replaced and the answer counts as
wrong. This works from any thread or subprocess, unlike math-verify's own signal-based timeout,
which is disabled here. The workers run with no file-size allowance (they cannot write content
to any file), a memory cap and a private empty working directory.

Model output is never executed. math-verify hands plain `1+2*3`-shaped strings to sympy's
`parse_expr` (which evaluates Python) and reasoning-gym's puzzle24 scorer hands it the whole
answer, so every candidate that could reach a parser is screened first: Python-looking text
(`looks_like_code`) is rejected outright, after NFKC normalisation, the same folding Python
applies to identifiers; and puzzle24 answers must be plain arithmetic (checked on Python's
syntax tree, never evaluated).
"""

from __future__ import annotations

import ast
import atexit
import json
import multiprocessing.util
import os
import queue
import re
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unicodedata
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from traac.errors import TraacError
from traac.method.items import Item

DEFAULT_TIMEOUT = 5.0  # seconds one math or task check may take before it counts as wrong
STARTUP_TIMEOUT = 120.0  # seconds a worker may take to import its libraries
_MEMORY_LIMIT = 4 << 30  # bytes of address space per worker
_MAX_LINE = 1 << 24  # longest reply a worker may send

# ---------------------------------------------------------------------------------------------
# Answer extraction


def answer_text(response: str, think_close: str = "</think>") -> str | None:
    """The text after the last think closer, or None when the think block never closed."""
    cut = response.rfind(think_close)
    return None if cut < 0 else response[cut + len(think_close) :]


def last_boxed(text: str) -> str | None:
    """Content of the last complete `\\boxed{...}` (or `\\fbox{...}`), nested braces handled.

    One pass over the text pairs every brace, so degenerate outputs ("\\boxed{" repeated
    thousands of times) cost linear time.
    """
    boxes = [m.end() for m in re.finditer(r"\\(?:boxed|fbox)\s*\{", text)]
    if not boxes:
        return None
    closing: dict[int, int] = {}  # position after an opening brace -> position of its closer
    open_at: list[int] = []
    for i, char in enumerate(text):
        if char in "{}" and i > 0 and text[i - 1] == "\\":
            continue  # an escaped, literal brace
        if char == "{":
            open_at.append(i + 1)
        elif char == "}" and open_at:
            closing[open_at.pop()] = i
    for start in reversed(boxes):
        if start in closing:
            return text[start : closing[start]]
    return None


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def extract_answer(response: str, think_close: str = "</think>") -> str | None:
    """The final answer: the last `\\boxed{}` after the last closer, else its last non-empty line.

    None when the response has no closer (the rollout never finished thinking); "" when nothing
    follows the closer.
    """
    text = answer_text(response, think_close)
    if text is None:
        return None
    boxed = last_boxed(text)
    return boxed.strip() if boxed is not None else _last_line(text)


# ---------------------------------------------------------------------------------------------
# Screening: nothing that looks like Python reaches a parser

_CODE_PATTERNS = re.compile(
    r"__|\bimport\b|\blambda\b|\b(?:os|sys|subprocess|shutil|pathlib|builtins|io)\s*\."
    r"|\b(?:exec|eval|compile|open|getattr|setattr|delattr|globals|locals|vars|breakpoint|input"
    r"|help|exit|quit|system|popen|lambdify|sympify|parse_expr)\s*\("
    r"|[A-Za-z_)\]'\"]\.[A-Za-z_]\w*\s*\(",  # method calls: x.y(
    re.IGNORECASE,
)


def looks_like_code(text: str) -> bool:
    """True for text with Python syntax that no math or puzzle answer needs.

    NFKC first: Python folds identifiers that way, so fullwidth `ｅｘｅｃ` would run as `exec`.
    """
    return bool(_CODE_PATTERNS.search(unicodedata.normalize("NFKC", text)))


_ARITH_NODES = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Add, ast.Sub, ast.Mult)
_ARITH_NODES += (ast.Div, ast.USub, ast.UAdd)


def is_plain_arithmetic(text: str) -> bool:
    """True when `text` is only numbers, + - * / and parentheses (read from Python's syntax tree,
    never evaluated). Guards scorers that feed answers to sympy's `parse_expr`."""
    if not text.strip() or not re.fullmatch(r"[\d\s+\-*/().]+", text) or "**" in text:
        return False
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return all(
        isinstance(node, _ARITH_NODES)
        and (not isinstance(node, ast.Constant) or type(node.value) in (int, float))
        for node in ast.walk(tree)
    )


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
_ANSWER_PREFIX_RE = re.compile(
    r"^(?:the\s+)?(?:final\s+)?(?:answer|conclusion|result)\b\s*(?:is)?\s*[:=]?\s*", re.IGNORECASE
)


def clean_answer(text: str) -> str:
    """LaTeX and markdown dressing removed: `$`, `\\text{}`, `\\to`, `\\#`, `**`, "Answer:", a final
    period. Keeps the content a scorer compares."""
    s = text.strip()
    for _ in range(3):  # nested wrappers such as \text{\textbf{C}}
        s = _LATEX_WRAPPER_RE.sub(r"\1", s)
    s = _LATEX_WORD_RE.sub(lambda m: _LATEX_WORDS[m.group(1)], s)
    s = re.sub(r"\^\s*\{?\\circ\}?", "°", s)
    s = re.sub(r"\\([#%&_{}$ ])", r"\1", s)
    s = re.sub(r"\\[,;:! ]", " ", s)
    if s[:2] in ("\\(", "\\[") and s[-2:] in ("\\)", "\\]"):
        s = s[2:-2]
    s = s.replace("**", "").replace("`", "")
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


def _letter_of(candidate: str) -> str | None:
    s = clean_answer(candidate)
    for pattern in (_CHOICE_ALONE, _CHOICE_LEAD):
        m = pattern.fullmatch(s) if pattern is _CHOICE_ALONE else pattern.match(s + " ")
        if m:
            return m.group(1).upper()
    m = _CHOICE_WORD.search(s)
    return m.group(1).upper() if m else None


def extract_choice(text: str) -> str | None:
    """The option letter an answer text picks, or None."""
    boxed = last_boxed(text)
    if boxed is not None:
        return _letter_of(boxed)
    phrases = list(_CHOICE_PHRASE.finditer(text))
    if phrases:
        return phrases[-1].group(1).upper()
    return _letter_of(_last_line(text))


def verify_choice(response: str, gold_letter: str, think_close: str = "</think>", **_: Any) -> bool:
    """Does the response pick option `gold_letter` ("C" or "(C)")?"""
    gold = _letter_of(gold_letter)
    if gold is None:
        raise TraacError(f"verify_choice: gold answer {gold_letter!r} is not an option letter")
    text = answer_text(response, think_close)
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
    """A free-text answer: the last box, else what follows the last "answer is", else the last
    line."""
    boxed = last_boxed(text)
    if boxed is not None:
        return boxed
    phrases = list(re.finditer(r"answer\s*(?:is|:)\s*:?", text, re.IGNORECASE))
    if phrases:
        rest = text[phrases[-1].end() :].strip()
        if rest:
            return rest.splitlines()[0]
    return _last_line(text)


def verify_text(response: str, gold: str, think_close: str = "</think>", **_: Any) -> bool:
    """Does the response's final answer match `gold` as a normalised string (BBEH-style)?"""
    text = answer_text(response, think_close)
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
    expr = re.sub(r"^[\s)+*/.]+|[\s(+\-*/.]+$", "", expr)  # "(" or "." dangling at the ends
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

    The last box (else the last line) is cleaned of LaTeX and markdown, then tasks with a fixed
    answer shape take the last thing of that shape from it; knight_swap may also take its move
    list from a multi-line answer. Other tasks get the cleaned box or line as it is.
    """
    boxed = last_boxed(text)
    source = boxed if boxed is not None else text
    line = clean_answer(" ".join(source.split()) if boxed is not None else _last_line(source))
    extractor = _TASK_EXTRACTORS.get(name)
    return extractor(line, clean_answer(source), metadata or {}) if extractor else line


# ---------------------------------------------------------------------------------------------
# The worker pool

_WORKER_BOOT = "from traac.method.verify import _worker_main; _worker_main()"


def _worker_main() -> None:
    """Loop of a verification worker: one JSON request per stdin line, one JSON reply per line."""
    import signal

    try:
        import resource

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails, not kills
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_AS, (_MEMORY_LIMIT, _MEMORY_LIMIT))
    except (ImportError, ValueError, OSError):  # not POSIX, or limits already lower
        pass
    import logging

    logging.disable(logging.WARNING)  # math-verify warns that its own timeout is off
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    extraction = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]
    scorers: dict[str, Any] = {}

    def check_math(gold_text: str, pred_text: str) -> bool:
        gold = parse(gold_text, extraction_config=extraction, parsing_timeout=None)
        pred = parse(pred_text, extraction_config=extraction, parsing_timeout=None)
        return bool(gold and pred and verify(gold, pred, timeout_seconds=None))

    def handle(request: dict[str, Any]) -> Any:
        op = request["op"]
        if op == "load":
            import reasoning_gym

            name = request["task"]
            if name not in scorers:
                scorers[name] = reasoning_gym.get_score_answer_fn(name)
            return True
        try:  # a scorer that chokes on an answer has judged it wrong
            if op == "math":
                return check_math(request["gold"], request["pred"])
            if op == "task":
                return float(scorers[request["task"]](request["answer"], request["entry"]))
        except Exception:
            return 0.0 if op == "task" else False
        raise ValueError(f"unknown op {op!r}")

    check_math("\\boxed{1}", "\\boxed{1}")  # builds the LaTeX parser before any deadline runs
    out = sys.stdout
    out.write('{"ok": true, "value": "ready"}\n')
    out.flush()
    for line in sys.stdin:
        try:
            reply = {"ok": True, "value": handle(json.loads(line))}
        except Exception as exc:
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        out.write(json.dumps(reply) + "\n")
        out.flush()


class _Worker:
    """One worker process and the reasoning-gym scorers it has loaded."""

    def __init__(self, workdir: str) -> None:
        package_root = str(Path(__file__).resolve().parents[1])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        env.update(PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _WORKER_BOOT],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=workdir,
            env=env,
            start_new_session=True,  # a Ctrl-C aimed at the parent does not hit the workers
        )
        self.loaded: set[str] = set()
        self._buffer = b""
        if self._read_reply(time.monotonic() + STARTUP_TIMEOUT) is None:
            self.kill()
            raise TraacError(
                f"verification worker did not start within {STARTUP_TIMEOUT:.0f} s; check that "
                f"`{sys.executable} -c 'import math_verify'` works"
            )

    def request(self, message: dict[str, Any], timeout: float) -> dict[str, Any] | None:
        """Send one request; its reply, or None when the deadline passed or the worker died."""
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps(message).encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return None
        return self._read_reply(time.monotonic() + timeout)

    def _read_reply(self, deadline: float) -> dict[str, Any] | None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or len(self._buffer) > _MAX_LINE:
                return None
            ready, _, _ = select.select([fd], [], [], remaining)
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:  # the worker died
                    return None
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


class VerifierPool:
    """Persistent worker processes with a hard deadline per call; any thread may call it.

    A call that misses its deadline kills its worker (a fresh one starts on the next call) and
    returns None. Workers start lazily and load a reasoning-gym task's scorer once, outside the
    per-call deadline.
    """

    def __init__(self, workers: int) -> None:
        if workers < 1:
            raise TraacError(f"verifier pool: workers must be >= 1, got {workers}")
        self.workers = workers
        self.pid = os.getpid()
        self._workdir = tempfile.mkdtemp(prefix="traac-verify-")
        self._slots: queue.Queue[list[_Worker | None]] = queue.Queue()
        self._all: list[list[_Worker | None]] = []
        for _ in range(workers):
            slot: list[_Worker | None] = [None]
            self._slots.put(slot)
            self._all.append(slot)
        self.timeouts = 0  # calls that missed their deadline, for reports
        self._stats_lock = threading.Lock()
        # Forked children (DataLoader workers, multiprocessing) leave through os._exit, which
        # skips atexit but runs multiprocessing's finalizers.
        multiprocessing.util.Finalize(None, self.close, exitpriority=0)

    def call(self, message: dict[str, Any], timeout: float, task: str | None = None) -> Any:
        """Run one request; its value, or None on timeout. Raises TraacError on a bad request."""
        slot = self._slots.get()
        try:
            if slot[0] is None or not slot[0].alive():
                slot[0] = _Worker(self._workdir)
            worker = slot[0]
            if task is not None and task not in worker.loaded:
                reply = worker.request({"op": "load", "task": task}, STARTUP_TIMEOUT)
                if reply is None or not reply["ok"]:
                    worker.kill()
                    slot[0] = None
                    reason = reply["error"] if reply else "timed out"
                    raise TraacError(
                        f"verify_task: cannot load reasoning-gym task {task!r}: {reason}"
                    )
                worker.loaded.add(task)
            reply = worker.request(message, timeout)
            if reply is None:
                worker.kill()
                slot[0] = None
                with self._stats_lock:
                    self.timeouts += 1
                return None
            if not reply["ok"]:
                raise TraacError(f"verification failed: {reply['error']}")
            return reply["value"]
        finally:
            self._slots.put(slot)

    def close(self) -> None:
        for slot in self._all:
            if slot[0] is not None:
                slot[0].kill()
                slot[0] = None
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
    text = answer_text(response, think_close)
    if text is None:
        return False
    boxed = last_boxed(text)
    pred = f"\\boxed{{{boxed}}}" if boxed is not None else _last_line(text)
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
    """reasoning-gym's own score (0..1) of the final answer; 0 on a timeout or with no closer."""
    name = _task_name(entry)
    text = answer_text(response, think_close)
    if text is None:
        return 0.0
    candidate = task_answer(text, name, entry.get("metadata"))
    if looks_like_code(candidate):
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
