"""What the benchmarks share: the `--model` / `--threads` options and the model they load, the
prompts, a bare `model.generate` loop, alternating timed runs, timed training steps, a fresh
`python` process timed as a user starts it, and the machine and command lines each prints beside
its figures (so that a reader can tell where they came from and rerun them).

Benchmarks run as scripts (`python benchmarks/NAME.py`), so this file is on their path.
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import PrinterCallback, TrainerCallback


def cpu_name() -> str:
    """The CPU's model name (/proc/cpuinfo), else what `platform` knows."""
    try:
        with open("/proc/cpuinfo") as f:
            return next(x.split(":", 1)[1].strip() for x in f if x.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def machine() -> str:
    """The machine: CPU, cores, torch and its threads, and the load other jobs put on it."""
    load = "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    return (
        f"{cpu_name()}, {os.cpu_count()} cores, torch {torch.__version__} "
        f"({torch.get_num_threads()} threads), load average {load}"
    )


def command(argv: Sequence[str] | None = None) -> str:
    """The command line that reproduces the run (`argv`: the options, default the script's)."""
    args = sys.argv[1:] if argv is None else argv
    return f"command: {shlex.join(['python', f'benchmarks/{Path(sys.argv[0]).name}', *args])}"


@dataclass(frozen=True)
class Fresh:
    """One fresh process: wall seconds, exit code (or "timeout"), stderr lines, CPU seconds."""

    seconds: float
    code: str
    stderr_lines: int
    cpu: float
    last_line: str = ""  # stderr's last line: the error a user reads


