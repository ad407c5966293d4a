"""`traac eval`'s generation throughput against a bare `model.generate` loop, in one process.

Both sample the same prompts (the first `--prompts` items of `--dataset`, by default easy testbed
problems, through the model's chat template and traac's default prompt style), in the same
left-padded batches, at temperature 1.0 with the same
`max_new_tokens`, from one loaded model:
  traac  `run_eval` with the transformers backend: per-request seeded sampling, verification,
         records written to disk (what `traac eval` does after loading the model);
  refill the same with `--batching refill`: `--batch-size` rows, each refilled with the next
         prompt as soon as its response ends (traac.evaluation.inference.refill);
  bare   `model.generate(do_sample=True)` over the same batches, nothing else;
  generate_batch  transformers' continuous batching (`model.generate_batch`, at most
         `--batch-size` requests at a time), sampling from the global generator: its tokens
         depend on which requests share a step, so it cannot repeat traac's per-request
         seeded draws (run only when named in `--runs`).
Throughput = generated tokens (bare, generate_batch: up to and including each response's end;
traac: up to it) / wall seconds. The runs named in `--runs` alternate, `--repeats` times each,
and the medians are compared with bare: traac / bare (at least 0.9: the evaluation loop costs
little beside decoding) and refill / bare (at least 1.5: keeping the batch full).

    python benchmarks/eval_throughput.py                     # smollm2, 16 prompts, batch 8
    python benchmarks/eval_throughput.py --model testbed --max-new-tokens 160
    python benchmarks/eval_throughput.py --dataset 'testbed:all?n=16'   # all three tiers
    python benchmarks/eval_throughput.py --runs bare,refill,generate_batch --model testbed
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import (
    add_model_options,
    alternate,
    command,
    generate_batches,
    load,
    load_prompts,
    machine,
    prompt_style,
)

RUNS = ("bare", "traac", "refill", "generate_batch")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_options(parser, "smollm2")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument(
        "--dataset", help="what `traac eval --dataset` takes (default: testbed:easy?n=PROMPTS)"
    )
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--runs",
        default="bare,traac,refill",
        help=f"comma-separated, of {', '.join(RUNS)} (default: bare,traac,refill)",
    )
    args = parser.parse_args(argv)
    runs = args.runs.split(",")
    if not runs or any(r not in RUNS for r in runs) or len(set(runs)) < len(runs):
        parser.error(f"--runs: {args.runs!r}; name each once, of {', '.join(RUNS)}")

    from transformers import GenerationConfig
    from transformers.generation.configuration_utils import ContinuousBatchingConfig

    from traac.evaluation.harness.runner import EvalSettings, run_eval
    from traac.evaluation.inference.generation import TransformersBackend
    from traac.evaluation.inference.refill import RefillBackend

    path, model, tokenizer = load(args)
    dataset = args.dataset or f"testbed:easy?n={args.prompts}"
    style = prompt_style(path, tokenizer)
    _, prompts = load_prompts(path, tokenizer, dataset, args.prompts)
    stops = {tokenizer.eos_token_id, tokenizer.pad_token_id}

    def bare() -> tuple[int, float]:
        start = time.perf_counter()
        rows = generate_batches(
            model, tokenizer, prompts, args.batch_size,
            do_sample=True, temperature=1.0, top_p=1.0, top_k=None,
            max_new_tokens=args.max_new_tokens,
        )  # fmt: skip
        ends = (next((k + 1 for k, t in enumerate(row) if t in stops), len(row)) for row in rows)
        return sum(ends), time.perf_counter() - start

    def evaluate(make: Any) -> tuple[int, float]:
        settings = EvalSettings(
            dataset=dataset, model=path, prompt_style=style, max_new_tokens=args.max_new_tokens
        )
        with tempfile.TemporaryDirectory() as out:
            start = time.perf_counter()
            result = run_eval(
                settings,
                Path(out) / "run",
                num_samples=1,
                limit=args.prompts,
                batch_size=args.batch_size,
                make_backend=make,
                tokenizer=tokenizer,
            )
            seconds = time.perf_counter() - start
        return sum(r.response_tokens for r in result.records), seconds

    def traac() -> tuple[int, float]:
        return evaluate(lambda tok: TransformersBackend(model, tok))

    def refill() -> tuple[int, float]:
        return evaluate(lambda tok: RefillBackend(model, tok, args.batch_size))

    def generate_batch() -> tuple[int, float]:
        ids = [tokenizer.encode(p, add_special_tokens=False) for p in prompts]
        config = GenerationConfig(
            do_sample=True, temperature=1.0, top_p=1.0, top_k=None,
            max_new_tokens=args.max_new_tokens, eos_token_id=sorted(stops),
            pad_token_id=tokenizer.pad_token_id,
        )  # fmt: skip
        start = time.perf_counter()
        out = model.generate_batch(
            ids,
            generation_config=config,
            continuous_batching_config=ContinuousBatchingConfig(
                max_requests_per_batch=args.batch_size
            ),
        )
        seconds = time.perf_counter() - start
        return sum(len(o.generated_tokens) for o in out.values()), seconds

    everything = {"bare": bare, "traac": traac, "refill": refill, "generate_batch": generate_batch}
    rates = dict(zip(runs, alternate({r: everything[r] for r in runs}, args.repeats), strict=True))
    print(f"machine: {machine()}")
    print(command(argv))
    print(
        f"{args.model}: {len(prompts)} prompts of {dataset}, batch {args.batch_size}, "
        f"{args.max_new_tokens} new tokens, temperature 1.0, median of {args.repeats}"
    )
    names = {
        "bare": "bare model.generate",
        "traac": "traac eval",
        "refill": "traac eval --batching refill",
        "generate_batch": "model.generate_batch (continuous batching)",
    }
    for run, rate in rates.items():
        compared = "bare" in rates and run != "bare"
        ratio = f", ratio {run} / bare {rate / rates['bare']:.3f}" if compared else ""
        print(f"{names[run]} {rate:.1f} tok/s{ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
