"""Build the testbed model: teacher traces -> BPE tokenizer -> tiny Qwen3 -> TRL SFT -> card.

`ensure_testbed` is what every other command calls: the model lives in a cache directory keyed
by its config's hash, built once under a file lock into a temporary directory and renamed into
place, so concurrent callers wait for one build and an interrupted build leaves nothing behind
but its SFT checkpoint, from which the next build of the same config resumes.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import torch
from datasets import Dataset
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    GenerationConfig,
    PrinterCallback,
    Qwen3Config,
    Qwen3ForCausalLM,
    TrainerCallback,
)
from transformers.trainer_utils import get_last_checkpoint
from trl import SFTConfig, SFTTrainer

from traac.common.cache import build_atomically, cache_root, cached_entry
from traac.common.gguf import converted_gguf, smollm2_file
from traac.common.progress import NullProgress, Progress, quiet_libraries
from traac.common.trainer_progress import TrainerProgress
from traac.data.testbed_problems import EVAL_SEED, RL_SEED, sft_entries
from traac.errors import TraacError
from traac.testbed.config import LongTeacherSettings, TestbedSettings, default_config
from traac.testbed.long_traces import teach_long
from traac.testbed.measure import measure, teacher_stats
from traac.testbed.shipped import is_shipped, unpack_shipped
from traac.testbed.tokenizer import EOS, PAD, THINK_CLOSE, build_tokenizer, render_prompts
from traac.testbed.traces import PROMPT_STYLE, Trace, teach

CARD = "testbed_card.json"
TOKENIZER_CORPUS = 4_000  # traces the BPE is trained on (the vocabulary is tiny)
BASE_GGUF = {"smollm2": smollm2_file}  # each of config.BASES: the GGUF file it converts from
SAVE_EVERY_S = 300.0  # SFT checkpoint interval: a quick build never saves, smollm2-think 5 times


def cache_path(config: TestbedSettings) -> Path:
    return cache_root("testbed") / f"{config.name}-seed{config.seed}-{config.hash()}"


def ensure_testbed(
    quick: bool = False, seed: int = 0, progress: Progress | None = None, base: str | None = None
) -> Path:
    """The testbed model directory (or, with `base`, the thinking fine-tune of that pretrained
    model), built into the cache on first use (seconds afterwards)."""
    return build_cached(default_config(quick=quick, seed=seed, base=base), progress=progress)


def build_cached(
    config: TestbedSettings, force: bool = False, progress: Progress | None = None
) -> Path:
    """Return the cache entry of `config`: if missing, the shipped model where the package holds
    one (`traac.testbed.shipped`), else built; `force` builds it anew, shipped or not.
    Concurrent callers wait for one build (a file lock the OS releases if its holder dies)."""
    target = cache_path(config)

    def make(work: Path) -> dict:
        if not force and is_shipped(config):
            with (progress or NullProgress()).phase("testbed: unpacking the shipped model"):
                return unpack_shipped(config, work, CARD)
        return _build(work, config, progress, target)

    return cached_entry(target, CARD, make, force=force)


def build_testbed(
    output: Path, config: TestbedSettings, force: bool = False, progress: Progress | None = None
) -> dict:
    """Build into `output` atomically: a sibling temporary directory renamed at the end."""
    output = Path(output).expanduser()
    if output.exists() and not output.is_dir():
        raise TraacError(f"testbed: {output} is a file; name a directory for the model")
    if output.exists() and not force:
        raise TraacError(f"testbed: {output} already exists; pass --force to rebuild it")
    return build_atomically(
        output, lambda work: _build(work, config, progress, output), "testbed: directory"
    )


def sft_checkpoints(target: Path) -> Path:
    """Where the build of `target` keeps its SFT checkpoints: beside it, outside the temporary
    directory an interruption removes, until the build is whole."""
    return target.with_name(f".{target.name}.sft-checkpoints")


def _build(work: Path, config: TestbedSettings, progress: Progress | None, target: Path) -> dict:
    with quiet_libraries():
        card = _build_steps(work, config, progress or NullProgress(), sft_checkpoints(target))
    shutil.rmtree(sft_checkpoints(target), ignore_errors=True)
    return card


def teacher_traces(config: TestbedSettings) -> tuple[list[dict], list[Trace]]:
    """The SFT problems (reasoning-gym entries of the SFT pool) and a teacher trace for each."""
    teacher = config.teacher
    entries = sft_entries(
        config.train.n_traces,
        config.seed,
        teacher.min_terms,
        teacher.max_terms,
        config.tiers.digits,
    )
    rng = random.Random(f"traac-testbed-teacher/{config.seed}")
    if isinstance(teacher, LongTeacherSettings):
        return entries, [teach_long(entry, rng, teacher) for entry in entries]
    return entries, [teach(entry, rng, teacher) for entry in entries]


def sft_records(entries: list[dict], traces: list[Trace], tokenizer: Any) -> list[dict]:
    """TRL's standard (text) prompt/completion records.

    The prompt is the chat-template prompt, plus, for an interrupted trace, the forced think
    block up to the closer: the model learns to answer an interruption with a summary, not to
    interrupt itself. The completion is what the model writes (the trainer appends eos).
    """
    prompts = render_prompts(tokenizer, [entry["question"] for entry in entries])
    return [
        {"prompt": prompt + trace.forced, "completion": trace.written}
        for prompt, trace in zip(prompts, traces, strict=True)
    ]


def tokenize_records(records: list[dict], tokenizer: Any) -> Any:
    """The records as TRL's processed prompt/completion dataset (`input_ids`, `completion_mask`).

    What SFTTrainer's own preparation makes of text prompt/completion records (completion + eos,
    loss on the completion only), tokenized in one batched call instead of one example at a
    time: a minute of CPU saved per build on a busy 2-core machine.
    """
    completions = [r["completion"] + tokenizer.eos_token for r in records]
    prompt_ids = tokenizer([r["prompt"] for r in records], add_special_tokens=False)["input_ids"]
    completion_ids = tokenizer(completions, add_special_tokens=False)["input_ids"]
    return Dataset.from_dict(
        {
            "input_ids": [p + c for p, c in zip(prompt_ids, completion_ids, strict=True)],
            "completion_mask": [
                [0] * len(p) + [1] * len(c) for p, c in zip(prompt_ids, completion_ids, strict=True)
            ],
        }
    )


def _build_steps(
    work: Path, config: TestbedSettings, progress: Progress, checkpoints: Path
) -> dict:
    clock = _Clock()
    torch.manual_seed(config.seed)
    with progress.phase("testbed: writing teacher traces and training the tokenizer"):
        entries, traces = teacher_traces(config)
        if config.base is None:
            tokenizer = build_tokenizer(_corpus(entries, traces), config.model.vocab_size)
            model = _init_model(config, tokenizer)
        else:
            model, tokenizer = _load_base(config.base, progress)
        records = sft_records(entries, traces, tokenizer)
    clock.lap("data")
    train_info = _train(model, tokenizer, records, config, checkpoints, progress)
    model.save_pretrained(work)
    tokenizer.save_pretrained(work)
    clock.lap("train")
    measured = measure(model, tokenizer, config, progress)
    clock.lap("measure")
    card = {
        "config": config.to_dict(),
        "config_hash": config.hash(),
        "seeds": {"sft": config.seed, "rl": RL_SEED, "eval": EVAL_SEED},
        "teacher": teacher_stats(traces, tokenizer),
        "train": train_info,
        "measure": measured,
        "build_seconds": clock.total_wall(),
        # wall and CPU seconds (this process) of each phase: on a shared machine the CPU time
        # says what the build costs, the wall time what it took under that load
        "phase_seconds": clock.laps,
        "threads": torch.get_num_threads(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "versions": _versions(),
    }
    (work / CARD).write_text(json.dumps(card, indent=2) + "\n")
    return card


class _Clock:
    """Wall and CPU time of consecutive phases."""

    def __init__(self) -> None:
        self.start = self.wall = time.perf_counter()
        self.cpu = time.process_time()
        self.laps: dict[str, dict[str, float]] = {}

    def lap(self, name: str) -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        self.laps[name] = {"wall": round(wall - self.wall, 1), "cpu": round(cpu - self.cpu, 1)}
        self.wall, self.cpu = wall, cpu

    def total_wall(self) -> float:
        return round(time.perf_counter() - self.start, 1)


def _corpus(entries: list[dict], traces: list[Trace]) -> Iterator[str]:
    for entry, trace in zip(entries[:TOKENIZER_CORPUS], traces, strict=False):
        yield f"user\n{entry['question']}\nassistant\n"
        yield trace.response()


def _load_base(base: str, progress: Progress) -> tuple[Any, Any]:
    """A pretrained model (`BASES`) and its own tokenizer, set up to be sampled like the testbed.

    The think delimiters stay the several tokens its tokenizer spells them in: no new embedding
    rows to learn from a few hundred steps, and the base model (as a foreign scorer) reads the
    same tokens as its fine-tune.
    """
    path = converted_gguf(BASE_GGUF[base](), progress)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    model.config.traac_prompt_style = PROMPT_STYLE
    model.generation_config = _sampling(tokenizer.eos_token_id, tokenizer.pad_token_id)
    return model, tokenizer


def _sampling(eos_token_id: int, pad_token_id: int) -> GenerationConfig:
    return GenerationConfig(
        eos_token_id=eos_token_id,
        pad_token_id=pad_token_id,
        do_sample=True,
        temperature=1.0,
        top_p=1.0,
        top_k=0,  # the paper samples with no top-k; transformers would default to 50
        max_new_tokens=512,
    )


def _init_model(config: TestbedSettings, tokenizer: Any) -> Any:
    m = config.model
    model_config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=m.hidden_size,
        intermediate_size=m.intermediate_size,
        num_hidden_layers=m.num_hidden_layers,
        num_attention_heads=m.num_attention_heads,
        num_key_value_heads=m.num_key_value_heads,
        head_dim=m.hidden_size // m.num_attention_heads,
        max_position_embeddings=m.max_position_embeddings,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.convert_tokens_to_ids(EOS),
        pad_token_id=tokenizer.convert_tokens_to_ids(PAD),
        bos_token_id=None,
    )
    model_config.traac_prompt_style = PROMPT_STYLE  # what commands prompt it with
    model = Qwen3ForCausalLM(model_config)
    model.generation_config = _sampling(model_config.eos_token_id, model_config.pad_token_id)
    return model


class _SaveEvery(TrainerCallback):
    """Save a checkpoint when `seconds` have passed since the last (or the start): a long build
    loses at most that much to an interruption, a short one writes nothing. A build that took
    that long saves its last step too, so a stop in the measuring after it (40 minutes on
    SmolLM2's long build) resumes there, not `seconds` before."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.start = self.last = time.monotonic()

    def on_step_end(self, args, state, control, **kwargs):
        now = time.monotonic()
        if state.global_step < state.max_steps:
            control.should_save = now - self.last >= self.seconds
        else:
            control.should_save = now - self.start >= self.seconds
        if control.should_save:
            self.last = now


def _train(
    model: Any,
    tokenizer: Any,
    records: list[dict],
    config: TestbedSettings,
    checkpoints: Path,
    progress: Progress,
) -> dict:
    """SFT with TRL's SFTTrainer: loss on the completion only, CPU, seeded; resumed from the
    last checkpoint an interrupted build of the same config left in `checkpoints`."""
    t = config.train
    resume = get_last_checkpoint(str(checkpoints)) if checkpoints.is_dir() else None
    args = SFTConfig(
        output_dir=str(checkpoints),
        per_device_train_batch_size=t.micro_batch or t.batch_size,
        gradient_accumulation_steps=t.batch_size // (t.micro_batch or t.batch_size),
        num_train_epochs=t.epochs,
        learning_rate=t.learning_rate,
        lr_scheduler_type="cosine",
        warmup_steps=t.warmup_ratio,
        weight_decay=t.weight_decay,
        completion_only_loss=True,
        gradient_checkpointing=False,  # TRL defaults to on; a tiny model needs no memory saving
        bf16=False,  # TRL defaults to bf16 autocast; fp32 is faster for tiny matrices on a CPU
        max_length=None,  # traces are far shorter than the context; nothing to truncate
        train_sampling_strategy="group_by_length",  # less padding, a large share of CPU time
        logging_steps=50,
        save_strategy="no",  # _SaveEvery decides
        save_total_limit=1,
        report_to="none",
        disable_tqdm=True,
        use_cpu=True,
        seed=config.seed,
        data_seed=config.seed,
        dataloader_pin_memory=False,
    )
    with progress.phase("testbed: tokenizing the SFT data"):
        trainer = SFTTrainer(
            model=model,
            args=args,
            train_dataset=tokenize_records(records, tokenizer),
            processing_class=tokenizer,
        )
    trainer.remove_callback(PrinterCallback)  # the progress task shows the loss instead
    resumed_from = int(Path(resume).name.rsplit("-", 1)[-1]) if resume else None
    label = f"testbed SFT, resumed at step {resumed_from}" if resume else "testbed SFT"
    bar = TrainerProgress(progress, label)
    trainer.add_callback(bar)
    trainer.add_callback(_SaveEvery(SAVE_EVERY_S))
    started = time.perf_counter()
    result = trainer.train(resume_from_checkpoint=resume)
    seconds = time.perf_counter() - started
    model.eval()
    return {
        "steps": result.global_step,
        "seconds": round(seconds, 1),  # this process's training time; a resumed build's is partial
        "resumed_from_step": resumed_from,
        "final_loss": bar.last_loss,
        "mean_loss": round(result.training_loss, 4),
        "loss_history": [
            (e["step"], round(float(e["loss"]), 4))
            for e in trainer.state.log_history
            if "loss" in e
        ],
        "parameters": sum(p.numel() for p in model.parameters()),
        "vocab_size": len(tokenizer),
        "think_close_ids": tokenizer(THINK_CLOSE, add_special_tokens=False).input_ids,
        "threads": torch.get_num_threads(),
    }


def _versions() -> dict[str, str]:
    return {name: version(name) for name in ("torch", "transformers", "trl")}