def children_cpu() -> float:
    """CPU seconds (user + system) of the finished child processes so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def fresh_process(
    argv: Sequence[str], src: Path, cache: Path, timeout: float, files: dict[str, str] | None = None
) -> Fresh:
    """`python ARGV` as a user runs it: `src` on the path, an empty directory holding `files`,
    the traac cache at `cache` and the hub offline, stopped after `timeout` seconds."""
    with tempfile.TemporaryDirectory() as where:
        for name, text in (files or {}).items():
            Path(where, name).parent.mkdir(parents=True, exist_ok=True)
            Path(where, name).write_text(text)
        env = {**os.environ, "PYTHONPATH": str(src), "TRAAC_CACHE_DIR": str(cache),
               "HF_HUB_OFFLINE": "1"}  # fmt: skip
        start, used = time.perf_counter(), children_cpu()
        try:
            done = subprocess.run(
                [sys.executable, *argv], capture_output=True, text=True,
                env=env, cwd=where, timeout=timeout,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            return Fresh(time.perf_counter() - start, "timeout", 0, children_cpu() - used)
        seconds, lines = time.perf_counter() - start, done.stderr.strip().splitlines()
        last = lines[-1] if lines else ""
        return Fresh(seconds, str(done.returncode), len(lines), children_cpu() - used, last)


def add_model_options(parser: argparse.ArgumentParser, model: str, threads: int = 0) -> None:
    """`--model` (a traac model name or path) and `--threads` (torch's; 0: its default)."""
    parser.add_argument("--model", default=model, help="smollm2, testbed(-quick), or a path")
    parser.add_argument(
        "--threads", type=int, default=threads, help="torch CPU threads (0: torch's default)"
    )


def set_threads(threads: int) -> None:
    if threads:
        torch.set_num_threads(threads)


def load(args: argparse.Namespace) -> tuple[str, Any, Any]:
    """(path, model on the CPU, tokenizer padding on the left) of `--model`, under `--threads`."""
    from traac.common.models import load_model, load_tokenizer
    from traac.pipelines.model_registry import resolve_model

    set_threads(args.threads)
    path = resolve_model(args.model)
    model, tokenizer = load_model(path, device="cpu"), load_tokenizer(path)
    tokenizer.padding_side = "left"
    return path, model, tokenizer


def prompt_style(path: str, tokenizer: Any) -> str:
    """The prompt style `traac eval` gives the model by default."""
    from traac.common.models import prompt_style_of
    from traac.evaluation.harness.prompts import default_prompt_style

    return prompt_style_of(path) or default_prompt_style(tokenizer)


def load_prompts(path: str, tokenizer: Any, dataset: str, n: int) -> tuple[list[Any], list[str]]:
    """The first `n` items of `dataset` and their prompts, as `traac eval` writes them."""
    from traac.data.datasets import load_items
    from traac.evaluation.harness.prompts import build_prompt

    style = prompt_style(path, tokenizer)
    items = load_items(dataset)[:n]
    return items, [build_prompt(item, tokenizer, style) for item in items]


def generate_batches(
    model: Any, tokenizer: Any, prompts: Sequence[str], batch_size: int, **options: Any
) -> list[list[int]]:
    """A bare `model.generate(**options)` over left-padded batches: each output row's new token
    ids, in order (`num_return_sequences` rows per prompt), the padding after an end included."""
    rows: list[list[int]] = []
    for at in range(0, len(prompts), batch_size):
        batch = tokenizer(
            list(prompts[at : at + batch_size]),
            return_tensors="pt",
            padding=True,
            add_special_tokens=False,
        )
        with torch.inference_mode():
            out = model.generate(**batch, pad_token_id=tokenizer.pad_token_id, **options)
        rows += out[:, batch["input_ids"].shape[1] :].tolist()
    return rows


def alternate(calls: dict[str, Callable[[], tuple[int, float]]], repeats: int) -> list[float]:
    """Each call's median tokens per second over `repeats` runs: the calls (each answering its
    tokens and wall seconds) alternate, so that a drift in the machine's load hits all alike;
    every run is printed."""
    runs: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            tokens, seconds = call()
            runs[name].append(tokens / seconds)
            print(f"  {name}: {tokens} tokens in {seconds:.1f} s = {tokens / seconds:.1f} tok/s")
    return [statistics.median(rates) for rates in runs.values()]


def add_step_options(
    parser: argparse.ArgumentParser,
    *,
    steps: int,
    rounds: int,
    prompts: int,
    generations: int,
    max_completion_length: int,
    dataset: str,
) -> None:
    """The options of a benchmark that times training steps (these are their defaults)."""
    parser.add_argument("--steps", type=int, default=steps, help="timed steps per run")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps per run first")
    parser.add_argument("--rounds", type=int, default=rounds, help="alternating rounds of runs")
    parser.add_argument("--prompts", type=int, default=prompts, help="prompts per step")
    parser.add_argument("--generations", type=int, default=generations, help="rollouts per prompt")
    parser.add_argument("--max-completion-length", type=int, default=max_completion_length)
    parser.add_argument("--dataset", default=dataset)
    parser.add_argument("--seed", type=int, default=0)


def training_data(model: str, dataset: str) -> tuple[Any, Any]:
    """(tokenizer padding on the left, the training rows of `dataset`) for the model at `model`."""
    from traac.common.models import load_tokenizer
    from traac.data.training import items_to_dataset, load_training_items

    tokenizer = load_tokenizer(model)
    tokenizer.padding_side = "left"
    chat = bool(getattr(tokenizer, "chat_template", None))
    return tokenizer, items_to_dataset(load_training_items(dataset), conversational=chat)


def step_config(output_dir: str, opts: argparse.Namespace, **settings: Any) -> Any:
    """A `TRAACConfig` on the CPU for `--warmup` + `--steps` steps of `--prompts` x
    `--generations` rollouts, saving and reporting nothing; `settings`: the rest, spelt as a
    recipe (a method's settings in its block, `traac={"scorer": "random"}`)."""
    from traac.training.planning.traac_config import TRAACConfig

    return TRAACConfig.from_recipe(
        output_dir=output_dir,
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
        max_steps=opts.warmup + opts.steps,
        per_device_train_batch_size=opts.prompts * opts.generations,
        num_generations=opts.generations,
        max_completion_length=opts.max_completion_length,
        seed=opts.seed,
        **settings,
    )


def timed_train(trainer: Any, warmup: int) -> list[float]:
    """Train; the step times after `warmup`. The log printer goes, as `traac train` drops it."""
    timer = StepTimer()
    trainer.remove_callback(PrinterCallback)
    trainer.add_callback(timer)
    trainer.train()
    return timer.times[warmup:]


class StepTimer(TrainerCallback):
    """Wall time of every optimizer step, from its start to the next one's (the last: to the
    end of training), so that the logging after `on_step_end` counts too."""

    def __init__(self) -> None:
        self.starts: list[float] = []

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.starts.append(time.perf_counter())

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.starts.append(time.perf_counter())

    @property
    def times(self) -> list[float]:
        return [b - a for a, b in itertools.pairwise(self.starts)]
