"""What the demo and the experiments share: timed stages, evaluating a model on held-out testbed
problems, training it from a recipe, the per-tier rows their tables are made of, and what
compression did during a run, per difficulty bin.

Each stage is resumable: an evaluation directory keeps its finished samples, a training run
its final model (kept) or its last checkpoint (continued).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import statistics
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from traac.common.models import (
    load_model,
    load_tokenizer,
    missing_model_files,
    resolve_model_path,
)
from traac.common.progress import NullProgress, Progress
from traac.common.tables import Table, fmt
from traac.common.threads import cores, set_threads
from traac.compression.formats import resolve_chat_format
from traac.compression.settings import CompressionSettings
from traac.data.testbed_long import LONG_SOURCE, is_long_spec
from traac.data.testbed_problems import DATA_SOURCE
from traac.evaluation.harness.results import TIER_ORDER, EvalSummary
from traac.evaluation.harness.runner import EvalSettings, run_eval
from traac.evaluation.inference.generation import Backend, make_backend
from traac.evaluation.inference.refill import RefillBackend
from traac.evaluation.inference.testtime import ThinkingGenerator
from traac.evaluation.inference.thinking_backend import ThinkingBackend
from traac.pipelines.train import TrainScriptArguments, parse, train
from traac.training.planning.traac_config import TRAACConfig
from traac.training.telemetry.step_stats import read_metrics

logger = logging.getLogger(__name__)
HELD_OUT_SEED = 2026  # held-out problems: the testbed's SFT and RL pools never hold them
LONG_CAP = 512  # held-out response cap on the long testbed: its traces run up to ~460 tokens
QUICK_TRAINING = {  # a smoke test of every stage: two steps on eight problems
    "max_steps": 2,
    "per_device_train_batch_size": 8,
    "num_generations": 4,
    "dataset": "testbed:all?n=8",
}


@dataclass
class Stages:
    """Wall time per stage, logged as each one ends (an interrupted one too: its time counts)."""

    seconds: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        logger.info(f"stage: {name}")
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = time.perf_counter() - start
            logger.info(f"{name}: {self.seconds[name]:.1f} s")


@dataclass(frozen=True)
class HeldOut:
    """The held-out testbed problems every model of a pipeline is evaluated on, and how.
    `t_max` (AUC_OAA's) is set apart from the response budget, at the 256 every published
    figure of docs/results.md was computed at (then tied to `max_new_tokens`)."""

    per_tier: int = 100
    num_samples: int = 4
    max_new_tokens: int = 256
    seed: int = HELD_OUT_SEED
    batch_size: int = 64
    t_max: int = 256
    # "padded": `model.generate` batches, as the experiments' figures were made; "refill": the
    # demo's (`traac eval --batching refill`): `batch_size` rows refilled as responses end, the
    # same per-request streams, other float effects of batch shape (`traac.common.decoding`).
    batching: str = "padded"
    source: str = DATA_SOURCE  # `testbed`, or `testbed-long` (`for_recipe`)

    @property
    def dataset(self) -> str:
        return f"{self.source}:all?n={self.per_tier}&seed={self.seed}"

    def for_recipe(self, dataset: str, cap: int | None = None) -> HeldOut:
        """These settings for a recipe training on `dataset` with response cap `cap`: the long
        testbed's problems are evaluated on its own tiers at the recipe's cap (unset:
        `LONG_CAP`, which fits the tiny model's traces; SmolLM2's tokenizer writes the same
        traces in about twice the tokens, so its recipe's cap is 1024)."""
        if not is_long_spec(dataset):
            return self
        cap = cap or LONG_CAP
        return replace(self, source=LONG_SOURCE, max_new_tokens=cap, t_max=cap)

    def evaluate(
        self,
        model: Path,
        output: Path,
        progress: Progress | None = None,
        *,
        think_budget: int | None = None,
        compress_tau: float | None = None,
        compression: CompressionSettings | None = None,
    ) -> EvalSummary:
        """Evaluate (resuming) with the prompt style the testbed learned: the question alone;
        with a think budget and/or a test-time compression tau (and its `compression`
        settings, default the paper's) as `traac eval` takes them."""
        compression = compression or CompressionSettings()
        path = resolve_model_path(str(model))
        tokenizer = load_tokenizer(path)
        thinking = think_budget is not None or compress_tau is not None
        settings = EvalSettings(
            dataset=self.dataset,
            model=str(Path(path).resolve()),
            prompt_style="question",
            max_new_tokens=self.max_new_tokens,
            compress_tau=compress_tau,
            compression=asdict(compression) if thinking else None,
            think_budget=think_budget,
        )

        def backend(tok: Any) -> Backend:
            if not thinking and self.batching == "refill":
                return RefillBackend(load_model(path), tok, self.batch_size)
            if not thinking:
                return make_backend("transformers", path, tok)
            chat_format = resolve_chat_format("auto", tokenizer=tok)
            return ThinkingBackend(
                ThinkingGenerator(
                    load_model(path), tok, chat_format, compress_tau=compress_tau,
                    think_budget=think_budget, settings=compression,
                )
            )  # fmt: skip

        result = run_eval(
            settings,
            output,
            num_samples=self.num_samples,
            batch_size=self.batch_size,
            args={"pipeline": True},
            make_backend=backend,
            tokenizer=tokenizer,
            wait=True,  # arms sharing a store evaluate the base model in one directory
            progress=progress,
            t_max=self.t_max,
        )
        return result.summary

    def subset(self, per_tier: int, num_samples: int) -> HeldOut:
        """The first `per_tier` problems of each tier (a prefix of each tier's draws), sampled
        `num_samples` times, decoded alike."""
        return replace(self, per_tier=min(per_tier, self.per_tier), num_samples=num_samples)


def _evaluate_alone(held_out: HeldOut, model: Path, output: Path, log: Path) -> None:
    """A child process's work (`evaluating_beside`): one evaluation on one torch thread, its
    output, warnings and loading bars in `log` rather than under the parent's progress bar."""
    import transformers

    with open(log, "w") as f:
        os.dup2(f.fileno(), sys.stdout.fileno())
        os.dup2(f.fileno(), sys.stderr.fileno())
    set_threads(1)
    transformers.utils.logging.disable_progress_bar()
    held_out.evaluate(model, output)


@contextmanager
def evaluating_beside(
    held_out: HeldOut, model: Path, output: Path
) -> Iterator[multiprocessing.process.BaseProcess | None]:
    """Evaluate `model` into `output` in a child process, on one thread, while the block runs:
    the demo trains on one torch thread, so a 2-core machine's other core is idle meanwhile.

    The child only fills `output`; the caller's `held_out.evaluate(model, output)` afterwards
    resumes from it and decodes whatever the child left (one core: all of it; a failed or
    interrupted child: the rest). The samples are the same either way: each request samples
    its own seeded stream, and one thread or two decode the same tokens on the testbed. The
    block gets the child (None on one core); its end waits for it; an exception stops it."""
    if cores() < 2:
        yield None
        return
    folder = output.parent
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / f"{output.name}.beside.log"
    child = multiprocessing.get_context("spawn").Process(
        target=_evaluate_alone, args=(held_out, model, output, log), daemon=True
    )
    child.start()
    logger.info(f"evaluating {model} beside, in process {child.pid} (log: {log})")
    try:
        yield child
    except BaseException:
        child.terminate()
        raise
    finally:
        child.join()
    if child.exitcode != 0:
        logger.warning(
            f"the evaluation beside failed (exit {child.exitcode}; {log}): it runs here instead"
        )


@dataclass(frozen=True)
class Recipe:
    """A training recipe file plus overrides, parsed (and so checked) at once."""

    path: Path
    overrides: Mapping[str, Any] = field(default_factory=dict)

    def parse(self, base: Path, output_dir: Path) -> tuple[TrainScriptArguments, TRAACConfig]:
        argv = ["--config", str(self.path), "--model_name_or_path", str(base)]
        argv += ["--output_dir", str(output_dir), "--resume_from_checkpoint", "auto"]
        for key, value in self.overrides.items():  # a method's block as `--alp.beta VALUE`
            pairs = value.items() if isinstance(value, Mapping) else [(None, value)]
            argv += [x for k, v in pairs for x in (f"--{key}" + (f".{k}" if k else ""), str(v))]
        return parse(argv)

    @staticmethod
    def trained(output_dir: Path) -> bool:
        """Whether `output_dir` holds a finished model or LoRA adapter (a checkpoint alone is
        not one)."""
        return missing_model_files(output_dir) is None

    def train(self, base: Path, output_dir: Path, progress: Progress | None = None) -> Path:
        """Train unless `output_dir` already holds the trained model (then kept)."""
        if self.trained(output_dir):
            logger.info(f"trained model found in {output_dir}: kept (delete it to retrain)")
            return output_dir
        script, config = self.parse(base, output_dir)
        result = train(script, config, progress or NullProgress())
        if result.interrupted is not None:
            raise KeyboardInterrupt  # the checkpoint is saved; a rerun continues from it
        return output_dir


@dataclass(frozen=True)
class TierRow:
    """Accuracy (%) and mean response length of one tier (or overall) of one model."""

    accuracy: float
    mean_length: float


def tier_rows(summary: EvalSummary) -> dict[str, TierRow]:
    """Per tier and overall, from an evaluation summary."""
    rows = {
        tier: TierRow(s.accuracy, s.mean_response_tokens) for tier, s in summary.by_tier.items()
    }
    rows["overall"] = TierRow(summary.overall.accuracy, summary.overall.mean_response_tokens)
    return rows


def tier_columns(tiers: Sequence[str] = (*TIER_ORDER, "overall")) -> list[str]:
    return [c for t in tiers for c in (f"{t} Acc", f"{t} Len")]


EVICTED_KINDS = ("compute", "conclude", "recheck")  # the testbed's step kinds (telemetry keys)


@dataclass(frozen=True)
class BinCompression:
    """Compression during training in one difficulty bin, means over the steps: what the probe
    removed, and on testbed prompts which kinds of step it evicted."""

    prompts: int
    compressed_frac: float | None
    steps_removed: float | None
    tokens_removed: float | None
    evicted: dict[str, float | None] | None = None  # per kind, steps per compressed candidate
    compute_loss: float | None = None  # share of the candidates' computation steps evicted


def training_compression(metrics_path: Path) -> dict[str, BinCompression]:
    """Per difficulty bin, means over the run's steps (`metrics.jsonl`): compressed share of the
    pooled group, steps and tokens removed per compressed rollout, steps evicted per kind, the
    computation lost; and the prompts seen. Empty where the run logged no step."""
    steps = read_metrics(metrics_path)
    if not steps:
        return {}
    out = {}
    for tier in TIER_ORDER:
        scopes = [s.scopes[tier] for s in steps if tier in s.scopes]

        def mean(name: str, scopes: list = scopes) -> float | None:
            values = [getattr(s, name) for s in scopes if getattr(s, name) is not None]
            return statistics.fmean(values) if values else None

        evicted = {kind: mean(f"evicted_{kind}") for kind in EVICTED_KINDS}
        out[tier] = BinCompression(
            prompts=sum(s.prompts for s in scopes),
            compressed_frac=mean("compressed_frac"),
            steps_removed=mean("steps_removed"),
            tokens_removed=mean("tokens_removed"),
            evicted=evicted if any(v is not None for v in evicted.values()) else None,
            compute_loss=mean("compute_loss"),
        )
    return out


def compression_table(rows: Mapping[str, BinCompression]) -> Table:
    """The bins as a table; the eviction columns where the run's prompts had step kinds."""
    kinds = any(s.evicted for s in rows.values())
    table = Table(
        ["difficulty bin (pass rate)", "prompts", "compressed share", "steps removed",
         "tokens removed"]
        + ([f"{k} evicted" for k in EVICTED_KINDS] + ["computation lost"] if kinds else []),
        title="Compression during training, per difficulty bin (means over steps)",
    )  # fmt: skip
    for tier, s in rows.items():
        share = None if s.compressed_frac is None else 100 * s.compressed_frac
        cells = [tier, str(s.prompts), fmt(share, suffix="%"), fmt(s.steps_removed, 2),
                 fmt(s.tokens_removed)]  # fmt: skip
        if kinds:
            evicted = s.evicted or {}
            lost = None if s.compute_loss is None else 100 * s.compute_loss
            cells += [fmt(evicted.get(k), 2) for k in EVICTED_KINDS] + [fmt(lost, suffix="%")]
        table.add(*cells)
    return table
