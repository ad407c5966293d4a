"""The cost of test-time thinking's orchestration against the engine's own generation.

On the same prompts (testbed problems, the model's prompt style), batch and sampling, one
loaded model:
  engine   `TransformersBackend.generate`: the engine's own padded `model.generate`;
  traac    `ThinkingBackend` with `--think-budget B` (and `--compress-tau`, if given): the
           engine decodes the think block up to B or the closer, traac appends the auxiliary
           prompt and closer (or probes and prunes), the engine writes the answer.
Throughput = sampled tokens (think block and answer; not the appended text) / wall seconds;
they alternate `--repeats` times and the medians are compared. The figure is the overhead
engine / traac tokens per second (at most 1.1 is the goal): what the second phase's prefill,
the interruption and the Python between the phases cost per token.

    python benchmarks/think_overhead.py                          # quick testbed, budget 24
    python benchmarks/think_overhead.py --model smollm2 --compress-tau 0.4
"""

from __future__ import annotations

import argparse
import sys
import time

from _common import add_model_options, alternate, command, load, load_prompts, machine


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_options(parser, "testbed-quick")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--think-budget", type=int, default=24)
    parser.add_argument("--compress-tau", type=float)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    from traac.evaluation.inference.generation import Sampling, TransformersBackend
    from traac.evaluation.inference.testtime import ThinkingGenerator
    from traac.evaluation.inference.thinking_backend import ThinkingBackend

    path, model, tokenizer = load(args)
    items, prompts = load_prompts(path, tokenizer, f"testbed:easy?n={args.prompts}", args.prompts)
    keys = [f"{item.id}#0" for item in items]
    sampling = Sampling(1.0, 1.0, args.max_new_tokens, 0)
    engine = TransformersBackend(model, tokenizer)
    generator = ThinkingGenerator(
        model, tokenizer, compress_tau=args.compress_tau, think_budget=args.think_budget
    )
    traac = ThinkingBackend(generator)

    def run(backend: object) -> tuple[int, float]:
        tokens, start = 0, time.perf_counter()
        for at in range(0, len(prompts), args.batch_size):
            batch = slice(at, at + args.batch_size)
            for g in backend.generate(prompts[batch], sampling, keys[batch]):  # type: ignore[attr-defined]
                sampled = getattr(g, "reasoning_tokens", None)
                if sampled is None:
                    tokens += len(g.token_ids)
                else:  # think block (opener included) + answer, without the appended text
                    tokens += g.think_tokens + g.answer_tokens
        return tokens, time.perf_counter() - start

    calls = {"engine": lambda: run(engine), "traac": lambda: run(traac)}
    engine_tps, traac_tps = alternate(calls, args.repeats)
    print(f"machine: {machine()}")
    print(command(argv))
    print(f"{args.model}: {args.prompts} prompts, batch {args.batch_size}, {args.max_new_tokens} "
          f"new tokens, think budget {args.think_budget}, compress tau {args.compress_tau}, "
          f"temperature 1.0, median of {args.repeats}")  # fmt: skip
    print(f"engine's own generation {engine_tps:.1f} tok/s, orchestrated {traac_tps:.1f} tok/s, "
          f"overhead engine / orchestrated {engine_tps / traac_tps:.3f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
