"""Does more SFT, or a curriculum, teach the long testbed its arithmetic? Cheap trials first.

More SFT: continues the cached `traac testbed build --long POSITION` model (563 SFT steps,
2-8% accuracy) in chunks of fresh teacher traces (a new SFT seed a chunk, so new problems, not
epochs), each chunk the build's own SFT (`traac.testbed.build`, a cosine from its learning
rate), and measures the card's per-tier accuracy (`traac.testbed.measure`) after each chunk:
accuracy against the total SFT steps, without paying for a from-scratch build at each length.

A curriculum (`--curriculum N`): a fresh model (the build's tokenizer and architecture) first
learns N chains with no redundant unit (the same long grammar; both positions write the same
trace when there is none), is measured, then learns the build's own traces and is measured again.

A mix (`--mix N`): a fresh model learns N chains with no unit and `--chunk-traces` long traces
shuffled together, in one stage (`--mix 0`: the long traces alone, at any scale and batch).

    nice -n 19 python benchmarks/long_build_trial.py --position interleaved --chunks 3
    nice -n 19 python benchmarks/long_build_trial.py --position interleaved --curriculum 9000
    nice -n 19 python benchmarks/long_build_trial.py --mix 18000 --chunk-traces 18000 --batch 32
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from traac.common.progress import NullProgress, quiet_libraries
from traac.testbed.build import (
    _corpus,
    _init_model,
    _train,
    cache_path,
    sft_records,
    teacher_traces,
)
from traac.testbed.config import TestbedSettings, long_config
from traac.testbed.measure import measure
from traac.testbed.tokenizer import build_tokenizer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--position", default="interleaved", choices=("trailing", "interleaved"))
    parser.add_argument("--chunks", type=int, default=3)
    parser.add_argument("--chunk-traces", type=int, default=6_000)
    parser.add_argument("--learning-rate", type=float, default=None)
    parser.add_argument("--curriculum", type=int, default=0, help="chains with no unit first")
    parser.add_argument("--curriculum-batch", type=int, default=16, help="their batch size")
    parser.add_argument("--then-lr", type=float, default=None, help="the long traces' peak lr")
    parser.add_argument(
        "--mix", type=int, default=None, help="one stage, a fresh model: this many chains with no "
        "unit shuffled into --chunk-traces long traces (0: the long traces alone)"
    )  # fmt: skip
    parser.add_argument("--batch", type=int, default=None, help="--mix's batch size")
    parser.add_argument("--carry", action="store_true", help="needed steps carry the chain's rest")
    parser.add_argument("--out", type=Path, default=None, help="JSON lines, one per chunk")
    parser.add_argument("--save", type=Path, default=None, help="the last stage's model, here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    base = long_config(args.position)
    if args.carry:
        base = replace(base, teacher=replace(base.teacher, carry=True))
    train = replace(base.train, n_traces=args.chunk_traces)
    if args.learning_rate is not None:
        train = replace(train, learning_rate=args.learning_rate)
    if args.mix is not None:
        torch.manual_seed(base.seed)
        entries, traces = teacher_traces(base)
        tokenizer = build_tokenizer(_corpus(entries, traces), base.model.vocab_size)
        model, steps = _init_model(base, tokenizer), 0
        long = replace(base, train=replace(train, batch_size=args.batch or train.batch_size))
        bare = replace(base.teacher, min_redundant=0, max_redundant=0)
        parts = [
            replace(
                long,
                seed=base.seed + 100,
                teacher=bare,
                train=replace(long.train, n_traces=args.mix),
            )
        ]
        stages = [[*parts[: bool(args.mix)], long]]
    elif args.curriculum:
        torch.manual_seed(base.seed)
        entries, traces = teacher_traces(base)
        tokenizer = build_tokenizer(_corpus(entries, traces), base.model.vocab_size)
        model, steps = _init_model(base, tokenizer), 0
        bare = replace(base.teacher, min_redundant=0, max_redundant=0)
        first = replace(train, n_traces=args.curriculum, batch_size=args.curriculum_batch)
        then = replace(base.train, learning_rate=args.then_lr or base.train.learning_rate)
        stages = [
            [replace(base, seed=base.seed + 100, teacher=bare, train=first)],
            [replace(base, train=then)],
        ]
    else:
        source = cache_path(base)
        if not (source / "testbed_card.json").exists():
            raise SystemExit(f"no cached build at {source}; run `traac testbed build --long ...`")
        model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(source)
        steps = json.loads((source / "testbed_card.json").read_text())["train"]["steps"]
        stages = [
            [replace(base, seed=base.seed + k, train=train)] for k in range(1, args.chunks + 1)
        ]
    _run(stages, model, tokenizer, base, steps, args.out)
    if args.save:
        model.save_pretrained(args.save)
        tokenizer.save_pretrained(args.save)


def _run(
    stages: list[list[TestbedSettings]], model, tokenizer, base: TestbedSettings, steps: int, out
) -> None:
    """Each stage's SFT (its parts' traces together, the last part's schedule), then the card's
    measurement."""
    scratch = Path(tempfile.mkdtemp(prefix="long-trial-"))
    try:
        for chunk, parts in enumerate(stages, 1):
            started, cpu = time.perf_counter(), time.process_time()
            config = parts[-1]
            with quiet_libraries():
                records = [
                    r for part in parts for r in sft_records(*teacher_traces(part), tokenizer)
                ]
                model.train()
                info = _train(model, tokenizer, records, config, scratch / f"chunk{chunk}",
                              NullProgress())  # fmt: skip
                steps += info["steps"]
                sft = (round(time.perf_counter() - started, 1), round(time.process_time() - cpu, 1))
                measured = measure(model, tokenizer, base)
            row = {
                "chunk": chunk,
                "traces": [part.train.n_traces for part in parts],
                "units": [[p.teacher.min_redundant, p.teacher.max_redundant] for p in parts],
                "batch": config.train.batch_size,
                "total_steps": steps,
                "final_loss": info["final_loss"],
                "sft_wall_cpu_s": sft,
                "wall_s": round(time.perf_counter() - started, 1),
                "load_average": [round(x, 2) for x in os.getloadavg()],
                "tiers": {
                    tier: {k: v for k, v in row.items() if k != "step_kinds"}
                    | {
                        "redundant": row["step_kinds"]["redundant_share"],
                        "other": row["step_kinds"]["shares"].get("other", 0.0),
                    }
                    for tier, row in measured["tiers"].items()
                },
            }
            print(json.dumps(row), flush=True)
            if out:
                with out.open("a") as f:
                    f.write(json.dumps(row) + "\n")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
