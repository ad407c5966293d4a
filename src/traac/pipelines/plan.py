"""`traac train --dry-run`: what a recipe will do, checked before any GPU hour is spent.

`make_plan` checks what can be checked without model weights or a GPU: the model's form (local
directory, named model, GGUF file, hub id) and, where its tokenizer is on disk or the hub is
reachable, its chat format; the dataset's and the held-out set's rows where the data is local,
cached or reachable; the batch arithmetic for the planned number of processes; the packages the
recipe uses (`traac.training.planning.packages`); the extra reward functions (imported, signatures
checked); the resume checkpoint. What cannot be reached offline is said plainly and left to run
time, never reported as an error.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from huggingface_hub.utils import HFValidationError, validate_repo_id
from transformers import AutoTokenizer

from traac.common.gguf import check_gguf, is_gguf_path
from traac.common.launch import fsdp_launch, zero_stage
from traac.common.models import load_config, resolve_model_path
from traac.common.scoring_model import is_foreign
from traac.data.hub import HubUnavailable, hub_reachable
from traac.data.training import load_training_items
from traac.errors import TraacError
from traac.pipelines.model_registry import MODELS
from traac.pipelines.train import (
    TrainScriptArguments,
    check_evaluation,
    resume_checkpoint,
    validate,
)
from traac.training.planning.extra_rewards import load_extra_rewards
from traac.training.planning.memory import Sharding, recipe_estimate
from traac.training.planning.packages import requirements
from traac.training.planning.presets import preset_rows
from traac.training.planning.profiles import describe_profile
from traac.training.planning.traac_config import TRAACConfig
from traac.training.step.compressor import check_probe_layers_of
from traac.training.step.copy_rules import COPY_LOSS_WORDS, COPY_POOL_WORDS

CHECKED_AT_RUN_TIME = "not reachable offline, checked at run time"


@dataclass
class Plan:
    """Rows of (setting, value) in print order, and notes on what was left to run time."""

    rows: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, name: str, value: Any) -> None:
        self.rows.append((name, str(value)))


def make_plan(
    script: TrainScriptArguments, config: TRAACConfig, device_note: str | None = None
) -> Plan:
    """The plan of a parsed recipe (`TrainScriptArguments`, `TRAACConfig`); TraacError when a
    check fails (the message names the field)."""
    plan = Plan()
    validate(script, config)  # every check `train` runs before loading a model
    plan.notes.extend(script.notes)  # fields the run will not read (`recipe_effects`)
    processes = planned_processes(script.dry_run_processes)
    tokenizer, where = check_model(script.model_name_or_path)
    local = on_disk(script.model_name_or_path)
    if local is not None:  # the probe's layers against its config.json, as the run checks them
        check_probe_layers_of(config, local)
    plan.add("model", f"{script.model_name_or_path} ({where})")
    plan.add("chat format", chat_format_line(config, tokenizer))
    data, problems = check_data(script.training_spec())
    plan.add("data", data)
    if script.prompt_suffix:
        plan.add("prompt suffix", repr(script.prompt_suffix))
    plan.add("device", device_line(config, device_note))
    plan.add("processes", processes_line(processes, script.dry_run_processes))
    for name, value in batch_lines(config, processes):
        plan.add(name, value)
    plan.add("steps", steps_line(config, processes, problems))
    plan.add("evaluation", evaluation_line(script, config))
    plan.add("generation", generation_line(config))
    plan.add("packages", packages_line(script, config))
    plan.add("max completion length", f"{config.max_completion_length} tokens")
    plan.add("precision", precision(config))
    plan.add("weights", weights_line(config))
    plan.add("peak GPU memory", memory_line(script, config, processes))
    plan.add("activation checkpointing", "on" if config.gradient_checkpointing else "off")
    plan.add("sharding", sharding_line(config))
    plan.add("TRAAC", traac_line(config))
    for name, value in preset_rows(config, script.model_name_or_path):
        plan.add(name, value)
    add_lora_line(plan, script)
    plan.add("rewards", rewards_line(config))
    scoring_model = config.traac_settings.scoring_model
    if config.compresses and is_foreign(scoring_model):
        _, where = check_model(scoring_model, "scoring_model")
        plan.add("scoring model", f"{scoring_model} ({where})")
    plan.add("optimizer", optimizer_line(config))
    plan.add("optimizer profile", describe_profile(config.optimizer_profile, config))
    plan.add("checkpoints", checkpoint_line(config))
    plan.add("resume", resume_line(config))
    plan.add("output dir", config.output_dir)
    if device_note:
        plan.notes.append(device_note)
    plan.notes += [f"{name}: {CHECKED_AT_RUN_TIME}" for name, v in plan.rows if _deferred(v)]
    return plan


def _deferred(value: str) -> bool:
    return CHECKED_AT_RUN_TIME in value


# ---------------------------------------------------------------- checks


def check_model(name: str, field: str = "model_name_or_path") -> tuple[Any, str]:
    """(tokenizer or None, how the model was found); never loads weights and never builds the
    testbed. Errors name `field`."""
    if name in MODELS:
        named = MODELS[name]
        path = named.cached()
        if path is None:
            return None, f"{named.description}; not in the cache yet, made at run time"
        return _tokenizer(str(path), local_only=True), f"{named.description}, {path}"
    if is_gguf_path(name):
        check_gguf(Path(name).expanduser())
        return None, "a GGUF file, converted into the cache at run time"
    try:
        path = resolve_model_path(name)
    except TraacError as err:
        raise TraacError(f"{field}: {err}") from None
    if Path(path).is_dir():
        return _tokenizer(path, local_only=True, field=field), "local directory"
    try:
        validate_repo_id(name)
    except HFValidationError as err:
        raise TraacError(f"{field}: {name!r} is no directory nor hub id ({err})") from None
    tokenizer = _tokenizer(name, local_only=not hub_reachable(), field=field)
    return tokenizer, "hub id"


def on_disk(name: str) -> str | None:
    """The directory of a model already on this machine (a named model in the cache, or a
    local directory); None for what the run would build, convert or download."""
    if name in MODELS:
        path = MODELS[name].cached()
        return None if path is None else str(path)
    return name if Path(name).expanduser().is_dir() else None


def _tokenizer(where: str, local_only: bool, field: str = "model_name_or_path") -> Any:
    """The tokenizer (no weights), or None when it is neither on disk nor reachable."""
    try:
        return AutoTokenizer.from_pretrained(where, local_files_only=local_only)
    except OSError as err:
        if local_only:
            return None
        raise TraacError(f"{field}: cannot load {where!r}'s tokenizer ({err})") from None


def chat_format_line(config: Any, tokenizer: Any) -> str:
    """The chat format the trainer will use; `auto` needs the tokenizer's template."""
    if config.chat_format == "auto" and tokenizer is None:
        return f"auto (read from the chat template: {CHECKED_AT_RUN_TIME})"
    fmt = config.resolve(tokenizer)
    where = "the prompt ends with" if fmt.opener_in_prompt else "the response opens with"
    name = "prompt-opens" if fmt.opener_in_prompt else "response-opens"
    closer = f"reasoning closed by {fmt.think_close}"
    return f"{name}: {where} {fmt.think_open}, {closer} (chat_format {config.chat_format})"


