"""The TRAAC step (docs/method.md#step) without TRL: its records and its decisions, read top-down.

One step, on a batch of prompts with N sampled rollouts each (GRPO's group, laid out
consecutively: rollout i belongs to group i // N):

1. **Verify.** Every rollout gets a verdict and a parse of its think block (`make_rollouts`;
   the driver decodes and verifies, as it holds the tokenizer and the verifiers' items).
2. **Resample** (optional, `dynamic_sampling: resample`). A group whose verdicts all agree
   (`degenerate`) has no correctness signal; it gets a fresh training prompt (`replacements`)
   and the driver samples its N rollouts again.
3. **Bin.** Each group's pass rate picks its bin (`bin_groups`), and the bin picks the
   compression rate tau and the length-reward scale.
4. **Select and compress.** Only the right, well-formed rollouts are candidates
   (`select_candidates`). The driver scores their steps (a forward per trace), the eviction
   rule drops steps at the bin's tau (`candidate_compressions`), and the driver samples a new
   answer after each compressed think block (`compressed_completions`).
5. **Pool.** Per group, originals and compressed copies are shuffled with a seed of (seed,
   step, group) and cut back to N (`pool`): GRPO trains on that group, in full.
6. **Drop** (optional, `dynamic_sampling: drop | resample`). A pooled group whose verdicts all
   agree is masked out of the loss (`mark_dropped`).
7. **Keep.** Once the rows are rewarded, a method that filters (GFPO) says which of the others
   GRPO trains on (`StepResult.filtered`); `StepResult.left_out` is every row that does not
   train, decided here and carried to the loss mask.

Each process then keeps its slice of the pooled batch (`slice_of`): the rollouts it trains on
and the columns its reward functions read (`StepColumns`). The whole step on one process is one
value, `StepResult`, which the trainer hands to TRL's scoring, the loss mask and the telemetry
(`step_stats`). Everything here is a pure function of gathered data, so every process takes the same
decision; the driver (`traac.training.step.driver`) runs them in order and does the generation
through its host, and the trainer (`traac.training.trl_adapter.trainer`) keeps the TRL hooks.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from traac.common.step_labels import labeller_for
from traac.compression.compression import (
    CompressionResult,
    Compressor,
    ScoredTrace,
    uniformity_rank,
)
from traac.compression.difficulty import DifficultySettings, group_pass_rates
from traac.compression.formats import ChatFormat, think_tokens_from_ids
from traac.training.step.copy_rules import TRL_ROLLOUT_MASK, loss_masks
from traac.training.telemetry.copy_stats import PooledRecord, advantage_ranks, compute_evicted
from traac.training.telemetry.step_stats import (
    ALL,
    KindedCandidate,
    RolloutView,
    StepStats,
    scope_stats,
)

# The reward rows' column that carries the step's result into TRL's reward call, where the
# keep phase is decided and recorded on it (no trainer attribute crosses TRL's hooks).
STEP_COLUMN = "traac_step"

# ------------------------------------------------------------------------------------ records


@dataclass
class Rollout:
    """One member of a group: an original sample or the compressed copy of one."""

    completion_ids: list[int]
    logprobs: list[float] | None  # sampling log-probs where the backend reports them
    text: str
    correct: bool
    well_formed: bool
    closed: bool
    origin: int  # global index of the original sample (its own index for an original)
    compressed: bool = False
    think_prefix: int = 0  # a copy's leading tokens not sampled in its context: its think block


@dataclass
class Compression:
    """Compression of one correct, well-formed original rollout."""

    origin: int
    result: CompressionResult
    tau: float
    uniformity_rank: float | None = None  # the calibrated uniformity, when calibration is on
    prefix_ids: list[int] = field(default_factory=list)  # opener + kept steps + closer

    @property
    def used(self) -> bool:
        """The think block is re-answered (a compressed copy): text was evicted or, under
        `copy_pool: all_correct`, the candidate is re-answered whole."""
        return bool(self.prefix_ids)


@dataclass
class Group:
    """The N rollouts of one prompt, before and after pooling."""

    index: int
    data_source: str
    pass_rate: float
    bin: str
    originals: list[Rollout]
    compressions: list[Compression]
    pooled: list[Rollout]
    resampled: int = 0  # times dynamic sampling replaced this group's prompt
    dropped: bool = False  # masked out of the loss: its pooled verdicts all agree
    tier: str | None = None  # the problem's difficulty tier where the data gives one (telemetry)


@dataclass
class TraacStep:
    """What one TRAAC step did, kept for telemetry and inspection (`trainer.last_step`)."""

    step: int
    groups: list[Group]
    stats: StepStats | None = None
    resample_rounds: int = 0  # extra generation rounds dynamic sampling ran


@dataclass(frozen=True)
class StepColumns:
    """The per-rollout columns the reward functions read for this process's slice."""

    correct: list[bool]
    bin: list[str]
    compressed: list[bool]


