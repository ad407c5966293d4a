"""Worst-case wall time of one verification call on hostile answers, alone and from 4 threads.

Every call of `verify_math` / `verify_task` must return within its timeout plus 1 s, in-process
screening and worker replacement included (`verify_choice` / `verify_text` never use a worker
and must stay far under that). The battery: answers too big to read (10 MB), pathological
inputs for the extraction regexes and for Python's parser (64K runs, deep nesting, long sums),
and checks that run past the deadline so their worker is killed (a power tower for math-verify,
a heavy simplification for an integration scorer). Each case runs once alone, then the whole
battery runs `--rounds` times, shuffled, from `--threads` threads on a pool of `--workers`
(default: the pool's default, 4 at most). The pool is started and each task's scorer loaded
before timing: those are one-time setup, not charged to a call.

    PYTHONPATH=src .venv/bin/python benchmarks/verify_hostile.py [--timeout 5] [--threads 4]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from traac import verification as verify


def say(answer: str) -> str:
    return f"<think>\nLet me work.\n</think>\n{answer}"


def battery(timeout: float) -> list[tuple[str, Callable[[], Any]]]:
    """(name, call) for every hostile case."""
    import reasoning_gym

    def entry(name: str) -> dict[str, Any]:
        return reasoning_gym.create_dataset(name, size=1, seed=3)[0]

    puzzle, countdown, queens = entry("puzzle24"), entry("countdown"), entry("n_queens")
    poly, integral = entry("polynomial_multiplication"), entry("intermediate_integration")
    x = integral["metadata"]["variable"]
    n = verify.MAX_ANSWER_CHARS - 100

    def math(answer: str) -> Callable[[], Any]:
        return lambda: verify.verify_math(say(answer), "1", timeout=timeout)

    def task(answer: str, item: dict[str, Any]) -> Callable[[], Any]:
        return lambda: verify.verify_task(say(answer), item, timeout=timeout)

    return [
        ("math: power tower 9^9^9^9 (worker killed)", math("\\boxed{9^{9^{9^{9}}}}")),
        ("math: 10 MB answer", math("\\boxed{1}" * 1_000_000)),
        ("math: 64K of '\\frac{'", math("\\boxed{" + "\\frac{1}{" * (n // 9) + "}")),
        ("math: 64K of '{' nesting", math("\\boxed{" + "{" * n + "1" + "}" * 10)),
        ("math: 32K-term sum '1+1+...'", math("1+" * (n // 2) + "1")),
        ("math: 64K of '\\sqrt{' nesting", math("$" + "\\sqrt{" * (n // 6) + "$")),
        ("task puzzle24: 64K ' +' run (regex)", task("1" + " +" * (n // 2) + "2", puzzle)),
        ("task countdown: 64K blanks run (regex)", task("1" + " " * n + "2", countdown)),
        ("task n_queens: 64K '[' nesting (parser)", task("[" * n, queens)),
        ("task polynomial: 64K unary minus (parser)", task("-" * n + "x", poly)),
        ("task polynomial: 32K-term sum (parser)", task("x+" * (n // 2) + "x", poly)),
        (
            "task integration: heavy simplify (worker killed)",
            task(f"({x}+1)**999*sin({x})**999*exp({x})*log({x})**999 + C", integral),
        ),
        (
            "choice: 64K 'answer is A or B, '",
            lambda: verify.verify_choice(say("answer is A or B, " * (n // 18)), "A"),
        ),
        ("choice: 64K '\\boxed{'", lambda: verify.verify_choice(say("\\boxed{" * (n // 7)), "A")),
        ("text: 64K 'answer: ' runs", lambda: verify.verify_text(say("answer: " * (n // 8)), "a")),
    ]


def timed(call: Callable[[], Any]) -> float:
    start = time.monotonic()
    call()
    return time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timeout", type=float, default=verify.DEFAULT_TIMEOUT)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--workers", type=int, default=verify.default_workers())
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    pool = verify.configure_pool(args.workers)
    cases = battery(args.timeout)
    for _, call in cases:  # setup: the pool is up, every task's scorer is loaded
        call()
    alone = {name: timed(call) for name, call in cases}
    jobs = [case for _ in range(args.rounds) for case in cases]
    random.Random(0).shuffle(jobs)
    before = pool.timeouts
    with ThreadPoolExecutor(max_workers=args.threads) as threads:
        together = list(threads.map(lambda case: (case[0], timed(case[1])), jobs))
    worst: dict[str, float] = {}
    for name, seconds in together:
        worst[name] = max(worst.get(name, 0.0), seconds)

    print(f"command: {' '.join([os.path.basename(sys.executable), *sys.argv])}")
    print(
        f"machine: {platform.platform()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, load average {os.getloadavg()[0]:.2f} at the end"
    )
    print(
        f"timeout {args.timeout:g} s (bound {args.timeout + 1:g} s), pool of {pool.workers} "
        f"workers, {args.threads} threads x {args.rounds} rounds of {len(cases)} cases, "
        f"{pool.timeouts - before} deadlines missed in the threaded run"
    )
    print(f"\n| case | alone (s) | worst of {args.threads} threads (s) |\n|---|---:|---:|")
    for name, _ in cases:
        print(f"| {name} | {alone[name]:.2f} | {worst[name]:.2f} |")
    print(
        f"\nworst single call: {max(alone.values()):.2f} s alone, "
        f"{max(worst.values()):.2f} s from {args.threads} threads "
        f"(bound {args.timeout + 1:g} s)"
    )
    verify.shutdown_pool()


if __name__ == "__main__":
    main()
