"""Thread count on a shared CPU: the same `traac eval` with 2 threads, 2 passive threads and 1.

Each setting runs `traac eval` of a testbed model in a fresh process (OMP_NUM_THREADS set, and
OMP_WAIT_POLICY=passive for the passive one), alternating settings so that a drift in the
machine's load hits them alike. Rows add busy processes (a Python spin loop each) beside the
evaluation: 0, then as many as `--busy` asks. The table gives min-max wall seconds per setting
and the median ratio 2 threads / 1 thread.

    .venv/bin/python benchmarks/threads.py                      # quick testbed, 0/1/2 busy
    .venv/bin/python benchmarks/threads.py --model testbed --busy 0 1 4
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import command, cpu_name

SETTINGS = {
    "2 threads": {"OMP_NUM_THREADS": "2"},
    "2 threads, passive wait": {"OMP_NUM_THREADS": "2", "OMP_WAIT_POLICY": "passive"},
    "1 thread": {"OMP_NUM_THREADS": "1"},
}
SPIN = "while True: pass"


def evaluate(model: str, dataset: str, samples: int, output: Path, env: dict[str, str]) -> float:
    """Wall seconds of one `traac eval` in a fresh process."""
    command = [
        sys.executable, "-m", "traac.cli", "eval", "--model", model, "--dataset", dataset,
        "--num-samples", str(samples), "--max-new-tokens", "512", "--seed", "0",
        "--output", str(output),
    ]  # fmt: skip
    started = time.perf_counter()
    subprocess.run(command, env={**os.environ, **env}, check=True, capture_output=True)
    return time.perf_counter() - started


def run_row(args: argparse.Namespace, busy: int, work: Path) -> dict[str, list[float]]:
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(busy)]
    try:
        time.sleep(2 if busy else 0)
        times: dict[str, list[float]] = {name: [] for name in SETTINGS}
        for repeat in range(args.repeats):
            for name, env in SETTINGS.items():
                output = work / f"busy{busy}-{repeat}-{name.replace(' ', '_').replace(',', '')}"
                times[name].append(evaluate(args.model, args.dataset, args.samples, output, env))
                print(f"  busy {busy}, {name}: {times[name][-1]:.1f} s", file=sys.stderr)
        return times
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="testbed-quick", help="model directory or testbed name")
    parser.add_argument("--dataset", default="testbed:all?n=16&seed=3")
    parser.add_argument("--samples", type=int, default=4, help="samples per problem")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--busy", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args()

    # build (or find) the model once, outside the timings
    with tempfile.TemporaryDirectory() as tmp:
        evaluate(args.model, args.dataset, 1, Path(tmp) / "warm", SETTINGS["1 thread"])
        rows = []
        for busy in args.busy:
            load = os.getloadavg()[0]
            rows.append((busy, load, run_row(args, busy, Path(tmp))))

    machine = f"{cpu_name()}, {os.cpu_count()} cores, python {platform.python_version()}"
    print(f"# {machine}; model {args.model}, {args.dataset} x {args.samples} samples")
    print(f"# {command()}")
    names = list(SETTINGS)
    print("| busy processes | load avg before |", " | ".join(names), "| 2 threads / 1 thread |")
    print("|---:|---:|" + "---:|" * len(names) + "---:|")
    for busy, load, times in rows:
        spans = [f"{min(times[n]):.1f}-{max(times[n]):.1f}" for n in names]
        ratio = statistics.median(times["2 threads"]) / statistics.median(times["1 thread"])
        print(f"| {busy} | {load:.1f} |", " | ".join(spans), f"| {ratio:.2f} |")


if __name__ == "__main__":
    main()
