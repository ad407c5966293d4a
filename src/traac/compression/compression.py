"""Attentive compression: score the steps of a reasoning trace, then evict the least important.

docs/method.md#compression, as two public steps. `Compressor.score` asks a scorer for one score
per token of the probe text (opener + reasoning + auxiliary prompt + closer), takes each step's
mean and the uniformity u of the step scores. `Compressor.compress` turns u and the difficulty's
target rate tau into an eviction fraction and drops the lowest-scored steps. A caller that
calibrates u (the trainer's rank calibration) passes its own u to the second step; nothing else
differs.

The attention scorer goes through the uniformity gate. The ablation scorers (random,
confidence) do not: their near-uniform scores would evict nothing, so, as in the authors' code,
they evict e = tau of the steps (random picks them at random, at most n - 1).
`compression_stats` totals what a set of results removed (training's step telemetry).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from traac.compression.formats import ChatFormat
from traac.compression.segmentation import Step, split_steps, token_step_index
from traac.compression.settings import EVICTION_CAP, UNIFORMITY_GATE, CompressionSettings
from traac.errors import TraacError


@dataclass(frozen=True)
class TokenScores:
    """Per-token scores of one probe text and each token's `(start, end)` character offsets in
    it (a scorer that reads another text maps its offsets onto the probe's)."""

    offsets: np.ndarray  # (T, 2) int
    scores: np.ndarray  # (T,) float, or (heads, T) one row per head for `gate_heads`


@dataclass(frozen=True)
class ScoreRequest:
    """One trace to score. `probe` is the probe text; `context` is what the policy read before
    the reasoning when it sampled it (prompt + opener), for scorers that need the question."""

    reasoning: str
    probe: str
    context: str | None = None


class Scorer(Protocol):
    """Scores every token of a batch of traces (attention, confidence, random).

    `gated`: whether the uniformity gate decides how much to evict
    (docs/method.md#ablation-scorers: only the attention scorer's scores are selective enough
    for it). A scorer may set `sums_steps` (step entropy): a step's score is then the sum of its
    tokens' scores, not their mean.
    """

    tokenizer: Any
    gated: bool

    def score(self, requests: Sequence[ScoreRequest]) -> list[TokenScores]: ...


@dataclass(frozen=True)
class ScoredTrace:
    """The steps of one reasoning trace with their scores: the first step of compression.

    `steps` are clipped to the reasoning (offsets into it); with step scope `probe` the first
    may be empty when the reasoning itself opens with a split phrase.
    """

    reasoning: str
    steps: list[Step]
    scores: np.ndarray
    uniformity: float
    tokens: int  # tokens of the reasoning alone

    @property
    def evictable(self) -> list[bool]:
        """Steps that hold reasoning text (only those can be evicted)."""
        return [bool(s.text) for s in self.steps]


@dataclass(frozen=True)
class StepRecord:
    """One step as reports and JSON show it."""

    index: int
    start: int
    end: int
    tokens: int
    score: float
    kept: bool
    text: str


@dataclass(frozen=True)
class CompressionResult:
    """What compression did to one reasoning trace. `uniformity` is the step scores' own;
    `rule_uniformity` the u the eviction rule used (calibrated, or 0 for ungated scorers)."""

    reasoning: str
    steps: list[Step]
    scores: np.ndarray
    kept: list[bool]
    uniformity: float
    eviction_fraction: float
    text: str
    tokens_before: int
    tokens_after: int
    rule_uniformity: float | None = None

    @property
    def n_evicted(self) -> int:
        """Evicted steps that held text."""
        return sum(bool(s.text) and not k for s, k in zip(self.steps, self.kept, strict=True))

    @property
    def compressed(self) -> bool:
        return self.n_evicted > 0

    @property
    def tokens_removed(self) -> int:
        return self.tokens_before - self.tokens_after

    def summary_line(self) -> str:
        return (
            f"u = {self.uniformity:.3f}  e = {self.eviction_fraction:.3f}  "
            f"steps kept {sum(self.kept)}/{len(self.kept)}  "
            f"tokens {self.tokens_before} -> {self.tokens_after}"
        )

    def step_records(self, tokenizer: Any) -> list[StepRecord]:
        rows = zip(self.steps, self.scores, self.kept, strict=True)
        return [
            StepRecord(
                k, s.start, s.end, count_tokens(tokenizer, s.text), float(v), bool(keep), s.text
            )
            for k, (s, v, keep) in enumerate(rows)
        ]

    @classmethod
    def unchanged(cls, reasoning: str, tokens: int) -> CompressionResult:
        """A trace nothing was done to (empty, unscored, or a probe too long)."""
        return cls(reasoning, [], np.zeros(0), [], 1.0, 0.0, reasoning, tokens, tokens)


def uniformity(scores: Sequence[float] | np.ndarray) -> float:
    """Normalised entropy of the step scores: 1 = no step stands out
    (docs/method.md#eviction)."""
    s = np.clip(np.asarray(scores, dtype=np.float64), 0.0, None)
    n, total = len(s), float(s.sum())
    if n <= 1 or total <= 0 or not math.isfinite(total):
        return 1.0
    p = s / total
    entropy = float(-(p * np.log(p + 1e-12)).sum())
    return entropy / math.log(n)


def uniformity_rank(u: float, window: Sequence[float] | np.ndarray) -> float:
    """The share of `window` below `u` (ties count half): the calibrated uniformity that
    `uniformity_calibration: rank` puts in place of u."""
    values = np.asarray(window, dtype=np.float64)
    if values.size == 0:
        raise TraacError("uniformity_rank: the calibration window is empty")
    return float(((values < u).sum() + 0.5 * (values == u).sum()) / values.size)


def eviction_fraction(
    u: float, tau: float, gate: float = UNIFORMITY_GATE, cap: float = EVICTION_CAP
) -> float:
    """Share of steps to evict: none above the gate, else tau scaled by non-uniformity, capped."""
    if u > gate:
        return 0.0
    return min(tau * (1.0 - u), cap)


def keep_mask(
    scores: np.ndarray, fraction: float, evictable: Sequence[bool] | None = None
) -> list[bool]:
    """Keep-mask that drops floor(n * fraction) lowest-scoring steps (ties: earliest first).

    `evictable` marks steps that hold text; a step without any (the bare think opener of the
    probe scope) still counts in n but is never chosen, since evicting it would remove nothing.
    """
    n = len(scores)
    k = math.floor(n * fraction + 1e-9)
    kept = np.ones(n, dtype=bool)
    order = np.argsort(scores, kind="stable")
    if evictable is not None:
        order = [i for i in order if evictable[i]]
    if k > 0:
        kept[order[:k]] = False
    return kept.tolist()


def step_scores(
    token_scores: TokenScores, steps: Sequence[Step], *, total: bool = False
) -> np.ndarray:
    """Mean token score per step (the sum with `total`), (n,), or (heads, n) for per-head
    scores; a step no token starts in takes the score of the token that covers its first
    character (0 if none does)."""
    index = token_step_index(steps, token_scores.offsets)
    scores = np.asarray(token_scores.scores, dtype=np.float64)
    rows = scores.reshape(-1, scores.shape[-1])
    n = len(steps)
    valid = index >= 0
    flat = (np.arange(len(rows))[:, None] * n + index[None, valid]).ravel()
    sums = np.bincount(flat, weights=rows[:, valid].ravel(), minlength=len(rows) * n)
    counts = np.bincount(index[valid], minlength=n)
    sums = sums.reshape(len(rows), n)
    out = sums if total else np.divide(sums, counts, out=np.zeros((len(rows), n)), where=counts > 0)
    for k in np.flatnonzero(counts == 0):
        covering = np.flatnonzero(
            (token_scores.offsets[:, 0] <= steps[k].start)
            & (token_scores.offsets[:, 1] > steps[k].start)
        )
        out[:, k] = rows[:, covering[0]] if len(covering) else 0.0
    return out.reshape(*scores.shape[:-1], n)


def gate_heads(token_scores: TokenScores, steps: Sequence[Step], gate: float) -> TokenScores:
    """Per-head token scores -> the mean over the heads whose own step scores pass the
    uniformity gate (u <= gate), or over all heads if none does (`probe_heads: gated`)."""
    rows = np.asarray(token_scores.scores, dtype=np.float64)
    passing = np.array([uniformity(s) <= gate for s in step_scores(token_scores, steps)])
    chosen = rows[passing] if passing.any() else rows
    return TokenScores(token_scores.offsets, chosen.mean(axis=0))


def count_tokens(tokenizer: Any, text: str) -> int:
    """Tokens of `text` alone, without special tokens a tokenizer would add."""
    return len(tokenizer(text, add_special_tokens=False)["input_ids"]) if text else 0


@dataclass(frozen=True)
class Compressor:
    """Compresses reasoning traces with one scorer and one set of settings."""

    scorer: Scorer
    chat_format: ChatFormat = field(default_factory=ChatFormat)
    settings: CompressionSettings = field(default_factory=CompressionSettings)

    def probe_text(self, reasoning: str) -> str:
        return self.chat_format.probe_text(reasoning, self.settings.aux_prompt)

    def score(
        self, reasonings: Sequence[str], contexts: Sequence[str | None] | None = None
    ) -> list[ScoredTrace]:
        """Step scores and uniformity of each trace; one scorer call for the non-empty ones.
        `contexts[i]`: what the policy read before reasoning i (the confidence scorer's input)."""
        if contexts is not None and len(contexts) != len(reasonings):
            raise TraacError("compress: one context per reasoning trace is required")
        todo = [i for i, r in enumerate(reasonings) if r.strip()]
        requests = [
            ScoreRequest(reasonings[i], self.probe_text(reasonings[i]), contexts and contexts[i])
            for i in todo
        ]
        scored = dict(zip(todo, self.scorer.score(requests) if requests else [], strict=True))
        return [self._steps(r, scored.get(i)) for i, r in enumerate(reasonings)]

    def _steps(self, reasoning: str, token_scores: TokenScores | None) -> ScoredTrace:
        tokens = count_tokens(self.scorer.tokenizer, reasoning)
        if token_scores is None:
            return ScoredTrace(reasoning, [], np.zeros(0), 1.0, tokens)
        lo = len(self.chat_format.think_open)
        hi = lo + len(reasoning)
        phrases = self.settings.phrases
        if self.settings.splits_probe:
            scope_steps = split_steps(self.probe_text(reasoning), phrases)
        else:
            shifted = split_steps(reasoning, phrases)
            scope_steps = [Step(s.text, s.start + lo, s.end + lo) for s in shifted]
        if np.ndim(token_scores.scores) == 2:  # one row per head
            if self.settings.gates_heads:
                token_scores = gate_heads(token_scores, scope_steps, self.settings.uniformity_gate)
            else:
                token_scores = TokenScores(token_scores.offsets, token_scores.scores.mean(axis=0))
        scores = step_scores(
            token_scores, scope_steps, total=getattr(self.scorer, "sums_steps", False)
        )
        steps = []
        for s in scope_steps:
            a = min(max(s.start, lo), hi) - lo
            b = max(min(s.end, hi) - lo, a)
            steps.append(Step(reasoning[a:b], a, b))
        return ScoredTrace(reasoning, steps, scores, uniformity(scores), tokens)

    def compress(
        self, trace: ScoredTrace, tau: float, rule_uniformity: float | None = None
    ) -> CompressionResult:
        """The eviction rule (docs/method.md#eviction) on a scored trace. `rule_uniformity`
        replaces the trace's own u (calibration); ungated scorers use u = 0, so e = tau. `tau`
        arrives checked (`check_tau`, where it entered)."""
        if not trace.steps:
            return CompressionResult.unchanged(trace.reasoning, trace.tokens)
        if not self.scorer.gated:
            u = 0.0
        else:
            u = trace.uniformity if rule_uniformity is None else rule_uniformity
        s = self.settings
        e = eviction_fraction(u, tau, s.uniformity_gate, s.eviction_cap)
        kept = keep_mask(trace.scores, e, trace.evictable)
        text = "".join(step.text for step, k in zip(trace.steps, kept, strict=True) if k)
        after = (
            trace.tokens if text == trace.reasoning else count_tokens(self.scorer.tokenizer, text)
        )
        return CompressionResult(
            trace.reasoning, trace.steps, trace.scores, kept, trace.uniformity, e, text,
            trace.tokens, after, u,
        )  # fmt: skip

    def __call__(
        self,
        reasonings: Sequence[str],
        taus: Sequence[float],
        contexts: Sequence[str | None] | None = None,
    ) -> list[CompressionResult]:
        """Score and evict a batch at the given rates."""
        if len(reasonings) != len(taus):
            raise TraacError("compress: one tau per reasoning trace is required")
        scored = self.score(reasonings, contexts)
        return [self.compress(t, tau) for t, tau in zip(scored, taus, strict=True)]


@dataclass(frozen=True)
class CompressionStats:
    """What compression removed over a set of reasoning traces."""

    traces: int
    compressed: int  # traces with at least one step evicted
    steps: int
    steps_removed: int
    tokens_before: int
    tokens_after: int

    @property
    def tokens_removed(self) -> int:
        return self.tokens_before - self.tokens_after

    @property
    def compressed_fraction(self) -> float:
        return self.compressed / self.traces if self.traces else 0.0

    @property
    def step_removal_rate(self) -> float:
        return self.steps_removed / self.steps if self.steps else 0.0

    @property
    def token_removal_rate(self) -> float:
        return self.tokens_removed / self.tokens_before if self.tokens_before else 0.0


def compression_stats(results: Sequence[CompressionResult]) -> CompressionStats:
    """Totals over compression results (an empty list gives zeros)."""
    return CompressionStats(
        traces=len(results),
        compressed=sum(r.compressed for r in results),
        steps=sum(len(r.kept) for r in results),
        steps_removed=sum(r.n_evicted for r in results),
        tokens_before=sum(r.tokens_before for r in results),
        tokens_after=sum(r.tokens_after for r in results),
    )