def check_data(spec: str, name: str = "dataset") -> tuple[str, int | None]:
    """Load the problems as training will (every row checked): (plan line, number of problems);
    a hub set that is neither cached nor reachable is left to run time."""
    try:
        items = load_training_items(spec)
    except HubUnavailable:
        return f"{spec} ({CHECKED_AT_RUN_TIME})", None
    except TraacError as err:
        raise TraacError(f"{name}: {err}") from None
    sources = sorted({item.data_source for item in items})
    line = f"{spec}: {len(items)} problems, every row checked (sources: {', '.join(sources)})"
    return line, len(items)


def evaluation_line(script: TrainScriptArguments, config: Any) -> str:
    """The held-out evaluation during training (`check_evaluation`), its problems loaded."""
    check_evaluation(script, config)
    if not script.eval_dataset:
        return "none (eval_dataset unset)"
    data, _ = check_data(script.eval_dataset, "eval_dataset")
    n = config.num_generations_eval or config.num_generations
    every = (f"every {config.eval_steps:g} steps" if _name(config.eval_strategy) == "steps"
             else f"every {_name(config.eval_strategy)}")  # fmt: skip
    return f"{every}, {n} rollouts per problem, accuracy and lengths per tier; {data}"


def planned_processes(requested: int | None) -> int:
    if requested is not None and requested < 1:
        raise TraacError(f"dry_run_processes: {requested} must be at least 1")
    return requested or int(os.environ.get("WORLD_SIZE", "1"))


def processes_line(processes: int, requested: int | None) -> str:
    if requested is not None:
        return f"{processes} (--dry-run-processes)"
    return f"{processes} (this launch; --dry-run-processes N plans for N GPUs)"


def batch_lines(config: Any, processes: int) -> list[tuple[str, str]]:
    """Completions per optimizer step and per generation round, for `processes` processes.

    TRL checked that `num_generations` divides the generation batch for this launch's processes
    (a multiple of it divides it for any count); `steps_per_generation` is the recipe's.
    """
    n = config.num_generations
    per_step = config.per_device_train_batch_size * processes * config.gradient_accumulation_steps
    spg = config.steps_per_generation
    generation = config.per_device_train_batch_size * processes * spg
    return [
        ("optimizer step", f"{per_step} completions = {per_step / n:g} prompts x {n} rollouts "
         f"({config.per_device_train_batch_size} per device x {processes} x "
         f"{config.gradient_accumulation_steps} accumulation)"),
        ("generation round", f"{generation // n} prompts x {n} rollouts = {generation} "
         f"completions, every {spg / config.gradient_accumulation_steps:g} optimizer step(s)"),
    ]  # fmt: skip


