"""Wall time of a TRAAC step against a vanilla GRPO step, in one run.

Same model, prompts, seed and sampling settings (by default the testbed recipe's step: 4
prompts x 8 rollouts); the vanilla trainer is TRL's `GRPOTrainer` with the correctness and
format rewards (the length reward needs TRAAC's difficulty bins). Each trainer runs `--warmup`
untimed steps, then `--steps` timed optimizer steps (generation, TRAAC's verification, scoring,
compression and answer regeneration, rewards, loss and update). The two trainers run
alternately (`--rounds`), so load from other jobs on a shared machine drifts over both alike;
TRAAC's own phases (scoring, answer regeneration) are printed too.

    python benchmarks/step_overhead.py [--model testbed] [--steps 5] [--rounds 2] [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback
from trl import GRPOTrainer

from traac.common.models import load_tokenizer, resolve_model_path
from traac.data.training import items_to_dataset, load_training_items
from traac.method.formats import resolve_chat_format
from traac.method.rewards import RewardConfig
from traac.training.config import TRAACConfig
from traac.training.rewards import TraacRewards
from traac.training.telemetry import METRICS_FILE
from traac.training.trainer import TRAACTrainer


class StepTimer(TrainerCallback):
    """Wall time of every optimizer step (`on_step_begin` to `on_step_end`)."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self._start = 0.0

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._start = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.times.append(time.perf_counter() - self._start)


def config(output_dir: str, opts: argparse.Namespace, **overrides: Any) -> TRAACConfig:
    return TRAACConfig(
        output_dir=output_dir,
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
        max_steps=opts.warmup + opts.steps,
        per_device_train_batch_size=opts.prompts * opts.generations,
        num_generations=opts.generations,
        max_completion_length=opts.max_completion_length,
        uniformity_calibration="rank",
        seed=opts.seed,
        **overrides,
    )


def run(trainer: Any, warmup: int) -> list[float]:
    timer = StepTimer()
    trainer.add_callback(timer)
    trainer.train()
    return timer.times[warmup:]


def describe(name: str, times: list[float]) -> str:
    return (
        f"{name}: mean {statistics.mean(times):.2f} s, median {statistics.median(times):.2f} s "
        f"(min {min(times):.2f}, max {max(times):.2f}, {len(times)} steps)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="testbed", help="model dir, hub id, or testbed")
    parser.add_argument("--quick", action="store_true", help="use the quick testbed model")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per trainer and round")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps per trainer and round")
    parser.add_argument("--rounds", type=int, default=2, help="alternating GRPO/TRAAC rounds")
    parser.add_argument("--prompts", type=int, default=4, help="prompts per step")
    parser.add_argument("--generations", type=int, default=8, help="rollouts per prompt")
    parser.add_argument("--max-completion-length", type=int, default=160)
    parser.add_argument("--dataset", default="testbed:all?n=50")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    opts = parser.parse_args()
    torch.set_num_threads(opts.threads)
    model = resolve_model_path("testbed-quick" if opts.quick else opts.model)
    tokenizer = load_tokenizer(model)
    tokenizer.padding_side = "left"
    dataset = items_to_dataset(
        load_training_items(opts.dataset),
        conversational=bool(getattr(tokenizer, "chat_template", None)),
    )
    rewards = TraacRewards(
        RewardConfig.preset("paper", use_length=False),
        chat_format=resolve_chat_format("auto", tokenizer=tokenizer),
    )
    grpo: list[float] = []
    traac: list[float] = []
    phases: dict[str, list[float]] = {}
    # Alternate the two trainers so that load from other jobs drifts over both alike.
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(opts.rounds):
            args = config(f"{tmp}/grpo{r}", opts, mode="cr_lr")
            vanilla = GRPOTrainer(model, rewards.funcs, args, dataset, processing_class=tokenizer)
            grpo += run(vanilla, opts.warmup)
            out = f"{tmp}/traac{r}"
            trainer = TRAACTrainer(model, args=config(out, opts), train_dataset=dataset,
                                   processing_class=tokenizer)  # fmt: skip
            traac += run(trainer, opts.warmup)
            records = [json.loads(x) for x in Path(out, METRICS_FILE).read_text().splitlines()]
            for record in records[opts.warmup :]:
                for key, value in record.items():
                    if key.startswith(("traac/seconds/", "traac/all/compressed_frac")):
                        phases.setdefault(key, []).append(value)
    print(f"model {model}; {opts.prompts} prompts x {opts.generations} rollouts per step, "
          f"max {opts.max_completion_length} tokens; {opts.rounds} alternating rounds of "
          f"{opts.warmup} + {opts.steps} steps per trainer, {opts.threads} thread(s)")  # fmt: skip
    print(describe("vanilla GRPO step", grpo))
    print(describe("TRAAC step       ", traac))
    for key, values in sorted(phases.items()):
        print(f"  TRAAC {key.removeprefix('traac/')}: mean {statistics.mean(values):.3f}")
    ratio = statistics.mean(traac) / statistics.mean(grpo)
    print(f"ratio TRAAC / GRPO (means): {ratio:.2f} (goal <= 1.25)")


if __name__ == "__main__":
    main()
