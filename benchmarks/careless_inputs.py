"""How long a careless command takes to say what is wrong, as a user runs it (a fresh process).

    python benchmarks/careless_inputs.py [--before OLD_SRC] [--timeout 60] [--primed] [--lines]

Each case runs as `python -m traac.cli ...` with this checkout's `src` (and, with `--before`,
with another checkout's `src`, e.g. `git archive a401353 src | tar -x -C /tmp/old`), in an
empty directory with an empty traac cache and the hub offline; a case that has not exited
after `--timeout` seconds is stopped (before this change some started to train). With
`--primed` one full parse runs first (timed and printed): the checkouts that cached TRL's field
list then hold it, as after any earlier `traac train` on the machine; without it, checkouts
before the field list was read off the sources (`traac.pipelines.recipe_fields`) wait for that
parse to name a misspelt field (later ones read it off the sources and cache none).
Prints per case the seconds to exit, the exit code and the number of stderr lines, and with
`--lines` the line the user reads. The cases after the first block are one of each kind of
issue 60 (a recipe that says more than it does, an output that cannot be written, a check that
needs only config.json, the Python API, an input that is not what the command reads, advice
that must lead to the fix). The tests (tests/test_careless_inputs.py) check the behaviour;
this measures the time only.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from _common import command, fresh_process, machine

ROOT = Path(__file__).resolve().parents[1]
TYPO_RECIPE = "model_name_or_path: testbed\nlearning_rte: 1.0e-5\n"
TESTBED = str(ROOT / "recipes" / "testbed.yaml")
# A model directory of config.json alone: enough for every check that needs no weights.
CONFIG_ONLY = '{"model_type": "qwen3", "num_hidden_layers": 2, "vocab_size": 64}'
# The API case: the one exception it raises, printed as its message (exit 2), as a caller sees it
API = """
import sys
from datasets import Dataset
from traac import TraacError, TRAACConfig, TRAACTrainer
try:
    TRAACTrainer("testbed-tiny", reward_funcs=42, args=TRAACConfig(output_dir="o", use_cpu=True),
                 train_dataset=Dataset.from_list([{"prompt": "1+1=", "answer": "2"}]))
except TraacError as err:
    sys.exit(f"{type(err).__name__}: {err}")
"""
FILES = {
    "typo.yaml": TYPO_RECIPE,
    "twice.yaml": "max_steps: 2\nbeta: 0.1\nmax_steps: 5\n",
    "a-file": "",
    "m/config.json": CONFIG_ONLY,
    "run/metrics.jsonl": "step,loss\n1,0.5\n",
}
CASES = [
    ["train", "--max_steps", "-5"],
    ["train", "--num_generations", "0", "--dry-run"],
    ["train", "--max_ste", "5", "--dry-run"],
    ["train", "--config", "typo.yaml", "--dry-run"],
    ["train", "--model_name_or_path", "testbd", "--dry-run"],
    ["eval", "--num_samples", "0", "--model", "testbed", "--dataset", "testbed:easy", "--output",
     "o"],
    ["generate", "--model", "testbd", "--prompt", "hi"],
    ["demo", "--eval-n", "0"],
    ["compress", "--input", "x.txt", "--batch-size", "0"],
    ["experiment", "compare", "--seeds", "-1"],
    ["probe-report", "--eval-n", "0"],
    # issue 60, kind 1: a recipe that says more than it does
    ["train", "--config", "twice.yaml", "--dry-run"],
    ["train", "--config", TESTBED, "--mode", "cr_lr", "--traac.scorer", "random", "--dry-run"],
    # kind 2: an output that cannot be written
    ["train", "--config", TESTBED, "--output-dir", "a-file", "--dry-run"],
    ["experiment", "ablations", "--quick", "--variants", "CR", "--seeds", "0", "--config",
     TESTBED, "--output", "out", "--runs", "a-file"],
    # kind 3: checks that need only config.json
    ["eval", "--model", "m", "--dataset", "testbed:easy?n=1", "--output", "o", "--compress-tau",
     "0.4", "--probe-layers", "5"],
    # kind 4: the Python API (run as `python -c`)
    ["-c", API],
    # kind 5: inputs that are not what the command reads
    ["copies", "run"],
    ["report", "run", "run"],
    # kind 6: advice that leads to the fix
    ["testbed", "show", "--quick"],
]  # fmt: skip


PRIME = "from traac.pipelines.train import build_parser; build_parser().parse_args_and_config([])"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="another checkout's src to compare with")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds a case may run")
    parser.add_argument("--primed", action="store_true", help="TRL's field list cached first")
    parser.add_argument("--lines", action="store_true", help="print each case's stderr line")
    args = parser.parse_args()
    print(machine())
    print(command())
    columns = [("after", ROOT / "src")] + ([("before", args.before)] if args.before else [])
    caches = {name: Path(tempfile.mkdtemp()) for name, _ in columns}  # empty: nothing built
    if args.primed:
        for name, src in columns:
            done = fresh_process(["-c", PRIME], src, caches[name], 600)
            print(f"{name}: one full parse (caches the field list) {done.seconds:.1f} s, "
                  f"exit {done.code}")  # fmt: skip
    print("| command | " + " | ".join(f"{n} s | {n} exit | {n} stderr lines" for n, _ in columns)
          + " |")  # fmt: skip
    print("|---|" + "---:|---:|---:|" * len(columns))
    said = []
    for argv in CASES:
        cells = []
        run = argv if argv[0] == "-c" else ["-m", "traac.cli", *argv]
        for name, src in columns:
            done = fresh_process(run, src, caches[name], args.timeout, files=FILES)
            cells.append(f"{done.seconds:.1f} | {done.code} | {done.stderr_lines}")
            said.append(f"{name}: {done.last_line}")
        shown = "python -c API" if argv[0] == "-c" else f"traac {' '.join(argv)}"
        print(f"| {shown.replace(str(ROOT) + '/', '')} | " + " | ".join(cells) + " |", flush=True)
    if args.lines:
        print("\nthe line each case printed last on stderr, in order:")
        print("\n".join(said))


if __name__ == "__main__":
    main()
