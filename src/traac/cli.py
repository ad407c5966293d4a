"""`traac` command line: a thin dispatcher; each command lives in `traac.commands.<name>`.

Commands import lazily so `traac --help` answers at once, without loading torch.

OpenMP threads wait passively here unless `OMP_WAIT_POLICY` says otherwise: spinning threads
stall each other on a CPU that other jobs share (an evaluation 1.9x slower beside three busy
processes), while a passive wait costs nothing measurable in training and a few percent in
decoding on an idle machine (`benchmarks/threads.py`). OpenMP reads the variable once, when
torch loads, so it is set before any command imports torch.

bitsandbytes, once installed, is imported by peft in every training command; on a CPU with
AVX512-BF16 it logs at import that the optional `kernels` package (faster 4-bit matmuls on the
CPU) is missing. That line is kept out of traac's output.
"""

from __future__ import annotations

import difflib
import importlib
import logging
import os
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from traac import __version__
from traac.errors import TraacError

logging.getLogger("bitsandbytes.backends.cpu.ops").setLevel(logging.ERROR)

COMMANDS: dict[str, str] = {
    "compress": "Score a reasoning trace's steps and prune the least attended ones",
    "testbed": "Build the tiny offline testbed model (traac testbed build)",
    "train": "Train with TRAAC on TRL's GRPO (traac train --config RECIPE.yaml)",
    "eval": "Evaluate accuracy and thinking length on a benchmark, or score responses",
    "report": "Tables and plots across evaluation directories",
    "generate": "Generate with test-time attentive compression",
    "demo": "TRAAC end to end on the CPU testbed",
    "experiment": "Testbed experiments: the paper's ablations, TRAAC against its peers",
    "probe-report": "How well each step scorer finds a model's redundant steps",
    "copies": "What a training run's compressed copies did to their groups (H1)",
    "records": "The kept run records behind a results table: keep them, recompute the table",
}


def _usage() -> str:
    width = max(map(len, COMMANDS))
    rows = "\n".join(f"  {name:<{width}}  {text}" for name, text in COMMANDS.items())
    return (
        f"usage: traac COMMAND [options]\n\ncommands:\n{rows}\n\n"
        "`traac COMMAND --help` for the options of one command."
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0
    if argv[0] == "--version":
        print(f"traac {__version__}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        near = difflib.get_close_matches(name, list(COMMANDS), n=1)
        hint = f"; did you mean {near[0]}?" if near else ""
        print(f"traac: error: unknown command {name!r}{hint} (`traac --help` lists them)",
              file=sys.stderr)  # fmt: skip
        return 2
    try:
        module = importlib.import_module(f"traac.commands.{name.replace('-', '_')}")
        return int(module.main(rest) or 0)
    except TraacError as err:
        print(f"traac {name}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"traac {name}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
