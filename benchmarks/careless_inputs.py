"""How long a careless command takes to say what is wrong, as a user runs it (a fresh process).

    python benchmarks/careless_inputs.py [--before OLD_SRC] [--timeout 60] [--primed]

Each case runs as `python -m traac.cli ...` with this checkout's `src` (and, with `--before`,
with another checkout's `src`, e.g. `git archive a401353 src | tar -x -C /tmp/old`), in an
empty directory with an empty traac cache and the hub offline; a case that has not exited
after `--timeout` seconds is stopped (before this change some started to train). With
`--primed` the cache holds TRL's field list, as after any earlier `traac train` on the machine
(one full parse, timed and printed first); without it, checkouts before the field list was read
off the sources (`traac.pipelines.recipe_fields`) wait for that parse to name a misspelt field.
Prints per case the seconds to exit, the exit code and the number of stderr lines. The tests
(tests/test_careless_inputs.py) check the behaviour; this measures the time only.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from _common import command, fresh_process, machine

ROOT = Path(__file__).resolve().parents[1]
TYPO_RECIPE = "model_name_or_path: testbed\nlearning_rte: 1.0e-5\n"
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
]  # fmt: skip


PRIME = "from traac.pipelines.train import build_parser; build_parser().parse_args_and_config([])"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="another checkout's src to compare with")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds a case may run")
    parser.add_argument("--primed", action="store_true", help="TRL's field list cached first")
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
    for argv in CASES:
        cells = []
        for name, src in columns:
            done = fresh_process(["-m", "traac.cli", *argv], src, caches[name], args.timeout,
                                 files={"typo.yaml": TYPO_RECIPE})  # fmt: skip
            cells.append(f"{done.seconds:.1f} | {done.code} | {done.stderr_lines}")
        print(f"| traac {' '.join(argv)} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
