"""What each TRAAC step did, as typed records: the trainer builds a `StepStats` per step, logs it
through TRL's metrics (so `report_to` sees it) and into `metrics.jsonl`; reports read it back
with `read_metrics`.

Per step, for the pooled group (`all`) and each difficulty bin: prompts, pass rate, the share
of the pooled rollouts that are right, response, think and answer tokens (the last two split by
correct and incorrect rollouts, which TRL's one mean length hides), the share clipped at the
maximum length and the share that never closed its think block, what compression did
(candidates, compressed share, steps and tokens removed) and the groups dynamic sampling
dropped. Keys are `traac/<scope>/<field>`, e.g. `traac/easy/think_tokens_correct`; per step,
`traac/sampling/resampled_groups` and `traac/sampling/resample_rounds` say what resampling did,
`traac/copies/...` what the compressed copies did to their groups, whose rollouts the line
lists under `copy_groups` (`traac.training.telemetry.copy_stats`).
docs/telemetry.md lists them all. Every held-out evaluation during training adds a line marked
`"split": "eval"` (`traac.training.trl_adapter.held_out`).
"""

from __future__ import annotations

import json
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from transformers import TrainerCallback
from trl.extras.profiling import profiling_context

from traac.compression.compression import CompressionResult, compression_stats
from traac.training.telemetry.copy_stats import COPY_GROUPS, PooledRecord, step_metrics, to_json
from traac.training.telemetry.metrics_file import (
    EVAL_SPLIT,
    METRICS_FILE,
    metric_rows,
    truncate_metrics,
)

ALL = "all"  # the scope of the whole pooled group
TIERS = ("easy", "medium", "hard")  # the testbed's tiers, whose compute loss is kept apart


@dataclass(frozen=True)
class RolloutView:
    """What telemetry needs of one rollout of a pooled group."""

    correct: bool
    closed: bool
    clipped: bool
    compressed: bool
    response_tokens: int
    think_tokens: int
    answer_tokens: int


@dataclass(frozen=True)
class ScopeStats:
    """One scope (the pooled group, or one difficulty bin) of one step. Means are None where
    the scope has no rollout of that kind."""

    prompts: int
    rollouts: int
    pass_rate: float | None  # mean over prompts of the originals' pass rate
    correct_frac: float | None  # share of the pooled rollouts (compressed copies too) right
    response_tokens: float | None
    think_tokens_correct: float | None
    think_tokens_incorrect: float | None
    answer_tokens_correct: float | None
    answer_tokens_incorrect: float | None
    clipped_frac: float | None
    unclosed_frac: float | None
    compressed_frac: float | None  # share of the pooled rollouts that are compressed copies
    candidates: int  # correct, well-formed originals sent to compression
    compressed_rollouts: int  # of those, the ones that lost steps and were re-answered
    uniformity: float | None  # mean over candidates
    eviction_fraction: float | None  # mean over candidates
    steps_removed: float | None  # mean per compressed rollout
    tokens_removed: float | None  # mean per compressed rollout
    dropped: int | None = None  # groups masked out of the loss by dynamic sampling
    # Testbed prompts only (their steps' kinds are knowable, `traac.common.step_labels`):
    # steps of each kind evicted per compressed candidate, and the share of the candidates'
    # computation steps evicted (what compression costs the answer).
    evicted_compute: float | None = None
    evicted_conclude: float | None = None
    evicted_recheck: float | None = None
    compute_loss: float | None = None
    # The compute loss of the candidates of each testbed tier. A bin mixes tiers: a medium or
    # hard problem its group passed is compressed at the easy bin's tau 0.6, where the probe
    # report compresses each tier at its own tau (docs/results.md, "What compression costs during
    # training").
    compute_loss_easy_tier: float | None = None
    compute_loss_medium_tier: float | None = None
    compute_loss_hard_tier: float | None = None