def steps_line(config: Any, processes: int, prompts: int | None) -> str:
    if config.max_steps and config.max_steps > 0:
        return f"{config.max_steps} (max_steps)"
    if prompts is None:
        return f"{config.num_train_epochs:g} epochs (steps known once the data is loaded)"
    per_step = config.per_device_train_batch_size * processes * config.gradient_accumulation_steps
    per_epoch = math.ceil(prompts * config.num_generations * config.num_iterations / per_step)
    total = math.ceil(per_epoch * config.num_train_epochs)
    return f"about {total} ({config.num_train_epochs:g} epochs x {per_epoch} steps)"


def generation_line(config: Any) -> str:
    """The generation mode (transformers, vLLM colocated, or a vLLM server) and sampling."""
    sampling = f"temperature {config.temperature:g}, top_p {config.top_p:g}"
    if not config.use_vllm:
        return f"transformers generate; {sampling}"
    if config.vllm_mode == "server":
        url = config.vllm_server_base_url or (
            f"http://{config.vllm_server_host}:{config.vllm_server_port}"
        )
        return (f"vLLM (server at {url}: start it first with trl vllm-serve --model MODEL, "
                f"on GPUs the training processes do not use); {sampling}")  # fmt: skip
    memory = f"gpu_memory_utilization {config.vllm_gpu_memory_utilization:g}"
    return f"vLLM (colocate, {memory}); {sampling}"


def packages_line(*settings: Any) -> str:
    """The optional packages the recipe uses (`check_packages` has found them all)."""
    needed = requirements(*settings)
    if not needed:
        return "none beyond the core install"
    return ", ".join(f"{r.modules[0]} ({r.setting})" for r in needed) + ": installed"


def precision(config: Any) -> str:
    return "bf16" if config.bf16 else "fp16" if config.fp16 else "fp32"


def weights_line(config: Any) -> str:
    """The dtype the policy, the reference and a frozen scorer load in."""
    dtype = config.load_dtype
    if dtype is None:
        return "float32 (TRL's default; bf16: true loads bfloat16)"
    return f"{str(dtype).removeprefix('torch.')} (policy, reference and scorer; model_init_kwargs)"


SHARDINGS = {"none": Sharding(), "zero1": Sharding(zero=1), "zero2": Sharding(zero=2),
             "zero3": Sharding(zero=3), "fsdp": Sharding(fsdp=True)}  # fmt: skip


def launch_sharding(config: Any, requested: str | None) -> tuple[str, Sharding]:
    """The sharding memory is estimated for: `--dry-run-sharding`, else the recipe's DeepSpeed
    config or the accelerate launch's (its environment), else none."""
    if requested is not None:
        if requested not in SHARDINGS:
            raise TraacError(f"dry_run_sharding: {requested!r}; use one of {', '.join(SHARDINGS)}")
        return requested, SHARDINGS[requested]
    stage = zero_stage(config.deepspeed)
    if stage is not None:
        return f"zero{stage}", Sharding(zero=stage)
    if fsdp_launch(config.fsdp):
        return "fsdp", SHARDINGS["fsdp"]
    return "none", SHARDINGS["none"]


def memory_line(script: Any, config: Any, processes: int) -> str:
    """`traac.training.planning.memory`'s estimate, from the model's config (no weights); left to
    run time when the config is neither on disk nor reachable."""
    name = script.model_name_or_path
    named = MODELS.get(name)
    where = named.cached() if named is not None else name
    try:
        if where is None or is_gguf_path(name):
            raise TraacError("not on disk")
        if not Path(str(where)).is_dir() and not hub_reachable():
            raise TraacError("a hub id, offline")
        model_config = load_config(str(where))
    except (TraacError, OSError, ValueError):
        return f"needs the model's config.json ({CHECKED_AT_RUN_TIME})"
    label, sharding = launch_sharding(config, script.dry_run_sharding)
    sharding = Sharding(processes, sharding.zero, sharding.fsdp)
    estimate = recipe_estimate(model_config, config, script, sharding)
    return (f"{estimate.line()}; sharding {label} over {processes} process(es) "
            "(--dry-run-sharding, --dry-run-processes)")  # fmt: skip


def device_line(config: Any, note: str | None) -> str:
    if config.use_cpu and not note:
        return "CPU (use_cpu)"
    seen = torch.cuda.device_count()
    return f"GPU ({seen} visible here)" if seen else "GPU (none visible here)"


