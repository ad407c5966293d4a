"""Held-out evaluation during training: accuracy, response length and think length per
difficulty tier, every `eval_steps`.

TRL's evaluation loop samples `num_generations_eval` rollouts of each `eval_dataset` prompt with
the training backend (transformers or vLLM, sharded or not) and computes its own eval metrics;
the TRAAC step verifies those rollouts without compressing them and hands them to
`HeldOutEvaluation.record_held_out`. At the end of the loop the counts become, for every tier
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

from accelerate.utils import gather_object

from traac.common.items import Item
from traac.training.step import Rollout, rollout_view
from traac.training.telemetry import ALL, RolloutView, append_eval_metrics


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


class HeldOut:
    """The counts of one evaluation, per tier and over `all`."""

    def __init__(self) -> None:
        self.tiers: defaultdict[str, TierCounts] = defaultdict(TierCounts)

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
    loop, plus the per-tier metrics of the rollouts it sampled."""

    held_out: HeldOut | None = None  # set while an evaluation loop runs

    def evaluation_loop(
        self,
        dataloader: Any,
        description: str,
        prediction_loss_only: bool | None = None,
        ignore_keys: list[str] | None = None,
        metric_key_prefix: str = "eval",
    ) -> Any:
        self.held_out = HeldOut()
        try:
            output = super().evaluation_loop(  # type: ignore[misc]
                dataloader, description, prediction_loss_only, ignore_keys, metric_key_prefix
            )
            metrics = self.held_out.metrics()
        finally:
            self.held_out = None
        output.metrics.update({f"{metric_key_prefix}_{k}": v for k, v in metrics.items()})
        trainer: Any = self
        if trainer.accelerator.is_main_process:
            append_eval_metrics(trainer.args.output_dir, trainer.state.global_step, metrics)
        return output

    def record_held_out(self, items: Sequence[Item], rollouts: Sequence[Rollout]) -> None:
        """Count the verified rollouts of an evaluation batch (`rollouts`: every process's;
        `items`: this process's rows). Every process calls it, in or out of an evaluation."""
        if self.held_out is None:
            return
        trainer: Any = self
        tiers = gather_object([item.tier for item in items])
        close = trainer.tokenizer.encode(trainer.chat_format.think_close, add_special_tokens=False)
        stop = set(trainer.eos_token_ids)
        self.held_out.add(tiers, [rollout_view(r, close, stop) for r in rollouts])