@dataclass(frozen=True)
class StepStats:
    """The TRAAC telemetry of one training step."""

    step: int
    scopes: dict[str, ScopeStats]
    seconds: dict[str, float] = field(default_factory=dict)
    rewards: dict[str, float] = field(default_factory=dict)
    sampling: dict[str, float] = field(default_factory=dict)  # resampled_groups, resample_rounds
    # Every pooled rollout of the groups that hold a compressed copy
    # (`traac.training.telemetry.copy_stats`)
    copy_groups: list[PooledRecord] = field(default_factory=list)

    def flat(self) -> dict[str, float]:
        """`traac/<scope>/<field>` -> value (None fields left out), plus phase seconds, mean
        rewards, dynamic sampling and the copies' aggregate (`traac/copies/`): TRL's metrics
        dict and, with the copies' records, one line of `metrics.jsonl`."""
        out: dict[str, float] = {}
        for scope, stats in self.scopes.items():
            for key, value in asdict(stats).items():
                if value is not None:
                    out[f"traac/{scope}/{key}"] = float(value)
        out.update({f"traac/seconds/{k}": v for k, v in self.seconds.items()})
        out.update({f"traac/reward/{k}": v for k, v in self.rewards.items()})
        out.update({f"traac/sampling/{k}": v for k, v in self.sampling.items()})
        if self.copy_groups:
            out.update({f"traac/copies/{k}": v for k, v in step_metrics(self.copy_groups).items()})
        return out

    @classmethod
    def from_flat(cls, step: int, row: Mapping[str, Any]) -> StepStats:
        scopes: dict[str, dict[str, Any]] = {}
        seconds, rewards, sampling = {}, {}, {}
        for key, value in row.items():
            parts = key.split("/")
            if len(parts) != 3 or parts[0] != "traac":
                continue
            if parts[1] == "seconds":
                seconds[parts[2]] = value
            elif parts[1] == "reward":
                rewards[parts[2]] = value
            elif parts[1] == "sampling":
                sampling[parts[2]] = value
            elif parts[1] != "copies":  # the copies' aggregate: read from their records
                scopes.setdefault(parts[1], {})[parts[2]] = value
        names = [f.name for f in fields(ScopeStats)]
        ints = {"prompts", "rollouts", "candidates", "compressed_rollouts", "dropped"}
        built = {
            scope: ScopeStats(
                **{n: (int(v[n]) if n in ints else v[n]) if n in v else None for n in names}
            )
            for scope, v in scopes.items()
        }
        copies = [PooledRecord(**r) for r in row.get(COPY_GROUPS, [])]
        return cls(step, built, seconds, rewards, sampling, copies)


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


@dataclass(frozen=True)
class KindedCandidate:
    """A candidate whose steps' kinds are known (`compute`, `conclude`, `recheck`: testbed
    prompts), one per step, and the tier of its problem where the data gives one."""

    result: CompressionResult
    kinds: Sequence[str]
    tier: str | None = None


def kind_stats(labelled: Sequence[KindedCandidate]) -> dict[str, float]:
    """Evicted steps per compressed candidate by kind, and the compute loss, overall and per
    testbed tier, of candidates whose steps carry kinds; empty when none do."""
    evicted: Counter[str] = Counter()
    computes: Counter[str | None] = Counter()
    lost: Counter[str | None] = Counter()
    compressed = 0
    for c in labelled:
        compressed += c.result.compressed
        for step, keep, kind in zip(c.result.steps, c.result.kept, c.kinds, strict=True):
            if step.text:
                computes[c.tier] += kind == "compute"
                lost[c.tier] += kind == "compute" and not keep
                evicted[kind] += not keep
    out = {}
    if compressed:
        out = {f"evicted_{k}": evicted[k] / compressed for k in ("compute", "conclude", "recheck")}
    if computes.total():
        out["compute_loss"] = lost.total() / computes.total()
    for tier in TIERS:
        if computes[tier]:
            out[f"compute_loss_{tier}_tier"] = lost[tier] / computes[tier]
    return out


