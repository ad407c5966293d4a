"""`torch.compile` on a CPU for the testbed's step: what it saves a step, and what it costs once.

The testbed GRPO step is half decoding, where a 4-layer, 128-wide model pays its ~150 small
operations a token more than their arithmetic (docs/results.md#testbed-step). Compiling fuses
them. This times, in one process, the step's two kinds of work eagerly and compiled
(`torch.compile(model.forward, dynamic=True)`: the refilled batch changes shape every few
tokens):

- decoding: `decode_refilled` of `--prompts` x `--rollouts` rows, `--max-new-tokens`, the
  recipe's sampling (temperature 1), each call with its own seeds;
- the loss's work: a forward and backward of `--chunk` rows of 60-70 tokens (the recipe's
  log-prob chunk), as training runs it.

Each compiled variant's first call (the compilation: inductor writes C++ and builds it with the
machine's compiler; a warm inductor cache in /tmp shortens a second run's) is printed apart from
the timed calls' median. Decoding checks that both variants sampled the same tokens.

    python benchmarks/compiled_decoding.py [--model testbed] [--calls 5] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from _common import add_model_options, command, load, load_prompts, machine
from traac.common.decoding import RowSampler, decode_refilled


def timed(call: Callable[[int], Any], calls: int) -> tuple[float, list[float], list[Any]]:
    """(first call's seconds, the next `calls` calls' seconds, every call's output)."""
    seconds, outputs = [], []
    for k in range(calls + 1):
        start = time.perf_counter()
        outputs.append(call(k))
        seconds.append(time.perf_counter() - start)
    return seconds[0], seconds[1:], outputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_options(parser, "testbed", threads=1)
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--rollouts", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=160)
    parser.add_argument("--chunk", type=int, default=8, help="rows of a loss forward+backward")
    parser.add_argument("--calls", type=int, default=5, help="timed calls after the first")
    args = parser.parse_args()
    path, model, tokenizer = load(args)
    _, texts = load_prompts(path, tokenizer, "testbed:all?n=100", args.prompts)
    prompts = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]
    rows = [p for p in prompts for _ in range(args.rollouts)]
    stop, pad = {tokenizer.eos_token_id}, tokenizer.pad_token_id

    def decode(k: int) -> list[tuple[list[int], bool]]:
        sampler = RowSampler(1.0, 1.0, [k * len(rows) + r for r in range(len(rows))])
        return decode_refilled(
            model, rows, sampler, max_new_tokens=args.max_new_tokens, stop_ids=stop,
            pad_id=pad, slots=len(rows),
        )  # fmt: skip

    def loss_step(forward: Callable[..., Any]) -> Callable[[int], None]:
        def step(k: int) -> None:
            ids = torch.randint(0, model.config.vocab_size, (args.chunk, 60 + 5 * (k % 3)))
            logits = forward(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
            logits.float().log_softmax(-1).mean().backward()
            model.zero_grad(set_to_none=True)

        return step

    results = {}
    model.eval()
    results["decoding, eager"] = timed(decode, args.calls)
    eager_forward = model.forward
    model.forward = torch.compile(eager_forward, dynamic=True)
    results["decoding, compiled"] = timed(decode, args.calls)
    model.forward = eager_forward
    model.train()
    torch.manual_seed(0)
    results["loss fwd+bwd, eager"] = timed(loss_step(model), args.calls)
    torch.manual_seed(0)
    compiled = torch.compile(model, dynamic=True)
    results["loss fwd+bwd, compiled"] = timed(loss_step(compiled), args.calls)

    same = [a[0] for a in results["decoding, eager"][2]] == [
        a[0] for a in results["decoding, compiled"][2]
    ]
    print(f"machine: {machine()}")
    print(command())
    print(f"{args.prompts} prompts x {args.rollouts} rollouts, {args.max_new_tokens} new tokens; "
          f"loss chunk {args.chunk} rows; {args.calls} timed calls after the first")  # fmt: skip
    print("| work | first call s | median s | eager / compiled |")
    print("|---|---:|---:|---:|")
    for name, (first, seconds, _) in results.items():
        ratio = ""
        if name.endswith("compiled"):
            eager = statistics.median(results[name.replace("compiled", "eager")][1])
            ratio = f"{eager / statistics.median(seconds):.2f}x"
        print(f"| {name} | {first:.3f} | {statistics.median(seconds):.3f} | {ratio} |")
    print(f"decoding sampled the same tokens eager and compiled: {same}")


if __name__ == "__main__":
    main()
