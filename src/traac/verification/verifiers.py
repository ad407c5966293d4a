"""Is a response right? The four verifiers, and `VERIFIERS`, which picks one by an item's name.

- `verify_math(response, gold)`: math-verify; the gold is wrapped in `\\boxed{}`, the prediction
  is the boxes (several read as one set, `\\boxed{2}, \\boxed{3}` = {2, 3}) or the last line.
- `verify_choice(response, gold_letter)`: a multiple-choice letter ("C", "(C)", `\\boxed{C}`,
  "the answer is C"); a hedge ("B or C", "A, B", two boxed letters) is no answer.
- `verify_text(response, gold)`: normalised string match for short free-text answers (BBEH).
- `verify_task(response, entry)`: reasoning-gym's own `score_answer` for the task named in
  `entry["metadata"]["source_dataset"]`; right means a score of 1.0 (`task_score` gives the raw
  score), after `task_answer` brought the answer into the shape its scorer reads.
- `verify_many(items, responses)`: the batch form for evaluation and training;
  `verify_answers(items, answers)` the same for bare answers (no think block).

Choice and text are string work in this process; math and task checks run in the pool's
sandboxed workers (`traac.verification.workers`), after the screening, under a deadline.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from traac.common.items import Item, VerifierKind
from traac.errors import TraacError
from traac.verification.answers import (
    boxed_answers,
    extract_choice,
    extract_text,
    final_text,
    last_line,
    letter_of,
    text_match,
)
from traac.verification.screening import looks_like_code, task_answer_allowed
from traac.verification.task_answers import task_answer
from traac.verification.workers import get_pool

DEFAULT_TIMEOUT = 5.0  # seconds one math or task check may take before it counts as wrong


def _strip_math_delimiters(text: str) -> str:
    s = text.strip()
    for left, right in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
        if s.startswith(left) and s.endswith(right) and len(s) >= len(left) + len(right):
            s = s[len(left) : len(s) - len(right)].strip()
    return s


def math_prediction(text: str) -> str | None:
    """What math-verify reads of a final answer: its boxes (each re-boxed, joined by ", ") or its
    last line; None when that is empty or looks like code (never sent to a parser)."""
    boxes = boxed_answers(text)
    pred = ", ".join(f"\\boxed{{{box}}}" for box in boxes) if boxes else last_line(text)
    return None if not pred or looks_like_code(pred) else pred


def verify_math(
    response: str,
    gold: str,
    think_close: str = "</think>",
    timeout: float = DEFAULT_TIMEOUT,
    **_: Any,
) -> bool:
    """Does the final answer equal `gold` mathematically (math-verify)? A timeout is wrong."""
    text = final_text(response, think_close)
    pred = None if text is None else math_prediction(text)
    if pred is None:
        return False
    gold_text = _strip_math_delimiters(str(gold))
    if "\\boxed" not in gold_text:
        gold_text = f"\\boxed{{{gold_text}}}"
    return bool(get_pool().call({"op": "math", "gold": gold_text, "pred": pred}, timeout))


def verify_choice(response: str, gold_letter: str, think_close: str = "</think>", **_: Any) -> bool:
    """Does the response pick option `gold_letter` ("C" or "(C)")?"""
    gold = letter_of(gold_letter)
    if gold is None:
        raise TraacError(f"verify_choice: gold answer {gold_letter!r} is not an option letter")
    text = final_text(response, think_close)
    return text is not None and extract_choice(text) == gold


def verify_text(response: str, gold: str, think_close: str = "</think>", **_: Any) -> bool:
    """Does the response's final answer match `gold` as a normalised string (BBEH-style)?"""
    text = final_text(response, think_close)
    return text is not None and text_match(extract_text(text), gold)


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
    text = final_text(response, think_close)
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


# (item, response, **kwargs) -> is the response right for the item?
ItemVerifier = Callable[..., bool]


def _against_answer(verify: Callable[..., bool]) -> ItemVerifier:
    """A verifier of a gold string, applied to the item's `answer`."""
    return lambda item, response, **kwargs: verify(response, item.answer, **kwargs)


# The verifier an item names; `Item.verifier` is one of these keys.
VERIFIERS: dict[VerifierKind, ItemVerifier] = {
    "math": _against_answer(verify_math),
    "choice": _against_answer(verify_choice),
    "text": _against_answer(verify_text),
    "task": lambda item, response, **kwargs: verify_task(response, item.entry or {}, **kwargs),
}


def verify_item(item: Item, response: str, **kwargs: Any) -> bool:
    """Is `response` (a full model response, think block included) right for `item`, by the
    item's own verifier?"""
    return VERIFIERS[item.verifier](item, response, **kwargs)


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


def verify_answers(
    items: Sequence[Item], answers: Sequence[str], *, think_close: str = "</think>", **kwargs: Any
) -> list[bool]:
    """Is `answers[i]`, read as the final answer (the text after the think block), right for
    `items[i]`? For answers taken from inside a reasoning, e.g. each step's stated value
    (`traac.compression.first_correct`); as time-bounded as `verify_many`."""
    return verify_many(items, [think_close + a for a in answers], think_close=think_close, **kwargs)