@dataclass(frozen=True)
class StepSlice:
    """This process's share of the pooled batch: what it trains on and what its rewards read."""

    rollouts: list[Rollout]
    columns: StepColumns
    dropped: list[bool] | None  # per rollout, masked out of the loss; None without sampling
    loss_masks: list[list[int]] | None = None  # per token, TRL's tool mask (copy_loss answer_only)


@dataclass
class StepResult:
    """One TRAAC step on one process, as a value: what TRL scores and trains on (the rows after
    resampling, their prompt ids, the pooled completions and their sampling log-probs, the
    reward columns, the dropped rows), `record` (every process's groups) and the time of its
    phases. The trainer hands it to TRL's scoring, the loss mask and the telemetry; its reward
    call fills in the keep phase (`filtered`) and the rewards it computed (`rewards`), and its
    scoring TRL's advantages (`advantages`)."""

    record: TraacStep
    rows: list[dict[str, Any]]  # this process's dataset rows; resampled groups' replaced
    prompt_ids: list[list[int]]  # their token ids, as TRL tokenizes them
    slice: StepSlice
    sampled_logprobs: bool  # the backend reported sampling log-probs
    seconds: dict[str, float] = field(default_factory=dict)
    # Every process's rows, in pooled order, that a filtering method keeps (GFPO); None: all.
    filtered: list[bool] | None = None
    # Every process's rewards (one row per pooled rollout, one column per reward function),
    # the left-out rows NaN: what the trainer's reward call returned to TRL.
    rewards: np.ndarray | None = None
    advantages: list[float] | None = None  # TRL's, of every process's rows, in pooled order

    @property
    def every_dropped(self) -> list[bool] | None:
        """Every process's rows, in pooled order, dropped by dynamic sampling; None without."""
        if self.slice.dropped is None:
            return None
        return [g.dropped for g in self.record.groups for _ in g.pooled]

    @property
    def left_out(self) -> list[bool]:
        """Every process's rows, in pooled order, that GRPO neither normalises nor trains on:
        the dropped groups' and those the method's filter does not keep."""
        total = sum(len(g.pooled) for g in self.record.groups)
        dropped = self.every_dropped or [False] * total
        kept = self.filtered if self.filtered is not None else [True] * total
        return [d or not k for d, k in zip(dropped, kept, strict=True)]

    @property
    def rollouts(self) -> list[Rollout]:
        return self.slice.rollouts

    @property
    def columns(self) -> StepColumns:
        return self.slice.columns

    @property
    def dropped(self) -> list[bool] | None:
        return self.slice.dropped

    @property
    def completion_ids(self) -> list[list[int]]:
        return [r.completion_ids for r in self.slice.rollouts]

    def rollout_output(self) -> dict[str, Any]:
        """What TRL's `rollout_func` returns for this step: the pooled prompt and completion ids,
        their sampling log-probs and, with `copy_loss: answer_only`, the per-token loss mask as
        TRL's `env_mask` (its tool mask: attended to, not trained on)."""
        out = {"prompt_ids": self.prompt_ids, "completion_ids": self.completion_ids,
               "logprobs": self.logprobs}  # fmt: skip
        if self.slice.loss_masks is not None:
            out[TRL_ROLLOUT_MASK[0]] = self.slice.loss_masks
        return out

    @property
    def logprobs(self) -> list[list[float]] | None:
        if not self.sampled_logprobs:
            return None
        return [r.logprobs for r in self.slice.rollouts]  # type: ignore[misc]

    def reward_rows(self, extra: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """New rows for TRL's reward call: each row with the step's verdict, bin and
        compression flag (and `extra`), so the rewards neither verify nor bin again, and this
        result (`STEP_COLUMN`), on which the reward call records the keep phase."""
        columns = self.slice.columns
        return [
            {**row, "correct": ok, "bin": b, "compressed": c, STEP_COLUMN: self, **(extra or {})}
            for row, ok, b, c in zip(
                self.rows, columns.correct, columns.bin, columns.compressed, strict=True
            )
        ]


# ---------------------------------------------------------------------------- the decisions


def make_rollouts(
    completion_ids: Sequence[Sequence[int]],
    logprobs: Sequence[list[float] | None] | None,
    texts: Sequence[str],
    verdicts: Sequence[bool],
    chat_format: ChatFormat,
    origin: int,
) -> list[Rollout]:
    """Sampled completions as rollouts, with their texts, verdicts and think-block parse
    (`origin`: the global index of the first)."""
    logprobs = logprobs if logprobs is not None else [None] * len(texts)
    out = []
    for i, (ids, lp, text, ok) in enumerate(
        zip(completion_ids, logprobs, texts, verdicts, strict=True)
    ):
        parsed = chat_format.parse(text)
        out.append(Rollout(list(ids), lp, text, ok, parsed.well_formed, parsed.closed, origin + i))
    return out


def degenerate(rollouts: Sequence[Rollout]) -> bool:
    """The verdicts all agree: the group carries no correctness signal for GRPO (whatever its
    shaped rewards say), which is what dynamic sampling acts on."""
    return len({r.correct for r in rollouts}) == 1


def replacements(
    originals: Sequence[Rollout], n: int, dataset_size: int, seed: tuple[int, int, int]
) -> dict[int, int]:
    """Dynamic sampling's draw: each degenerate group -> the index of the training prompt that
    replaces it, drawn with `seed` (the run's seed, the step and the round, so every process
    draws the same); empty when no group is degenerate."""
    todo = [g for g in range(len(originals) // n) if degenerate(originals[g * n : (g + 1) * n])]
    if not todo:
        return {}
    picks = np.random.default_rng(list(seed)).integers(dataset_size, size=len(todo))
    return {g: int(k) for g, k in zip(todo, picks, strict=True)}


def bin_groups(
    correct: Sequence[bool], n: int, difficulty: DifficultySettings
) -> tuple[list[float], list[str]]:
    """Each group's pass rate (its N consecutive verdicts) and the bin that rate falls in."""
    pass_rates = group_pass_rates(correct, n)[::n]
    return pass_rates, [difficulty.bin_of(p) for p in pass_rates]


def select_candidates(
    rollouts: Sequence[Rollout], bins: Sequence[str], difficulty: DifficultySettings
) -> list[tuple[Rollout, float]]:
    """The rollouts compression may shorten, with their bin's tau: right and well-formed only
    (a wrong or malformed trace teaches nothing worth keeping shorter). `bins[i]` is the bin of
    `rollouts[i]`'s group."""
    return [
        (r, difficulty.tau_of(b))
        for r, b in zip(rollouts, bins, strict=True)
        if r.correct and r.well_formed
    ]


def candidate_compressions(
    compressor: Compressor,
    scored: Sequence[tuple[Rollout, float, ScoredTrace]],
    recent: Sequence[float] | None,
) -> list[Compression]:
    """The eviction rule on each scored candidate at its tau. With the rank calibration,
    `recent` holds the uniformities it ranks against (every process's of this step and recent
    steps'), and each uniformity is replaced by its rank among them."""
    out = []
    for rollout, tau, trace in scored:
        rank = None if recent is None else uniformity_rank(trace.uniformity, recent)
        out.append(Compression(rollout.origin, compressor.compress(trace, tau, rank), tau, rank))
    return out


def compressed_completions(
    used: Sequence[Compression], answers: Sequence[tuple[list[int], list[float] | None]]
) -> tuple[list[list[int]], list[list[float]] | None]:
    """Compressed think block + regenerated answer: the completions trained on in full, and
    their sampling log-probs where the backend reports them. The think block was not sampled
    in this context, so it has none: NaN, which TRL's importance-sampling correction reads as
    "no correction" for those tokens."""
    ids = [c.prefix_ids + answer for c, (answer, _) in zip(used, answers, strict=True)]
    if not answers or answers[0][1] is None:
        return ids, None
    logprobs = [
        [math.nan] * len(c.prefix_ids) + list(lps)
        for c, (_, lps) in zip(used, answers, strict=True)
    ]
    return ids, logprobs


def mark_copies(copies: Sequence[Rollout], used: Sequence[Compression]) -> None:
    """Each re-answered rollout as the compressed copy of `used[i]`'s original: its origin, and
    its think block's length (the tokens `copy_loss: answer_only` masks)."""
    for rollout, c in zip(copies, used, strict=True):
        rollout.origin, rollout.compressed, rollout.think_prefix = c.origin, True, len(c.prefix_ids)


def pool(
    originals: Sequence[Rollout],
    compressed: Sequence[Rollout],
    compressions: Sequence[Compression],
    sources: Sequence[str],
    pass_rates: Sequence[float],
    bins: Sequence[str],
    n: int,
    seed: tuple[int, int],
    tiers: Sequence[str | None] | None = None,
) -> list[Group]:
    """Per prompt: originals + compressed copies, shuffled (seeded by `seed`, the run's seed and
    the step, and the group, so every process draws the same), the first N kept. A group with
    no copy keeps its originals in order and draws nothing. `sources[i]` is rollout i's data
    source, `tiers[i]` its problem's tier (telemetry only)."""
    extra: dict[int, list[Rollout]] = defaultdict(list)
    for r in compressed:
        extra[r.origin // n].append(r)
    records: dict[int, list[Compression]] = defaultdict(list)
    for c in compressions:
        records[c.origin // n].append(c)
    groups = []
    for g, rate in enumerate(pass_rates):
        members = list(originals[g * n : (g + 1) * n])
        pooled = list(members)
        if extra[g]:
            candidates = members + extra[g]
            rng = np.random.default_rng([*seed, g])
            pooled = [candidates[k] for k in rng.permutation(len(candidates))[:n]]
        tier = tiers[g * n] if tiers is not None else None
        groups.append(
            Group(g, sources[g * n], rate, bins[g], members, records[g], pooled, tier=tier)
        )
    return groups


def mark_dropped(groups: Sequence[Group], resampled: Sequence[int], sampling: str) -> None:
    """Record how often each group's prompt was replaced and, under dynamic sampling, drop the
    pooled groups that are still `degenerate`."""
    for group, count in zip(groups, resampled, strict=True):
        group.resampled = count
        group.dropped = sampling != "none" and degenerate(group.pooled)


def slice_of(
    groups: Sequence[Group],
    offset: int,
    count: int,
    n: int,
    sampling: str,
    masks_think: bool = False,
) -> StepSlice:
    """The `count` pooled rollouts from global index `offset` on (one process's rows), with the
    columns its rewards read, under dynamic sampling which of them are dropped and, with
    `masks_think` (`copy_loss: answer_only`, `CopySettings.masks_think`), each one's loss mask
    (a copy's think block masked, `loss_masks`)."""
    pooled = [r for g in groups for r in g.pooled]
    mine = pooled[offset : offset + count]
    owners = [groups[(offset + i) // n] for i in range(len(mine))]
    columns = StepColumns(
        correct=[r.correct for r in mine],
        bin=[g.bin for g in owners],
        compressed=[r.compressed for r in mine],
    )
    dropped = [g.dropped for g in owners] if sampling != "none" else None
    masks = None
    if masks_think:
        masks = loss_masks([len(r.completion_ids) for r in mine], [r.think_prefix for r in mine])
    return StepSlice(mine, columns, dropped, masks)


# -------------------------------------------------------------------------------- telemetry


def rollout_view(r: Rollout, close_ids: Sequence[int], stop: set[int]) -> RolloutView:
    """What telemetry counts of a rollout: response, think and answer tokens (the think block
    runs to `close_ids`; a rollout that never closes it is all think), clipped or stopped."""
    ids = r.completion_ids
    body = ids[:-1] if ids and ids[-1] in stop else ids
    think = think_tokens_from_ids(body, close_ids) if close_ids else None
    answer = 0 if think is None else len(body) - think - len(close_ids)
    return RolloutView(
        correct=r.correct,
        closed=r.closed,
        clipped=not ids or ids[-1] not in stop,
        compressed=r.compressed,
        response_tokens=len(ids),
        think_tokens=len(body) if think is None else think,
        answer_tokens=answer,
    )


def pooled_records(groups: Sequence[Group], advantages: Sequence[float]) -> list[PooledRecord]:
    """Every pooled rollout of the groups that hold a compressed copy, with its advantage
    (`advantages`: TRL's, every process's, in pooled order) and its rank in the group; for a
    copy, the steps evicted and, on problems whose steps carry labels, the computation steps
    among them (`traac.training.telemetry.copy_stats`)."""
    out, at = [], 0
    for g in groups:
        mine = [float(a) for a in advantages[at : at + len(g.pooled)]]
        at += len(g.pooled)
        if not any(r.compressed for r in g.pooled):
            continue
        label = labeller_for(g.data_source)
        used = {c.origin: c.result for c in g.compressions if c.used}
        for r, advantage, rank in zip(g.pooled, mine, advantage_ranks(mine), strict=True):
            result = used[r.origin] if r.compressed else None
            compute = None if label is None else 0
            if result is not None and label is not None:
                compute = compute_evicted(result, label([s.text for s in result.steps]))
            evicted = result.n_evicted if result is not None else 0
            out.append(PooledRecord(g.index, g.bin, r.compressed, evicted, compute, r.correct,
                                    advantage, rank))  # fmt: skip
    return out


def reward_means(rewards: np.ndarray, names: Sequence[str]) -> dict[str, float]:
    """Each reward's mean over a step's rows (`rewards`: one row per reward function), leaving
    out the left-out rows, which carry no reward (NaN in every function); NaN if all are."""
    scored = ~np.isnan(rewards).all(axis=0)
    if not scored.any():
        return {name: math.nan for name in names}
    return {name: float(np.nanmean(rewards[k][scored])) for k, name in enumerate(names)}


def step_stats(
    step: TraacStep,
    bins: Sequence[str],
    tokenizer: Any,
    chat_format: ChatFormat,
    eos_ids: Sequence[int],
    seconds: dict[str, float],
    rewards: dict[str, float],
    sampling: str = "none",
    advantages: Sequence[float] | None = None,
) -> StepStats:
    """The telemetry of one step: the pooled group and each difficulty bin; with dynamic
    `sampling` (drop or resample) the groups dropped per scope, with resample what it did; with
    TRL's `advantages` of the pooled rollouts, what the compressed copies did to their groups."""
    close_ids = tokenizer.encode(chat_format.think_close, add_special_tokens=False)
    stop = set(eos_ids)

    def scope(groups: Sequence[Group]) -> Any:
        candidates = [c for g in groups for c in g.compressions]
        return scope_stats(
            [g.pass_rate for g in groups],
            [rollout_view(r, close_ids, stop) for g in groups for r in g.pooled],
            [c.result for c in candidates],
            [c.result for c in candidates if c.used and c.result.compressed],
            sum(g.dropped for g in groups) if sampling != "none" else None,
            [
                KindedCandidate(c.result, label([s.text for s in c.result.steps]), g.tier)
                for g in groups
                if (label := labeller_for(g.data_source)) is not None  # a source that labels
                for c in g.compressions
            ],
        )

    scopes = {ALL: scope(step.groups)}
    for name in bins:
        scopes[name] = scope([g for g in step.groups if g.bin == name])
    counts = {}
    if sampling == "resample":
        counts = {
            "resampled_groups": float(sum(g.resampled for g in step.groups)),
            "resample_rounds": float(step.resample_rounds),
        }
    copies = pooled_records(step.groups, advantages) if advantages is not None else []
    return StepStats(step.step, scopes, seconds, rewards, counts, copies)
