"""Held-out evaluation during training: accuracy, response length and think length per
difficulty tier, every `eval_steps`.

TRL's evaluation loop samples `num_generations_eval` rollouts of each `eval_dataset` prompt with
the training backend (transformers or vLLM, sharded or not) and computes its own eval metrics;
the TRAAC step verifies those rollouts without compressing them, and `record_held_out` adds each
batch's counts to TRL's eval metrics (`_metrics["eval"]`, which TRL keeps across the batches of
an evaluation). At the end of the loop the counts become, for every tier
the rows carry (`difficulty`: the testbed's easy/medium/hard) and for `all`,
`traac/<tier>/accuracy` (share of rollouts right), `response_tokens` and `think_tokens` (means)
and `rollouts`. They go to TRL's eval logs (`eval_traac/<tier>/...`, so every `report_to`
logger) and, marked `"split": "eval"`, to `metrics.jsonl`. Tiers are the data's own labels, not
the pass-rate bins of training.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from traac.compression.formats import ChatFormat
from traac.training.step.phases import TraacStep, rollout_view
from traac.training.telemetry.step_stats import ALL, RolloutView, append_eval_metrics


@dataclass
class TierCounts:
    """Sums over the rollouts of one tier."""

    rollouts: int = 0
    correct: int = 0
    response_tokens: int = 0
    think_tokens: int = 0

    def add(self, view: RolloutView) -> None:
        self.rollouts += 1
        self.correct += view.correct
        self.response_tokens += view.response_tokens
        self.think_tokens += view.think_tokens


COUNTS = "traac_held_out"  # prefix of the per-batch counts in TRL's eval metrics
FIELDS = ("rollouts", "correct", "response_tokens", "think_tokens")


class HeldOutCounts:
    """The counts of one evaluation, per tier and over `all`."""

    def __init__(self) -> None:
        self.tiers: defaultdict[str, TierCounts] = defaultdict(TierCounts)

    def to_metrics(self, metrics: dict[str, list[float]]) -> None:
        """Append these counts to TRL's per-batch eval metrics (a key per tier and field)."""
        for tier, counts in self.tiers.items():
            for name in FIELDS:
                metrics[f"{COUNTS}/{tier}/{name}"].append(getattr(counts, name))

    @classmethod
    def pop_metrics(cls, metrics: dict[str, list[float]]) -> HeldOutCounts:
        """The counts of every batch `to_metrics` appended, summed, and removed from `metrics`
        (TRL would log their per-batch means)."""
        held_out = cls()
        for key in [k for k in metrics if k.startswith(f"{COUNTS}/")]:
            _, tier, name = key.split("/")
            setattr(held_out.tiers[tier], name, sum(metrics.pop(key)))
        return held_out

    def add(self, tiers: Sequence[str | None], views: Sequence[RolloutView]) -> None:
        for tier, view in zip(tiers, views, strict=True):
            self.tiers[ALL].add(view)
            if tier and tier != ALL:
                self.tiers[tier].add(view)

    def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for tier in sorted(self.tiers, key=lambda t: (t != ALL, t)):
            c = self.tiers[tier]
            out[f"traac/{tier}/accuracy"] = c.correct / c.rollouts
            out[f"traac/{tier}/response_tokens"] = c.response_tokens / c.rollouts
            out[f"traac/{tier}/think_tokens"] = c.think_tokens / c.rollouts
            out[f"traac/{tier}/rollouts"] = float(c.rollouts)
        return out


class HeldOutEvaluation:
    """Mixin of `TRAACTrainer` (before `GRPOTrainer` in its bases): transformers' evaluation
    loop, plus the per-tier metrics of the rollouts it sampled. The annotations below are what
    it reads of the trainer (transformers', TRL's and `TRAACTrainer`'s own attributes), named
    here so that the mixin uses nothing it does not declare."""

    args: Any
    state: Any
    accelerator: Any
    tokenizer: Any
    chat_format: ChatFormat
    eos_token_ids: list[int]
    _metrics: dict[str, dict[str, list[float]]]

    def evaluation_loop(
        self,
        dataloader: Any,
        description: str,
        prediction_loss_only: bool | None = None,
        ignore_keys: list[str] | None = None,
        metric_key_prefix: str = "eval",
    ) -> Any:
        # none left by an interrupted evaluation
        HeldOutCounts.pop_metrics(self._metrics["eval"])
        try:
            output = super().evaluation_loop(  # type: ignore[misc]
                dataloader, description, prediction_loss_only, ignore_keys, metric_key_prefix
            )
        finally:
            metrics = HeldOutCounts.pop_metrics(self._metrics["eval"]).metrics()
        output.metrics.update({f"{metric_key_prefix}_{k}": v for k, v in metrics.items()})
        if self.accelerator.is_main_process:
            append_eval_metrics(self.args.output_dir, self.state.global_step, metrics)
        return output

    def record_held_out(self, step: TraacStep) -> None:
        """Count the verified rollouts of an evaluation batch (every process's groups, each
        counted under its problem's tier) into TRL's eval metrics."""
        close = self.tokenizer.encode(self.chat_format.think_close, add_special_tokens=False)
        stop = set(self.eos_token_ids)
        held_out = HeldOutCounts()
        held_out.add(
            [g.tier for g in step.groups for _ in g.originals],
            [rollout_view(r, close, stop) for g in step.groups for r in g.originals],
        )
        held_out.to_metrics(self._metrics["eval"])