def scope_stats(
    pass_rates: Sequence[float],
    pooled: Sequence[RolloutView],
    candidates: Sequence[CompressionResult],
    used: Sequence[CompressionResult],
    dropped: int | None = None,
    labelled: Sequence[KindedCandidate] = (),
) -> ScopeStats:
    """Stats of one scope: the pass rates of its prompts, its pooled rollouts, the candidates
    compression scored, the compressions that were used (re-answered), with dynamic sampling
    how many of its groups were dropped, and the candidates whose step kinds are known."""
    right = [r for r in pooled if r.correct]
    wrong = [r for r in pooled if not r.correct]
    done = compression_stats(used)
    return ScopeStats(
        prompts=len(pass_rates),
        rollouts=len(pooled),
        pass_rate=_mean(pass_rates),
        correct_frac=_mean([r.correct for r in pooled]),
        response_tokens=_mean([r.response_tokens for r in pooled]),
        think_tokens_correct=_mean([r.think_tokens for r in right]),
        think_tokens_incorrect=_mean([r.think_tokens for r in wrong]),
        answer_tokens_correct=_mean([r.answer_tokens for r in right]),
        answer_tokens_incorrect=_mean([r.answer_tokens for r in wrong]),
        clipped_frac=_mean([r.clipped for r in pooled]),
        unclosed_frac=_mean([not r.closed for r in pooled]),
        compressed_frac=_mean([r.compressed for r in pooled]),
        candidates=len(candidates),
        compressed_rollouts=len(used),
        uniformity=_mean([c.uniformity for c in candidates]),
        eviction_fraction=_mean([c.eviction_fraction for c in candidates]),
        steps_removed=done.steps_removed / len(used) if used else None,
        tokens_removed=done.tokens_removed / len(used) if used else None,
        dropped=dropped,
        **kind_stats(labelled),
    )


def append_metrics(
    output_dir: str | Path, stats: StepStats, method: Mapping[str, float] | None = None
) -> None:
    """The step's line: its telemetry, the copies' records and the trained method's own metrics
    (`method`, named by it: `adaptthink/no_think_share`), which TRL logs but keeps nowhere."""
    path = Path(output_dir) / METRICS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    line = {"step": stats.step, **stats.flat(), **(method or {})}
    if stats.copy_groups:
        line[COPY_GROUPS] = to_json(stats.copy_groups)
    with path.open("a") as f:
        f.write(json.dumps(line) + "\n")


def append_eval_metrics(output_dir: str | Path, step: int, metrics: Mapping[str, float]) -> None:
    """One held-out evaluation (`traac.training.trl_adapter.held_out`) as a line of `metrics.jsonl`,
    marked `"split": "eval"` so `read_metrics` keeps to the training steps."""
    path = Path(output_dir) / METRICS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write(json.dumps({"step": step, "split": EVAL_SPLIT, **metrics}) + "\n")


def read_metrics(path: str | Path) -> list[StepStats]:
    """The training steps of a `metrics.jsonl` (a line a crash cut short is skipped, and so
    are the held-out evaluations' lines)."""
    return [
        StepStats.from_flat(int(row["step"]), row)
        for row in metric_rows(path)
        if row.get("split") != EVAL_SPLIT
    ]


class MetricsFromStart(TrainerCallback):
    """Keep `metrics.jsonl` to the steps before the one training starts from.

    A run resumed from checkpoint-N redoes the steps after N that a crash left in the file, and
    a fresh run (N = 0) into an existing `output_dir` starts a new file; either way each step
    ends up in the file once. The file is rewritten only to drop those lines.
    """

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if state.is_world_process_zero:
            truncate_metrics(Path(args.output_dir) / METRICS_FILE, state.global_step)
        return control


class StepClock:
    """The time of a step's phases, for TRL's profiling (report_to) and the step's telemetry;
    without a trainer (a step driven by a test's host), the times alone."""

    def __init__(self, trainer: Any = None) -> None:
        self.trainer = trainer
        self.seconds: defaultdict[str, float] = defaultdict(float)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        trainer = self.trainer
        with nullcontext() if trainer is None else profiling_context(trainer, f"traac.{name}"):
            begin = time.perf_counter()
            yield
            self.seconds[name] += time.perf_counter() - begin
