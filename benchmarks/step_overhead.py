"""Wall time of a TRAAC step against a vanilla GRPO step, and of TRAAC's telemetry, in one run.

Same model, prompts, seed and sampling settings (by default the testbed recipe's step: 4
prompts x 8 rollouts); the vanilla trainer is TRL's `GRPOTrainer` with the correctness and
format rewards (the length reward needs TRAAC's difficulty bins). TRAAC runs twice: as shipped,
and with its telemetry switched off (`_log_step` skipped: no `step_stats`, no `traac/...` keys
in TRL's metrics, no `metrics.jsonl`). Each trainer runs `--warmup` untimed steps, then
`--steps` timed optimizer steps, each from one step's start to the next's (generation, TRAAC's
verification, scoring, compression and answer regeneration, rewards, loss, update and TRL's
logging). The trainers run alternately (`--rounds`), so load from other jobs on a shared machine
drifts over all alike; TRAAC's own phases (scoring, answer regeneration) are printed too.

The telemetry's share of a step is measured two ways: directly, as the time of `_log_step` plus
what its keys add to TRL's `log` (with against without), over the TRAAC step; and as the A/B
ratio of the two TRAAC trainers' step times, which carries the machine's noise.

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

from trl import GRPOTrainer

from _common import (
    add_model_options,
    add_step_options,
    command,
    machine,
    set_threads,
    step_config,
    timed_train,
    training_data,
)
from traac.compression.formats import resolve_chat_format
from traac.compression.rewards import RewardSettings
from traac.pipelines.model_registry import resolve_model
from traac.training.methods.traac_rewards import TraacRewards
from traac.training.telemetry.metrics_file import METRICS_FILE
from traac.training.trl_adapter.trainer import TRAACTrainer

CALIBRATION = {"traac": {"uniformity_calibration": "rank"}}  # both trainers alike


class TimedTRAAC(TRAACTrainer):
    """TRAAC timing its telemetry (`_log_step`) and TRL's logging (`log`) per call; with
    `telemetry=False` the telemetry is skipped."""

    def __init__(self, *args: Any, telemetry: bool = True, **kwargs: Any) -> None:
        self.bench_telemetry = telemetry
        self.telemetry_seconds: list[float] = []
        self.log_seconds: list[float] = []
        super().__init__(*args, **kwargs)

    def _log_step(self, step: Any) -> None:
        if not self.bench_telemetry:
            return
        begin = time.perf_counter()
        super()._log_step(step)
        self.telemetry_seconds.append(time.perf_counter() - begin)

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        begin = time.perf_counter()
        super().log(logs, start_time)
        self.log_seconds.append(time.perf_counter() - begin)


def describe(name: str, times: list[float]) -> str:
    return (
        f"{name}: mean {statistics.mean(times):.2f} s, median {statistics.median(times):.2f} s "
        f"(min {min(times):.2f}, max {max(times):.2f}, {len(times)} steps)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_options(parser, "testbed", threads=1)
    parser.add_argument("--quick", action="store_true", help="use the quick testbed model")
    add_step_options(
        parser, steps=5, rounds=2, prompts=4, generations=8, max_completion_length=160,
        dataset="testbed:all?n=50",
    )  # fmt: skip
    opts = parser.parse_args()
    set_threads(opts.threads)
    model = resolve_model("testbed-quick" if opts.quick else opts.model)
    tokenizer, dataset = training_data(model, opts.dataset)
    rewards = TraacRewards(
        RewardSettings.preset("paper"),
        chat_format=resolve_chat_format("auto", tokenizer=tokenizer),
    )
    grpo: list[float] = []
    traac: list[float] = []
    silent: list[float] = []  # TRAAC with its telemetry off
    telemetry: list[float] = []  # `_log_step` per timed step
    log_times: dict[bool, list[float]] = {True: [], False: []}  # TRL `log`, telemetry on/off
    phases: dict[str, list[float]] = {}
    timed = slice(opts.warmup, opts.warmup + opts.steps)
    # Alternate the trainers so that load from other jobs drifts over all alike.
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(opts.rounds):
            args = step_config(f"{tmp}/grpo{r}", opts, mode="cr_lr", **CALIBRATION)
            funcs = [rewards.correctness_reward, rewards.format_reward]
            vanilla = GRPOTrainer(model, funcs, args, dataset, processing_class=tokenizer)
            grpo += timed_train(vanilla, opts.warmup)
            for on in (True, False):
                out = f"{tmp}/traac{r}{'' if on else '-silent'}"
                config = step_config(out, opts, **CALIBRATION)
                trainer = TimedTRAAC(model, args=config, train_dataset=dataset,
                                     processing_class=tokenizer, telemetry=on)  # fmt: skip
                (traac if on else silent).extend(timed_train(trainer, opts.warmup))
                log_times[on] += trainer.log_seconds[timed]
                telemetry.extend(trainer.telemetry_seconds[timed])
            records = [
                json.loads(x) for x in Path(tmp, f"traac{r}", METRICS_FILE).read_text().splitlines()
            ]
            for record in records[opts.warmup :]:
                for key, value in record.items():
                    if key.startswith(("traac/seconds/", "traac/all/compressed_frac")):
                        phases.setdefault(key, []).append(value)
    print(f"machine: {machine()}")
    print(command())
    print(f"model {model}; {opts.prompts} prompts x {opts.generations} rollouts per step, "
          f"max {opts.max_completion_length} tokens; {opts.rounds} alternating rounds of "
          f"{opts.warmup} + {opts.steps} steps per trainer, {opts.threads} thread(s)")  # fmt: skip
    print(describe("vanilla GRPO step         ", grpo))
    print(describe("TRAAC step                ", traac))
    print(describe("TRAAC step, telemetry off ", silent))
    for key, values in sorted(phases.items()):
        print(f"  TRAAC {key.removeprefix('traac/')}: mean {statistics.mean(values):.3f}")
    ratio = statistics.mean(traac) / statistics.mean(grpo)
    print(f"ratio TRAAC / GRPO (means): {ratio:.2f} (goal <= 1.25)")
    own = statistics.mean(telemetry)
    log_on, log_off = statistics.mean(log_times[True]), statistics.mean(log_times[False])
    share = (own + log_on - log_off) / statistics.mean(traac)
    print(
        f"telemetry: _log_step {1000 * own:.1f} ms/step, TRL log {1000 * log_on:.1f} ms with its "
        f"keys vs {1000 * log_off:.1f} ms without: {100 * share:.2f}% of a TRAAC step "
        "(goal <= 2%)"
    )
    ab = statistics.mean(traac) / statistics.mean(silent)
    print(f"A/B: TRAAC step with / without telemetry (means): {ab:.3f} (machine noise included)")


if __name__ == "__main__":
    main()
