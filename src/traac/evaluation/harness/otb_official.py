"""OptimalThinkingBench scored the way its official code does (facebookresearch/RAM,
`projects/otb/eval.py`, `utils.py` and `evals/`, commit f0be196), for `traac eval
--otb-scoring official`; the paper's scoring is `records.summarize`'s (docs/evaluation.md).

Per question, over its samples:

- thinking: the tokens of the text before the first `</think>`, counted by the tokenizer
  called as the official code calls it (`tokenizer(text)["input_ids"]`, special tokens
  included); a response that never closes its think block counts whole;
- overthinking half: score = mean(correct) * max(0, T - mean(think tokens)) / T with T = 1000
  (`OTB_OFFICIAL_T`; the official t_max option is read and never used). Correctness is traac's
  rule-based verdict on exactly what the official code hands its LLM judge (`judge_input`: the
  first box of the last 2,000 characters after the first `</think>`), so a response whose think
  block never closed is judged on its tail and can score;
- underthinking half: score = mean over samples of reasoning-gym's `score_answer`, partial
  credit included, on the first `\\boxed{...}` anywhere in the response (cut at its first `}`),
  or the whole response where there is none, with the official per-task touch-ups (`ab`,
  `mini_sudoku`, `\\ ` unescaped twice). An answer the task's allow-list keeps from an
  evaluating scorer gets what the scorer gives an answer it cannot read (puzzle24's 0.01), and
  is never run. An item with no reasoning-gym task (the official code would fail on it for
  want of `metadata.source_dataset`) scores its traac verdict, 0 or 1;
- O and U: the mean over the half's questions, averaged with the mean over its math questions
  where there are any (the official "general" mean takes every row of the half, math included,
  so math rows count twice); F1 = 2 O U / (O + U).

A data source names a half by its prefix (`otb-overthink`, `otb-underthink`) and a math
subset by holding "math" (`otb-overthink-math`), as the official subsets do by substring.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from traac.common.items import Item
from traac.compression.formats import ChatFormat
from traac.data.datasets import OTB_OVERTHINK, OTB_UNDERTHINK
from traac.evaluation.harness.paper_metrics import OTB_OFFICIAL_T, otb_f1
from traac.evaluation.harness.results import (
    OTB_GENERAL_ONLY,
    OTB_ONE_HALF_MATH,
    OTB_WITH_MATH,
    EvalSummary,
    OTBScore,
    SampleRecord,
)
from traac.verification import DEFAULT_TIMEOUT, get_pool, verify_answers
from traac.verification.screening import task_answer_allowed

JUDGE_CHARS = 2000  # the official judge reads this many characters of the answer's tail


def official_answer(response: str, task: str) -> str:
    """The answer the official underthinking scorer reads: the first box's text up to its first
    closing brace, else the whole response; then its per-task touch-ups."""
    _, opened, after = response.partition("\\boxed{")
    answer = after.split("}", 1)[0] if opened else response
    if task == "ab":
        answer = re.sub(r"[^#AB]", " ", answer).replace("  ", " ")
    elif task == "mini_sudoku":
        answer = answer.replace("\\\\", "\n").replace("\\", " ")
    return answer.replace("\\ ", " ").replace("\\ ", " ")  # twice, as the official code does


def task_credit(response: str, item: Item, timeout: float = DEFAULT_TIMEOUT) -> float | None:
    """reasoning-gym's score (0..1, partial credit kept) of the official answer, in the entry
    shape the official code builds (the metadata's fields, the task, the answer, the metadata);
    None for an item with no reasoning-gym task. An answer the task's allow-list refuses is
    scored as no answer (the scorer's floor for what it cannot read: what the official scorer
    gives the unreadable ones, without running any); a check that times out scores 0."""
    if item.verifier != "task" or not item.entry:
        return None
    meta = dict(item.entry.get("metadata") or {})
    task = str(meta["source_dataset"])
    answer: str | None = official_answer(response, task)
    if not task_answer_allowed(task, answer, meta):
        answer = None
    entry = json.loads(
        json.dumps({**meta, "puzzle": task, "answer": item.entry.get("answer"), "metadata": meta},
                   default=str)
    )  # fmt: skip
    message = {"op": "task", "task": task, "answer": answer, "entry": entry}
    score = get_pool().call(message, timeout, task=task)
    return 0.0 if score is None else float(score)


def judge_input(response: str, think_close: str) -> tuple[str, bool]:
    """What the official overthinking judge is shown as the student's answer, and whether it is
    a box's text: the text after the first closer up to the next one (all of it where there is
    none), its last 2,000 characters, and there the first box up to its first closing brace,
    else that whole tail."""
    parts = response.split(think_close)
    tail = (parts[1] if len(parts) > 1 else response)[-JUDGE_CHARS:]
    _, opened, after = tail.partition("\\boxed{")
    return (after.split("}", 1)[0], True) if opened else (tail, False)


def judged(items: Sequence[Item], responses: Sequence[str], think_close: str) -> list[bool]:
    """traac's rule-based verdict on each judge input, in the LLM judge's place: a box's text is
    read as the whole answer (boxed again), a tail without a box as any final answer is."""
    answers = []
    for response in responses:
        shown, boxed = judge_input(response, think_close)
        answers.append(f"\\boxed{{{shown}}}" if boxed else shown)
    return verify_answers(items, answers, think_close=think_close)


def official_think_tokens(responses: Sequence[str], tokenizer: Any, think_close: str) -> list[int]:
    """Tokens before the first closer (all of an unclosed response), special tokens included."""
    heads = [r.split(think_close, 1)[0] for r in responses]
    return [len(ids) for ids in tokenizer(heads)["input_ids"]] if heads else []


def official_otb(
    records: Sequence[SampleRecord],
    items: Sequence[Item],
    tokenizer: Any,
    chat_format: ChatFormat,
) -> OTBScore | None:
    """O, U and F1 (percent) the official way; None unless both halves are among the records."""
    by_id = {it.id: it for it in items}
    over = [r for r in records if r.data_source.startswith(OTB_OVERTHINK)]
    under = [r for r in records if r.data_source.startswith(OTB_UNDERTHINK)]
    if not over or not under:
        return None
    close = chat_format.think_close
    verdicts = judged([by_id[r.id] for r in over], [r.response for r in over], close)
    correct = {r.key: float(v) for r, v in zip(over, verdicts, strict=True)}
    tokens = dict(
        zip(
            [r.key for r in over],
            official_think_tokens([r.response for r in over], tokenizer, close),
            strict=True,
        )
    )
    credit = {}
    for r in under:
        found = task_credit(r.response, by_id[r.id])
        credit[r.key] = float(r.correct) if found is None else found

    def per_question(rows: Sequence[SampleRecord], score: Any) -> dict[str, tuple[str, float]]:
        questions: dict[str, list[SampleRecord]] = {}
        for r in rows:
            questions.setdefault(r.id, []).append(r)
        return {i: (rs[0].data_source, score(rs)) for i, rs in questions.items()}

    def over_score(rs: list[SampleRecord]) -> float:
        acc = statistics.fmean(correct[r.key] for r in rs)
        think = statistics.fmean(tokens[r.key] for r in rs)
        return acc * max(0.0, OTB_OFFICIAL_T - think) / OTB_OFFICIAL_T

    o = _macro(per_question(over, over_score))
    u = _macro(per_question(under, lambda rs: statistics.fmean(credit[r.key] for r in rs)))
    f1 = otb_f1(100.0 * o, 100.0 * u)
    return OTBScore(100.0 * o, 100.0 * u, f1, scoring="official", footing=footing(over, under))


def footing(over: Sequence[SampleRecord], under: Sequence[SampleRecord]) -> str:
    """Which rows the official O and U average: the leaderboard's (math rows in both halves),
    the general rows only, or math rows in one half (where the official code gives NaN)."""
    halves = [any("math" in r.data_source for r in rows) for rows in (over, under)]
    if all(halves):
        return OTB_WITH_MATH
    return OTB_ONE_HALF_MATH if any(halves) else OTB_GENERAL_ONLY


def _macro(questions: dict[str, tuple[str, float]]) -> float:
    """The official mean of a half: the mean over all its questions averaged with the mean over
    its math questions; the first alone where it has none (the official code gives NaN)."""
    general = statistics.fmean(score for _, score in questions.values())
    math = [score for source, score in questions.values() if "math" in source]
    return (general + statistics.fmean(math)) / 2 if math else general


def with_official_otb(
    summary: EvalSummary,
    records: Sequence[SampleRecord],
    items: Sequence[Item],
    tokenizer: Any,
    chat_format: ChatFormat,
) -> EvalSummary:
    """The summary with its OTB score computed the official way (unchanged without both
    halves)."""
    score = official_otb(records, items, tokenizer, chat_format)
    return summary if score is None else replace(summary, otb=score)
