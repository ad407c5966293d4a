"""The per-request sampler's cost against the obvious ways to draw the same distribution.

Every contestant draws one token for each of `--rows` rows of `--vocab` logits:
  traac        `RowSampler` (one seeded stream per request, one uniform a token: inverse CDF);
  row noise    one seeded stream per request, `torch.multinomial`'s own way for one sample
               (the argmax of probs / Exp(1) noise over the whole vocabulary, drawn row by row:
               traac's sampler before 7587523);
  multinomial  one batched `torch.multinomial` from the global generator (what a bare
               `model.generate(do_sample=True)` does; no per-request streams).
They alternate, `--repeats` times each, and the median milliseconds a draw are compared.

    python benchmarks/sampler.py                        # 8 rows of SmolLM2's 49,152 tokens
    python benchmarks/sampler.py --vocab 525            # the testbed's vocabulary
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

import torch

from _common import command, machine, set_threads


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--vocab", type=int, default=49152)
    parser.add_argument("--draws", type=int, default=200, help="draws a timed run (200)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: its default)")
    args = parser.parse_args(argv)
    set_threads(args.threads)

    from traac.evaluation.inference.generation import RowSampler

    torch.manual_seed(0)
    logits = torch.randn(args.rows, args.vocab) * 4
    history = torch.zeros((args.rows, 1), dtype=torch.long)
    sampler = RowSampler(1.0, 1.0, range(args.rows))
    streams = [torch.Generator().manual_seed(s) for s in range(args.rows)]

    def row_noise() -> torch.Tensor:
        probs = torch.softmax(logits, dim=-1)
        noise = torch.empty_like(probs)
        for r, stream in enumerate(streams):
            noise[r].exponential_(generator=stream)
        return probs.div_(noise).argmax(dim=-1)

    calls: dict[str, Callable[[], torch.Tensor]] = {
        "traac": lambda: sampler(history, logits),
        "row noise": row_noise,
        "multinomial": lambda: torch.multinomial(torch.softmax(logits, dim=-1), 1),
    }
    runs: dict[str, list[float]] = {name: [] for name in calls}
    for call in calls.values():
        call()  # warm up
    for _ in range(args.repeats):
        for name, call in calls.items():
            start = time.perf_counter()
            for _ in range(args.draws):
                call()
            runs[name].append((time.perf_counter() - start) / args.draws * 1000)
    ms = {name: statistics.median(times) for name, times in runs.items()}
    print(f"machine: {machine()}")
    print(command(argv))
    print(f"{args.rows} rows of {args.vocab} logits, median of {args.repeats} runs of "
          f"{args.draws} draws")  # fmt: skip
    for name, value in ms.items():
        ratio = "" if name == "traac" else f", {value / ms['traac']:.1f}x traac's"
        print(f"{name}: {value:.2f} ms a draw{ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
