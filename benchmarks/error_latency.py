"""How long a one-line error takes to appear, against the floor of starting Python at all.

    python benchmarks/error_latency.py [--rounds 3] [--before OLD_SRC]

Each case runs as a user runs it: a fresh `python -m traac.cli ...` with this checkout's `src`
(and, with `--before`, another checkout's, e.g. `git archive a9d7fe7 src | tar -x -C /tmp/old`),
in an empty directory with an empty traac cache (a fresh install: no field list from an earlier
parse) and the hub offline. `python -c pass` runs in the same rounds, interleaved with the cases,
so a busy machine slows both alike: the ratio to it says what traac adds, the seconds what a
user waits; the CPU seconds (user + system) change less with the load than the wall time. Prints
the median of the rounds per case, the exit code and the number of stderr lines, and the load
average before and after. The tests (tests/test_careless_inputs.py) check
the one line and the exit code; this measures the time only.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

from _common import Fresh, command, fresh_process, machine

ROOT = Path(__file__).resolve().parents[1]
FLOOR = ["-c", "pass"]
CASES = [
    ["train", "--max_steps", "-5"],
    ["train", "--config", "recipes/nope.yaml"],
    ["eval", "--num-samples", "0", "--model", "testbed", "--dataset", "testbed:easy",
     "--output", "o"],
    ["train", "--lerning_rate", "1e-4"],
]  # fmt: skip


def load() -> str:
    return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="runs of each case (median shown)")
    parser.add_argument("--before", type=Path, help="another checkout's src to compare with")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a case may run")
    args = parser.parse_args()
    print(machine())
    print(command())
    print(f"load average before: {load()}")
    sources = [("after", ROOT / "src")] + ([("before", args.before)] if args.before else [])
    runs: dict[tuple[str, ...], list[Fresh]] = {}

    def run(key: tuple[str, ...], src: Path, argv: list[str]) -> None:
        with tempfile.TemporaryDirectory() as cache:  # empty: a fresh install
            runs.setdefault(key, []).append(fresh_process(argv, src, Path(cache), args.timeout))

    for _ in range(args.rounds):  # interleaved: each round runs the floor and every case once
        run(("floor",), ROOT / "src", FLOOR)
        for name, src in sources:
            for argv in CASES:
                run((name, *argv), src, ["-m", "traac.cli", *argv])
    floor = statistics.median(r.seconds for r in runs[("floor",)])
    floor_cpu = statistics.median(r.cpu for r in runs[("floor",)])
    print(f"load average after: {load()}")
    print(f"floor `python -c pass`: {floor:.2f} s, CPU {floor_cpu:.2f} s (median of {args.rounds})")
    print("| source | command | seconds (median) | runs | x floor | CPU s | exit | stderr lines |")
    print("|---|---|---:|---|---:|---:|---:|---:|")
    for key, results in runs.items():
        if key == ("floor",):
            continue
        seconds = statistics.median(r.seconds for r in results)
        used = statistics.median(r.cpu for r in results)
        each = " ".join(f"{r.seconds:.1f}" for r in results)
        codes = ",".join(sorted({r.code for r in results}))
        lines = ",".join(sorted({str(r.stderr_lines) for r in results}))
        print(f"| {key[0]} | traac {' '.join(key[1:])} | {seconds:.2f} | {each} | "
              f"{seconds / floor:.1f} | {used:.2f} | {codes} | {lines} |")  # fmt: skip


if __name__ == "__main__":
    main()
