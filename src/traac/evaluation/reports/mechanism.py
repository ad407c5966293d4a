"""The mechanism, before any RL: does a step scorer find the redundant steps of a model's own
right responses, and what does a re-answer from the pruned reasoning keep?

Two tables, both on responses whose every step carries a label (needed, re-check,
restatement, detour, conclusion: the long testbed's grammar read back from the text):

- **detection**: per scorer, the precision (share of evicted steps that were redundant) and
  recall (share of redundant steps evicted), under the paper's rule at the tier's tau (gate
  0.8, cap 0.8: a gated scorer may evict nothing) and at equal numbers of evicted steps
  (every scorer evicts floor(n * tau) steps of its lowest scores, gate off), each with a 90%
  bootstrap interval over responses;
- **budgets**: at equal think budgets (a share of each response's think tokens), the accuracy
  of the answer re-written from the think cut by attention-pruning (lowest-scored steps first,
  until the budget holds), random pruning, the first-correct early exit (the think up to the
  first step whose answer verifies, cut to the budget when longer: the authors' oracle) and
  plain truncation, each against attention-pruning on the same responses (paired, 90%).

The scorers: attention over all layers (the paper), over the authors' layer set (the first
half), over all layers with gated heads (traac's testbed recipe), step entropy, position (the
latest steps first: what stopping early removes) and random.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from traac.common.items import Item
from traac.common.progress import NullProgress, Progress
from traac.common.tables import Table, fmt
from traac.compression.compression import Compressor, ScoredTrace, count_tokens, keep_mask
from traac.compression.factory import build_compressor
from traac.compression.first_correct import ParseAnswer, first_correct, step_answer
from traac.compression.formats import ChatFormat
from traac.compression.segmentation import split_steps
from traac.compression.settings import CompressionSettings
from traac.errors import TraacError
from traac.evaluation.harness.metrics import BOOTSTRAP_DRAWS, BOOTSTRAP_SEED, bootstrap_mean_ci
from traac.evaluation.harness.overthinking import verifier_accepts
from traac.evaluation.harness.paired import PairedDiff, paired_diff
from traac.evaluation.inference.generation import Backend
from traac.evaluation.reports.probe_report import ScorerSpec, reanswer

LEVEL = 0.90  # the intervals' coverage, as the seed-level bounds (`harness.seeds`)
BUDGETS = (0.75, 0.5)  # shares of each response's think tokens
POSITION = "position (latest first)"
RANDOM = "random"
ATTENTION = "attention (paper)"


def default_specs() -> list[ScorerSpec]:
    """The scorers the issue asks for (position is built from the random scorer's steps)."""
    return [
        ScorerSpec.attention("all", ATTENTION),
        ScorerSpec.attention("first_half", "attention, first half (authors)"),
        ScorerSpec.attention("all", "attention, gated heads", heads="gated"),
        ScorerSpec("step entropy", CompressionSettings(scorer="step_entropy")),
        ScorerSpec(POSITION, CompressionSettings(scorer="random")),
        ScorerSpec(RANDOM, CompressionSettings(scorer="random")),
    ]


@dataclass(frozen=True)
class Response:
    """One right response: the exact prompt, its reasoning, one label per `split_steps` step
    (`redundant` marks the redundant ones), the item that verifies an answer, and its tier."""

    id: str
    prompt: str
    reasoning: str
    labels: tuple[str, ...]
    redundant: tuple[bool, ...]
    item: Item
    tier: str
    tau: float

    def __post_init__(self) -> None:
        n = len(split_steps(self.reasoning))
        if not n == len(self.labels) == len(self.redundant):
            raise TraacError(f"response {self.id}: {len(self.labels)} labels for {n} steps")


@dataclass(frozen=True)
class Interval:
    value: float | None
    low: float | None
    high: float | None

    def cell(self, scale: float = 100.0, digits: int = 1) -> str:
        if self.value is None or self.low is None or self.high is None:
            return "-"
        v, lo, hi = (fmt(scale * x, digits) for x in (self.value, self.low, self.high))
        return f"{v} [{lo}, {hi}]"


@dataclass(frozen=True)
class Detection:
    scorer: str
    rule: str  # "paper" or "equal"
    tier: str
    responses: int
    evicted: int
    redundant: int
    precision: Interval
    recall: Interval


@dataclass(frozen=True)
class BudgetRow:
    method: str
    budget: float
    responses: int
    think_kept: float  # mean share of the think tokens kept
    accuracy: Interval
    against_attention: PairedDiff | None  # this method - attention-pruning, points


@dataclass(frozen=True)
class Mechanism:
    detection: list[Detection]
    budgets: list[BudgetRow]

    def detection_table(self, rule: str) -> Table:
        title = {
            "paper": "Evicted steps against the labels, the paper's rule at the tier's tau",
            "equal": "Evicted steps against the labels, floor(n * tau) steps each (gate off)",
        }[rule]
        table = Table(["scorer", "tier", "responses", "evicted", "precision %", "recall %"],
                      title=f"{title}; 90% intervals over responses")  # fmt: skip
        for d in self.detection:
            if d.rule == rule:
                table.add(d.scorer, d.tier, str(d.responses), str(d.evicted),
                          d.precision.cell(), d.recall.cell())  # fmt: skip
        return table

    def budget_table(self) -> Table:
        table = Table(
            ["budget", "method", "responses", "think kept", "re-answer right %",
             "- attention-pruning (points)"],
            title="Re-answers at equal think budgets (every response right before); 90% intervals",
        )  # fmt: skip
        for b in self.budgets:
            diff = "-" if b.against_attention is None else b.against_attention.cell(mark=False)
            table.add(f"{100 * b.budget:.0f}%", b.method, str(b.responses),
                      fmt(100 * b.think_kept, 1, suffix="%"), b.accuracy.cell(), diff)  # fmt: skip
        return table

    def to_json(self) -> dict[str, Any]:
        def plain(row: Any) -> dict[str, Any]:
            out = {}
            for k, v in vars(row).items():
                out[k] = vars(v) if isinstance(v, (Interval, PairedDiff)) else v
            return out

        return {"level": LEVEL, "detection": [plain(d) for d in self.detection],
                "budgets": [plain(b) for b in self.budgets]}  # fmt: skip


def _resample(n: int) -> np.ndarray:
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    return rng.integers(0, n, size=(BOOTSTRAP_DRAWS, n))


def ratio_interval(numerators: Sequence[float], denominators: Sequence[float]) -> Interval:
    """sum(num) / sum(den) with a percentile bootstrap over the paired units (responses)."""
    num, den = np.asarray(numerators, float), np.asarray(denominators, float)
    if den.sum() <= 0:
        return Interval(None, None, None)
    draws = _resample(len(num))
    nd, dd = num[draws].sum(axis=1), den[draws].sum(axis=1)
    ratios = nd[dd > 0] / dd[dd > 0]
    tail = 100 * (1 - LEVEL) / 2
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return Interval(float(num.sum() / den.sum()), float(low), float(high))


def _scored(
    spec: ScorerSpec, model: Any, tokenizer: Any, chat_format: ChatFormat,
    responses: Sequence[Response], contexts: list[str], seed: int,
) -> tuple[Compressor, list[ScoredTrace]]:  # fmt: skip
    compressor = build_compressor(spec.settings, model, tokenizer, chat_format, seed=seed)
    traces = compressor.score([r.reasoning for r in responses], contexts)
    if spec.name == POSITION:  # the latest step scores lowest
        traces = [replace(t, scores=-np.arange(len(t.steps), dtype=float)) for t in traces]
    return compressor, traces


def _evicted_redundant(
    response: Response, trace: ScoredTrace, kept: Sequence[bool]
) -> tuple[int, int]:
    """(evicted steps, of which redundant), steps matched to labels by their start."""
    redundant = dict(
        zip((s.start for s in split_steps(response.reasoning)), response.redundant, strict=True)
    )
    out = [
        redundant.get(s.start, False)
        for s, k in zip(trace.steps, kept, strict=True)
        if s.text and not k
    ]
    return len(out), sum(out)


def _detection(
    name: str, rule: str, responses: Sequence[Response], masks: Sequence[Sequence[bool]],
    traces: Sequence[ScoredTrace],
) -> list[Detection]:  # fmt: skip
    counts = [_evicted_redundant(r, t, m) for r, t, m in zip(responses, traces, masks, strict=True)]
    rows = []
    for tier in dict.fromkeys([*sorted({r.tier for r in responses}), "all"]):
        at = [k for k, r in enumerate(responses) if tier in ("all", r.tier)]
        evicted = [counts[k][0] for k in at]
        hits = [counts[k][1] for k in at]
        redundant = [sum(responses[k].redundant) for k in at]
        precision, recall = ratio_interval(hits, evicted), ratio_interval(hits, redundant)
        rows.append(
            Detection(name, rule, tier, len(at), sum(evicted), sum(redundant), precision, recall)
        )
    return rows


def prune_to_budget(trace: ScoredTrace, budget: int, tokenizer: Any) -> str:
    """The reasoning with its lowest-scored steps evicted, one at a time, until its steps'
    tokens fit `budget` (order kept)."""
    sizes = [count_tokens(tokenizer, s.text) for s in trace.steps]
    kept = [True] * len(trace.steps)
    total = sum(sizes)
    for k in np.argsort(trace.scores, kind="stable"):
        if total <= budget:
            break
        if trace.steps[k].text:
            kept[k], total = False, total - sizes[k]
    return "".join(s.text for s, keep in zip(trace.steps, kept, strict=True) if keep)


def truncate(reasoning: str, budget: int, tokenizer: Any) -> str:
    """The first `budget` tokens of the reasoning."""
    ids = tokenizer(reasoning, add_special_tokens=False)["input_ids"]
    return reasoning if len(ids) <= budget else tokenizer.decode(ids[:budget])


def mechanism(
    model: Any,
    tokenizer: Any,
    responses: Sequence[Response],
    backend: Backend,
    *,
    chat_format: ChatFormat | None = None,
    specs: Sequence[ScorerSpec] | None = None,
    budgets: Sequence[float] = BUDGETS,
    seed: int = 0,
    progress: Progress | None = None,
    parse_answer: ParseAnswer = step_answer,
) -> Mechanism:
    """Both tables on `responses` (each right before any cut); `parse_answer` reads the answer
    a step states, for the early exit (the last number of the step unless told)."""
    if not responses:
        raise TraacError("mechanism: no right responses to measure")
    fmt_ = chat_format or ChatFormat()
    progress = progress or NullProgress()
    contexts = [fmt_.reasoning_context(r.prompt) for r in responses]
    detection: list[Detection] = []
    traces_of: dict[str, list[ScoredTrace]] = {}
    for spec in specs or default_specs():
        with progress.phase(f"scoring: {spec.name}"):
            compressor, traces = _scored(spec, model, tokenizer, fmt_, responses, contexts, seed)
        traces_of[spec.name] = traces
        paper = [compressor.compress(t, r.tau).kept for t, r in zip(traces, responses, strict=True)]
        equal = [
            keep_mask(t.scores, r.tau, t.evictable) for t, r in zip(traces, responses, strict=True)
        ]
        detection += _detection(spec.name, "paper", responses, paper, traces)
        detection += _detection(spec.name, "equal", responses, equal, traces)
    items = [r.item for r in responses]
    with progress.phase("finding the first correct steps"):
        exits = first_correct(
            [r.reasoning for r in responses], verifier_accepts(items), parse=parse_answer
        )
    think = [count_tokens(tokenizer, r.reasoning) for r in responses]
    rows: list[BudgetRow] = []
    for share in budgets:
        limits = [max(1, math.floor(share * n)) for n in think]
        cuts = {
            "attention-pruning": _pruned(traces_of[ATTENTION], limits, tokenizer),
            "random pruning": _pruned(traces_of[RANDOM], limits, tokenizer),
            # the oracle: the head up to the first correct step (the whole think if none)
            "first-correct early exit": _truncated(
                [e.head if e.index is not None else e.reasoning for e in exits], limits, tokenizer
            ),
            "truncation": _truncated([r.reasoning for r in responses], limits, tokenizer),
        }
        prompts = [r.prompt for r in responses]
        with progress.phase(f"re-answering at {100 * share:.0f}% of the think"):
            right = {
                method: [float(x) for x in reanswer(
                    prompts, texts, items, backend, fmt_, seed,
                    [f"{r.id}#{method}#{share}" for r in responses])]
                for method, texts in cuts.items()
            }  # fmt: skip
        ids = [r.id for r in responses]
        base = dict(zip(ids, (100 * x for x in right["attention-pruning"]), strict=True))
        for method, texts in cuts.items():
            kept = statistics.fmean(
                count_tokens(tokenizer, t) / max(1, n) for t, n in zip(texts, think, strict=True)
            )
            mine = dict(zip(ids, (100 * x for x in right[method]), strict=True))
            diff = None if method == "attention-pruning" else paired_diff(mine, base, ids, LEVEL)
            accuracy = Interval(
                statistics.fmean(right[method]), *bootstrap_mean_ci(right[method], confidence=LEVEL)
            )
            rows.append(BudgetRow(method, share, len(ids), kept, accuracy, diff))
    return Mechanism(detection, rows)


def _pruned(traces: Sequence[ScoredTrace], limits: Sequence[int], tokenizer: Any) -> list[str]:
    return [prune_to_budget(t, b, tokenizer) for t, b in zip(traces, limits, strict=True)]


def _truncated(texts: Sequence[str], limits: Sequence[int], tokenizer: Any) -> list[str]:
    return [truncate(t, b, tokenizer) for t, b in zip(texts, limits, strict=True)]
