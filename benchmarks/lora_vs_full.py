"""LoRA against full fine-tuning on one model, in one run: peak memory, seconds per TRAAC step,
trainable parameters.

Each variant trains in its own subprocess (so each peak RSS is that process's own, model load
included) with the same recipe: the testbed recipe's TRAAC settings (KL 0.04 against the
reference, the attention probe on the reference model), the same prompts, seed and sampling.
Full fine-tuning holds the policy, TRL's reference copy and AdamW's two moments of every
weight; LoRA holds the base once (the reference and the scoring model are the policy with its
adapters disabled) and trains rank-`--lora-r` adapters on `--targets`. Each runs `--warmup`
untimed steps, then `--steps` timed ones (each from one step's start to the next's). Rounds
alternate the variants (`--rounds`), so load from other jobs drifts over both alike.

    python benchmarks/lora_vs_full.py [--model smollm2] [--steps 3] [--rounds 1]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
from typing import Any

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
from traac.pipelines.model_registry import resolve_model
from traac.training.planning.lora import LoraArguments
from traac.training.trl_adapter.trainer import TRAACTrainer

VARIANTS = ("full", "lora")


def child(opts: argparse.Namespace) -> dict[str, Any]:
    """Train one variant in this process; its step times, parameters and peak RSS."""
    model = resolve_model(opts.model)
    tokenizer, dataset = training_data(model, opts.dataset)
    lora = LoraArguments(
        use_peft=opts.child == "lora", lora_r=opts.lora_r, lora_alpha=2 * opts.lora_r,
        lora_dropout=0.0, lora_target_modules=opts.targets,
    )  # fmt: skip
    with tempfile.TemporaryDirectory() as out:
        config = step_config(
            out, opts, learning_rate=5e-5, beta=0.04, mode="traac",
            traac={"scorer": "attention", "scoring_model": "reference", "probe_heads": "gated"},
        )  # fmt: skip
        trainer = TRAACTrainer(
            model, args=config, train_dataset=dataset, processing_class=tokenizer,
            **lora.trainer_kwargs(bf16=False),
        )  # fmt: skip
        times = timed_train(trainer, opts.warmup)
        policy = trainer.accelerator.unwrap_model(trainer.model)
        params = list(policy.parameters())
    return {
        "variant": opts.child,
        "times": times,
        "trainable": sum(p.numel() for p in params if p.requires_grad),
        "total": sum(p.numel() for p in params),
        "reference_copy": trainer.ref_model is not None,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,  # KiB on Linux
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_options(parser, "smollm2", threads=1)
    add_step_options(
        parser, steps=3, rounds=1, prompts=2, generations=4, max_completion_length=64,
        dataset="testbed:easy?n=32",
    )  # fmt: skip
    parser.add_argument("--lora-r", type=int, default=16)
    parser.add_argument("--targets", nargs="+", default=["q_proj", "k_proj", "v_proj", "o_proj"])
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    set_threads(opts.threads)
    if opts.child:
        print(json.dumps(child(opts)))
        return
    print(command())
    print(f"machine before: {machine()}")
    results: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
    for _ in range(opts.rounds):
        for variant in VARIANTS:
            done = subprocess.run(
                [sys.executable, __file__, *sys.argv[1:], "--child", variant],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            if done.returncode != 0:
                sys.exit(f"{variant} failed:\n{done.stderr[-2000:]}")
            results[variant].append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(f"machine after:  {machine()}")
    targets = " ".join(opts.targets)
    print(f"model {opts.model}; {opts.prompts} prompts x {opts.generations} rollouts per step, "
          f"max {opts.max_completion_length} tokens; {opts.rounds} round(s) of {opts.warmup} + "
          f"{opts.steps} steps per variant; LoRA r {opts.lora_r} on {targets}")  # fmt: skip
    rows = {}
    for variant, runs in results.items():
        times = [t for r in runs for t in r["times"]]
        rows[variant] = {
            "rss": max(r["peak_rss_mb"] for r in runs),
            "step": statistics.mean(times),
            "median": statistics.median(times),
            "trainable": runs[0]["trainable"],
            "total": runs[0]["total"],
            "reference": runs[0]["reference_copy"],
        }
    print("| | peak RSS MB | mean s/step | median s/step | trainable params | of all | "
          "reference copy |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---|")
    for variant, row in rows.items():
        print(f"| {variant} | {row['rss']:.0f} | {row['step']:.2f} | {row['median']:.2f} | "
              f"{row['trainable']:,} | {100 * row['trainable'] / row['total']:.2f}% | "
              f"{'yes' if row['reference'] else 'no'} |")  # fmt: skip
    full, lora = rows["full"], rows["lora"]
    print(f"ratio LoRA / full: peak RSS {lora['rss'] / full['rss']:.2f}, "
          f"s/step {lora['step'] / full['step']:.2f}, "
          f"trainable params {lora['trainable'] / full['trainable']:.4f}")  # fmt: skip


if __name__ == "__main__":
    main()
