"""Seconds to re-report an evaluation directory: every number of its summary (accuracy, avg@k
with its bootstrap interval, pass@k, maj@k with its votes grouped by the verifier, the length
split, and overthinking, whose check runs the dataset's verifier on the steps of every right
response) recomputed from samples.jsonl,
with nothing generated. This is what rerunning `traac eval` into a finished directory does.

By default the directory is made first (untimed): `testbed:all?n=100`, 4 responses a problem
(1,200 samples), written by the testbed's teacher (the traces the testbed model learns to
write: computations, a conclusion, re-checks, slips and estimates), lengths counted in the quick
testbed's tokenizer (built into the cache if missing, about a minute). `--dir DIR` re-reports
a copy of an existing `traac eval` directory instead (its run.json names the dataset and the
model whose tokenizer counts).

Three figures: the re-report in this process, phase by phase (the verification pool already
started, as in a `traac eval` that has just scored); the same `traac eval` command as a user
runs it, a fresh process (interpreter, imports and pool start included); and, in the same run,
the obvious alternative: that command into an empty directory, which scores every response
again (verdicts, lengths) before the same summary, with the ratio of the two.

    PYTHONPATH=src .venv/bin/python benchmarks/rereport.py [--problems 100] [--samples 4]
    PYTHONPATH=src .venv/bin/python benchmarks/rereport.py --dir outputs/demo/eval/base/held-out
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import traac.evaluation.harness.overthinking as overthinking
from _common import children_cpu, command, machine
from traac.common.models import load_tokenizer
from traac.compression.formats import resolve_chat_format
from traac.data.datasets import load_items
from traac.evaluation.harness.paper_metrics import PAPER_T_MAX
from traac.evaluation.harness.results import summarize
from traac.evaluation.harness.runner import (
    RUN_FILE,
    SAMPLES_FILE,
    EvalSettings,
    SamplesFile,
    file_sha256,
    run_eval,
    with_overthinking,
)
from traac.evaluation.harness.samples import LengthCounter
from traac.evaluation.harness.votes import answer_votes
from traac.testbed.build import ensure_testbed
from traac.testbed.config import TeacherSettings
from traac.testbed.traces import teach
from traac.verification import get_pool


def synthesize(root: Path, problems: int, samples: int) -> tuple[Path, list[str]]:
    """A scored directory of teacher responses; returns it and the `traac eval` arguments that
    re-report it."""
    dataset = f"testbed:all?n={problems}"
    rng = random.Random(0)
    rows = []
    for item in load_items(dataset):
        for sample in range(samples):
            response = teach(item.entry, rng, TeacherSettings()).response()
            rows.append({"id": item.id, "sample": sample, "response": response})
    responses = root / "responses.jsonl"
    responses.write_text("".join(json.dumps(r) + "\n" for r in rows))
    model = str(ensure_testbed(quick=True))
    settings = EvalSettings(
        dataset=dataset,
        responses=str(responses.resolve()),
        responses_sha256=file_sha256(responses),
        tokenizer=model,
    )
    run_eval(settings, root / "run", tokenizer=load_tokenizer(model))
    args = ["--dataset", dataset, "--responses", str(responses), "--tokenizer", model]
    return root / "run", [*args, "--prompt-style", settings.prompt_style]


def timed_rereport(directory: Path) -> dict[str, Any]:
    """The re-report in this process, phase by phase, as `run_eval` does it."""
    settings = EvalSettings(**json.loads((directory / RUN_FILE).read_text())["settings"])
    source = settings.tokenizer or settings.model
    tokenizer = load_tokenizer(source) if source else None
    checks = 0
    verify = overthinking.verify_answers

    def counting(items: Any, texts: Any, **kwargs: Any) -> list[bool]:
        nonlocal checks
        checks += len(items)
        return verify(items, texts, **kwargs)

    overthinking.verify_answers = counting
    try:
        t0 = time.perf_counter()
        items = load_items(settings.dataset)
        t1 = time.perf_counter()
        records = list(SamplesFile(directory / SAMPLES_FILE).read().values())
        t2 = time.perf_counter()
        counter = LengthCounter(
            tokenizer, resolve_chat_format(settings.chat_format, tokenizer=tokenizer)
        )
        votes = answer_votes(records, items, counter.chat_format.think_close)
        t3 = time.perf_counter()
        summary = summarize(
            records,
            dataset=settings.dataset,
            model="m",
            t_max=PAPER_T_MAX,  # `traac eval`'s default
            length_unit=counter.unit,
            votes=votes,
        )
        t4 = time.perf_counter()
        with_overthinking(summary, records, items, counter)
        t5 = time.perf_counter()
    finally:
        overthinking.verify_answers = verify
    return {
        "samples": len(records),
        "checks": checks,
        "load items": t1 - t0,
        "read samples": t2 - t1,
        "maj@k votes (verifier groups)": t3 - t2,
        "summary (avg/pass/maj/lengths)": t4 - t3,
        "overthinking": t5 - t4,
        "total": t5 - t0,
    }


def cli_rereport(directory: Path, args: list[str]) -> tuple[float, float]:
    """Wall and CPU (user + system, with the children it waited for) seconds of `traac eval
    ARGS --output DIR` in a fresh process (a re-report when DIR holds every sample): on a loaded
    machine the wall time is mostly waiting for a core."""
    used = children_cpu()
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "traac.cli", "eval", *args, "--output", str(directory)],
        check=True,
        stdout=subprocess.DEVNULL,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    wall = time.perf_counter() - start
    cpu = children_cpu() - used
    return wall, cpu


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--problems", type=int, default=100, help="per tier (default 100)")
    p.add_argument("--samples", type=int, default=4, help="responses a problem (default 4)")
    p.add_argument("--dir", type=Path, help="re-report a copy of this `traac eval` directory")
    opts = p.parse_args()
    print(machine())
    print(command())
    with tempfile.TemporaryDirectory(prefix="traac-rereport-") as tmp:
        root = Path(tmp)
        if opts.dir is not None:
            directory = root / "run"
            shutil.copytree(opts.dir, directory)
            (directory / ".lock").unlink(missing_ok=True)
            cli_args = None
        else:
            directory, cli_args = synthesize(root, opts.problems, opts.samples)
        start = time.perf_counter()
        get_pool()
        print(f"verification pool start: {time.perf_counter() - start:.2f} s (once a process)")
        phases = timed_rereport(directory)
        print(f"{phases['samples']} samples, {phases['checks']} step checks by the verifier")
        for name, seconds in phases.items():
            if name not in ("samples", "checks"):
                print(f"  {name}: {seconds:.2f} s")
        if cli_args is not None:
            wall, cpu = cli_rereport(directory, cli_args)
            print(f"`traac eval` re-report, fresh process: {wall:.2f} s wall, {cpu:.2f} s CPU")
            again, again_cpu = cli_rereport(root / "scored-again", cli_args)
            print(
                f"`traac eval` into an empty directory (every response scored again): "
                f"{again:.2f} s wall, {again_cpu:.2f} s CPU; the re-report takes "
                f"{wall / again:.2f}x its wall time, {cpu / again_cpu:.2f}x its CPU time"
            )
        print(machine())  # the load again, after the runs


if __name__ == "__main__":
    main()