def sharding_line(config: Any) -> str:
    if config.deepspeed:
        return f"DeepSpeed ({config.deepspeed})"
    if config.fsdp:
        return f"FSDP ({config.fsdp})"
    if os.environ.get("ACCELERATE_USE_DEEPSPEED", "").lower() == "true":
        return "DeepSpeed (from the accelerate launch config)"
    if os.environ.get("ACCELERATE_USE_FSDP", "").lower() == "true":
        return "FSDP (from the accelerate launch config)"
    return "none in the recipe (accelerate launch --config-file may add ZeRO or FSDP)"


def traac_line(config: Any) -> str:
    """The method in use: the mode (a peer method with its paper and values), what TRAAC
    compresses, the rewards, and dynamic sampling."""
    parts = [f"mode {config.mode}", f"preset {config.preset}"]
    run = config.method_run()
    if run is not None:
        parts.append(run.describe())
    if config.compresses:
        c = config.traac_settings
        layers = c.probe_layers or "the authors' rule for this model"
        tau = config.difficulty_config().tau
        parts += [
            f"scorer {c.scorer} on the {c.scoring_model} model (probe layers {layers}, "
            f"heads {c.probe_heads})",
            f"tau easy/medium/hard {tau['easy']:g}/{tau['medium']:g}/{tau['hard']:g}",
            f"gate {c.uniformity_gate:g}, cap {c.eviction_cap:g}, "
            f"calibration {c.uniformity_calibration}",
            f"copies of {COPY_POOL_WORDS[c.copy_pool]} (copy_pool {c.copy_pool}), "
            f"{c.copy_tags} tags, trained on {COPY_LOSS_WORDS[c.copy_loss]} "
            f"(copy_loss {c.copy_loss})",
        ]
    if run is not None:
        parts.append(f"format {config.format_preset}, correctness {config.correctness_reward:g}")
    elif "length_reward" in config.mode_spec.rewards:  # all TRAAC's modes but CR
        parts.append(f"format {config.format_preset}, length weight {config.length_weight:g}, "
                     f"window {config.length_window_steps} steps")  # fmt: skip
    sampling = config.dynamic_sampling
    if sampling == "resample":
        sampling += f" (up to {config.max_resample_rounds} rounds, then drop)"
    parts.append(f"dynamic sampling {sampling}")
    return "; ".join(parts)


def add_lora_line(plan: Plan, script: TrainScriptArguments) -> None:
    """The LoRA row; a quantized base this machine cannot load is a note (one line), as the
    run would fail with it at once."""
    plan.add("LoRA", script.summary())
    requirement = script.gpu_requirement()
    if requirement is not None:
        plan.notes.append(requirement)


def rewards_line(config: Any) -> str:
    """The rewards TRL sums, with their weights: the mode's, then the recipe's extra functions
    (each imported and its signature checked)."""
    extra = load_extra_rewards(config.extra_reward_funcs, config.mode_spec.rewards)
    names = [*config.mode_spec.rewards, *(f"{f.__name__} ({spec})"
             for f, spec in zip(extra, config.extra_reward_funcs, strict=True))]  # fmt: skip
    weights = config.reward_weights or [
        *([1.0] * len(config.mode_spec.rewards)),
        *(config.extra_reward_weights or [1.0] * len(extra)),
    ]
    if len(weights) != len(names):
        raise TraacError(f"reward_weights: {len(weights)} weights for the {len(names)} rewards "
                         f"{', '.join(names)}; give one per reward")  # fmt: skip
    return ", ".join(f"{name} x{w:g}" for name, w in zip(names, weights, strict=True))


def optimizer_line(config: Any) -> str:
    return (
        f"lr {config.learning_rate:g} ({_name(config.lr_scheduler_type)}, {config.warmup_steps:g} "
        f"warm-up steps), weight decay {config.weight_decay:g}, KL beta {config.beta:g}, "
        f"clip {config.epsilon:g}/{config.epsilon_high:g}"
    )


def checkpoint_line(config: Any) -> str:
    strategy = _name(config.save_strategy)
    every = f"every {config.save_steps:g} steps" if strategy == "steps" else strategy
    return f"{every} (save_strategy); SIGINT/SIGTERM save one at the end of the current step"


def _name(choice: Any) -> str:
    """An enum choice of TrainingArguments as the text the recipe gave."""
    return str(getattr(choice, "value", choice))


def resume_line(config: Any) -> str:
    if not config.resume_from_checkpoint:
        return "no (fresh start)"
    found = resume_checkpoint(config.resume_from_checkpoint, config.output_dir)
    return found or "auto: no checkpoint in output_dir yet, starts fresh"
