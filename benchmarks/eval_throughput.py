"""`traac eval`'s generation throughput against a bare `model.generate` loop, in one process.

Both sample the same prompts (testbed problems through the model's chat template and traac's
default prompt style), in the same left-padded batches, at temperature 1.0 with the same
`max_new_tokens`, from one loaded model:
  traac  `run_eval` with the transformers backend: per-request seeded sampling, verification,
         records written to disk (what `traac eval` does after loading the model);
  refill the same with `--batching refill`: `--batch-size` rows, each refilled with the next
         prompt as soon as its response ends (traac.evaluation.refill);
  bare   `model.generate(do_sample=True)` over the same batches, nothing else.
Throughput = generated tokens (bare: up to and including each response's end; traac: up to it)
/ wall seconds. They alternate, `--repeats` times each, and the medians are compared: traac /
bare (at least 0.9: the evaluation loop costs little beside decoding) and refill / bare (at
least 1.5: keeping the batch full).

    python benchmarks/eval_throughput.py                     # smollm2, 16 prompts, batch 8
    python benchmarks/eval_throughput.py --model testbed --max-new-tokens 160
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2", help="smollm2, testbed, or a model path")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    args = parser.parse_args(argv)

    import torch

    from traac.common.models import load_model, load_tokenizer, prompt_style_of
    from traac.data.datasets import load_items
    from traac.evaluation.generation import TransformersBackend
    from traac.evaluation.prompts import build_prompt, default_prompt_style
    from traac.evaluation.refill import RefillBackend
    from traac.evaluation.runner import EvalSettings, run_eval
    from traac.pipelines.models import resolve_model

    if args.threads:
        torch.set_num_threads(args.threads)
    path = resolve_model(args.model)
    model, tokenizer = load_model(path, device="cpu"), load_tokenizer(path)
    tokenizer.padding_side = "left"
    style = prompt_style_of(path) or default_prompt_style(tokenizer)
    dataset = f"testbed:easy?n={args.prompts}"
    items = load_items(dataset)[: args.prompts]
    prompts = [build_prompt(item, tokenizer, style) for item in items]
    stops = {tokenizer.eos_token_id, tokenizer.pad_token_id}

    def bare() -> tuple[int, float]:
        tokens, start = 0, time.perf_counter()
        for at in range(0, len(prompts), args.batch_size):
            batch = tokenizer(
                prompts[at : at + args.batch_size],
                return_tensors="pt",
                padding=True,
                add_special_tokens=False,
            )
            with torch.inference_mode():
                out = model.generate(
                    **batch,
                    do_sample=True,
                    temperature=1.0,
                    top_p=1.0,
                    top_k=None,
                    max_new_tokens=args.max_new_tokens,
                    pad_token_id=tokenizer.pad_token_id,
                )
            for row in out[:, batch["input_ids"].shape[1] :].tolist():
                ends = [k for k, t in enumerate(row) if t in stops]
                tokens += ends[0] + 1 if ends else len(row)
        return tokens, time.perf_counter() - start

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

    runs: dict[str, list[float]] = {"bare": [], "traac": [], "refill": []}
    for _ in range(args.repeats):
        for name, call in (("bare", bare), ("traac", traac), ("refill", refill)):
            tokens, seconds = call()
            runs[name].append(tokens / seconds)
            print(f"  {name}: {tokens} tokens in {seconds:.1f} s = {tokens / seconds:.1f} tok/s")
    bare_tps, traac_tps, refill_tps = (statistics.median(runs[k]) for k in runs)
    print(f"machine: {platform.processor() or platform.machine()}, torch {torch.__version__} "
          f"({torch.get_num_threads()} threads)")  # fmt: skip
    print(f"command: python benchmarks/eval_throughput.py {' '.join(argv or sys.argv[1:])}")
    print(
        f"{args.model}: {args.prompts} prompts, batch {args.batch_size}, "
        f"{args.max_new_tokens} new tokens, temperature 1.0, median of {args.repeats}"
    )
    print(f"bare model.generate {bare_tps:.1f} tok/s, traac eval {traac_tps:.1f} tok/s, "
          f"ratio traac / bare {traac_tps / bare_tps:.3f}")  # fmt: skip
    print(f"traac eval --batching refill {refill_tps:.1f} tok/s, "
          f"ratio refill / bare {refill_tps / bare_tps:.3f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
