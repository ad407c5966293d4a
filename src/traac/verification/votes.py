"""Which samples of one problem give the same answer, by the item's own verifier: the groups
maj@k counts votes in.

Two spellings of one answer are one vote: `\\frac{1}{2}`, `1/2` and `0.5`, or "-5" and "The answer
is -5", where comparing strings (lighteval's `MajAtN`) counts two or three. Per verifier:

- every right sample (by its verdict) is in one group: each equals the gold by the verifier, so
  they are one answer to it (for a reasoning-gym task with several accepted answers, the group
  of what its scorer accepts);
- a wrong one joins the first earlier wrong group whose first answer the verifier calls equal:
  math-verify between the two for math (in the sandboxed pool, under the same deadline as a
  check; a timeout is "different"), the same option letter for choice, BBEH's tolerant text
  match for text, and the same candidate the task's scorer would read (`task_answer`) for task;
- a sample with no answer casts no vote: its think block never closed, nothing follows the
  closer, the answer looks like code, math-verify reads no expression in it (or not in time),
  no option letter, or an empty candidate or one the task's allow-list refuses. A right and a
  wrong answer are never one group.

Model output is never executed: the math comparisons go to the same workers `verify_math` uses.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from traac.common.items import Item
from traac.errors import TraacError
from traac.verification.answers import (
    extract_choice,
    extract_text,
    final_text,
    normalize_text,
    text_match,
)
from traac.verification.screening import task_answer_allowed
from traac.verification.task_answers import task_answer
from traac.verification.verifiers import DEFAULT_TIMEOUT, math_prediction
from traac.verification.workers import get_pool


def voting_form(item: Item, response: str, think_close: str = "</think>") -> str | None:
    """What the item's verifier compares of a response (None: no answer to vote with)."""
    text = final_text(response, think_close)
    if text is None:
        return None
    if item.verifier == "math":
        return math_prediction(text)
    if item.verifier == "choice":
        return extract_choice(text)
    if item.verifier == "text":
        answer = extract_text(text)
        return answer if normalize_text(answer) else None
    metadata = (item.entry or {}).get("metadata") or {}
    name = metadata.get("source_dataset", "")
    candidate = " ".join(task_answer(text, name, metadata).split())
    return candidate if candidate and task_answer_allowed(name, candidate, metadata) else None


def _readable(item: Item, form: str, timeout: float) -> bool:
    """Does the verifier read an answer in `form`? (math: math-verify finds an expression.)"""
    if item.verifier != "math":
        return True
    return bool(get_pool().call({"op": "parses", "text": form}, timeout))


def _same(item: Item, first: str, other: str, timeout: float) -> bool:
    """Does the verifier call two differently spelt (wrong) answers of `item` one answer?"""
    if item.verifier == "math":
        message = {"op": "math", "gold": first, "pred": other}
        return bool(get_pool().call(message, timeout))
    if item.verifier == "text":
        return text_match(other, first)
    return False  # choice letters and task candidates are compared whole, above


def vote_groups(
    item: Item,
    responses: Sequence[str],
    verdicts: Sequence[bool],
    *,
    think_close: str = "</think>",
    timeout: float = DEFAULT_TIMEOUT,
) -> list[int | None]:
    """For each response of one problem (in sample order), the position of the first response
    of its group, or None where it casts no vote (see the module's rules)."""
    if len(responses) != len(verdicts):
        raise TraacError(f"vote_groups: {len(responses)} responses but {len(verdicts)} verdicts")
    groups: list[int | None] = []
    right: int | None = None
    wrong: list[tuple[int, str]] = []  # (position, answer) of each wrong group's first answer
    unread: set[str] = set()  # answers the verifier read nothing in
    for i, (response, ok) in enumerate(zip(responses, verdicts, strict=True)):
        if ok:
            right = i if right is None else right
            groups.append(right)
            continue
        form = voting_form(item, response, think_close)
        key = None if form is None else " ".join(form.split())
        if form is None or key in unread:
            groups.append(None)
            continue
        first = next((j for j, seen in wrong if " ".join(seen.split()) == key), None)
        if first is None:  # a new spelling: does it read, and as which earlier answer?
            if not _readable(item, form, timeout):
                unread.add(key)
                groups.append(None)
                continue
            first = next((j for j, seen in wrong if _same(item, seen, form, timeout)), None)
        if first is None:
            wrong.append((i, form))
            first = i
        groups.append(first)
    return groups


def vote_groups_many(
    problems: Sequence[tuple[Item, Sequence[str], Sequence[bool]]],
    *,
    threads: int | None = None,
    **kwargs: float | str,
) -> list[list[int | None]]:
    """`vote_groups` of each (item, responses, verdicts), keeping every worker busy."""
    if not problems:
        return []
    threads = threads or 2 * get_pool().workers
    with ThreadPoolExecutor(max_workers=threads) as executor:
        return list(executor.map(lambda p: vote_groups(*p, **kwargs), problems))
