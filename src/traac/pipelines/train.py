"""The training entry: a recipe (YAML + overrides) -> `TRAACTrainer` -> a trained model.

TRL's parser conventions: every field of `TrainScriptArguments` and `TRAACConfig` (so every
`GRPOConfig`/`TrainingArguments` field) can be set in the YAML recipe or on the command line,
the command line winning; an `env:` mapping in the recipe sets environment variables. The
problems are loaded before the model, so a bad row fails in seconds. `traac train`, the demo and
the experiments all come through `train`.
"""

from __future__ import annotations

import functools
import re
import types
import typing
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, NoReturn

import torch
from accelerate import PartialState
from accelerate.logging import get_logger
from transformers.trainer import TRAINER_STATE_NAME
from transformers.trainer_callback import ProgressCallback, TrainerState
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, sort_checkpoints
from trl import TrlParser

from traac.common.models import adapter_base, load_tokenizer, missing_model_files
from traac.common.outputs import writable_dir
from traac.common.progress import NullProgress, Progress, quiet_libraries
from traac.common.threads import check_threads, set_threads
from traac.common.trainer_progress import TrainerProgress
from traac.data.training import items_to_dataset, load_training_items, with_dataset_fields
from traac.errors import TraacError
from traac.pipelines.model_registry import resolve_model
from traac.pipelines.recipe import (
    check_spelling,
    config_path,
    dotted_options,
    read_recipe,
    unknown_option,
    unknown_recipe_field,
)
from traac.pipelines.recipe_effects import settings_without_effect
from traac.pipelines.recipe_fields import CHECKPOINTING
from traac.training.methods.registry import check_unused, spellings, split_blocks
from traac.training.planning.counts import COUNTS, check_counts
from traac.training.planning.lora import LoraArguments
from traac.training.planning.packages import check_packages
from traac.training.planning.traac_config import TRAACConfig
from traac.training.trl_adapter.checkpoint import STATE_FILE, check_resumable
from traac.training.trl_adapter.trainer import TRAACTrainer

logger = get_logger(__name__)
RESUME_LATEST = ("auto", "true", "latest")
_NO_RESUME = ("", "false", "no", "none")


@dataclass
class TrainScriptArguments(LoraArguments):
    """What to train (every weight, or LoRA adapters) and on which problems (the rest is
    `TRAACConfig`)."""

    model_name_or_path: str = field(
        default="testbed",
        metadata={
            "help": "testbed, testbed-quick, smollm2, a .gguf file, a model directory or hub id."
        },
    )
    dataset: str = field(
        default="testbed:all",
        metadata={"help": "Training problems: testbed[:TIER][?n=N&seed=S] or a dataset name."},
    )
    eval_dataset: str = field(
        default="",
        metadata={"help": "Held-out problems evaluated every eval_steps (with eval_strategy "
                  "steps), as for dataset: accuracy, mean length and think length per "
                  "difficulty tier to report_to and metrics.jsonl (unset: none)."},
    )  # fmt: skip
    prompt_suffix: str = field(
        default="", metadata={"help": "Text appended to every question (the paper's DAPO suffix)."}
    )
    # open-r1's dataset fields (its recipes carry over), read as options of the dataset spec
    dataset_prompt_column: str | None = field(
        default=None,
        metadata={"help": "The column holding the question, for a file or hub dataset (unset: "
                  "question, problem, prompt or input, whichever the rows have)."},
    )  # fmt: skip
    dataset_config: str | None = field(
        default=None, metadata={"help": "The hub dataset's config (subset) to train on."}
    )
    dataset_train_split: str | None = field(
        default=None,
        metadata={"help": "The hub dataset's split to train on (unset: test if it has one, "
                  "else its first)."},
    )  # fmt: skip
    system_prompt: str = field(
        default="", metadata={"help": "A system message opening every training prompt."}
    )
    num_threads: int | None = field(
        default=None,
        metadata={"help": "torch CPU threads (unset: torch's default)."},
    )  # fmt: skip
    dry_run: bool = field(
        default=False,
        metadata={"help": "Check the recipe, print the plan and exit 0 (no weights loaded, no "
                  "GPU needed); an invalid field exits 2."},
    )  # fmt: skip
    dry_run_processes: int | None = field(
        default=None,
        metadata={"help": "With --dry-run: plan for this many training processes (GPUs) "
                  "instead of this launch's."},
    )  # fmt: skip
    dry_run_sharding: str | None = field(
        default=None,
        metadata={"help": "With --dry-run: estimate memory for this sharding (none, zero1, zero2, "
                  "zero3, fsdp) instead of the accelerate launch's."},
    )  # fmt: skip

    # Fields the run will not read, noted rather than refused (`recipe_effects`); set by `parse`
    notes: ClassVar[tuple[str, ...]] = ()

    def training_spec(self) -> str:
        """`dataset` with the open-r1 dataset fields as its spec's options."""
        return with_dataset_fields(self.dataset, {
            "dataset_train_split": self.dataset_train_split,
            "dataset_config": self.dataset_config,
            "dataset_prompt_column": self.dataset_prompt_column,
        })  # fmt: skip


@dataclass(frozen=True)
class TrainResult:
    """How a run ended: the last step, and the signal that stopped it (None: finished)."""

    steps: int
    output_dir: str
    interrupted: int | None
    checkpoint: str | None = None


def parse(argv: list[str]) -> tuple[TrainScriptArguments, TRAACConfig]:
    """Recipe + overrides -> (script arguments, TRAACConfig); bad values -> TraacError. Fields
    the run would not read are refused, or noted in `script.notes` (`recipe_effects`)."""
    path = config_path(argv)
    recipe = check_recipe(path) if path is not None else {}
    # TRL's parser reads `--config RECIPE` only, not `--config=RECIPE`
    argv = [part for arg in argv
            for part in (arg.split("=", 1) if arg.startswith("--config=") else [arg])]  # fmt: skip
    check_spelling(spellings(), {}, argv)  # the command line's (the recipe's: `check_recipe`)
    parser = build_parser()
    try:
        with warnings.catch_warnings():
            # TRL's GRPOConfig sets gradient_checkpointing, which transformers 5.24 renamed: a
            # FutureWarning on every parse that the recipe's author can do nothing about.
            warnings.filterwarnings("ignore", "`gradient_checkpointing", FutureWarning)
            script, config = parser.parse_args_and_config(list(argv))
    except (ValueError, TypeError) as err:
        raise TraacError(str(err).splitlines()[0]) from err
    check_unused(parser.unused, config.run_context())  # other modes' settings, in range
    check_counts({n: getattr(script, n) for n in COUNTS if hasattr(script, n)})  # LoRA's, ...
    script.check_lora(config.use_vllm)
    if adapter_base(script.model_name_or_path) is not None:
        raise TraacError(
            f"model_name_or_path: {script.model_name_or_path} is a LoRA adapter directory; "
            "train from its base model (adapters are trained afresh with use_peft: true)"
        )
    line = {**parser.line, **parser.line_blocks}
    script.notes = tuple(settings_without_effect(recipe, line, config.mode, script.use_peft))
    config.settings_noted = True
    return script, config


def check_recipe(path: Path) -> dict[str, Any]:
    """Read a recipe as the parser will, naming what the parser would choke on (a YAML syntax
    error, a key written twice, a setting's other spelling, a list where a number belongs) in
    one line, before any work."""
    recipe = read_recipe(path)
    check_spelling(spellings(), recipe, [])
    hints = {**typing.get_type_hints(TRAACConfig), **typing.get_type_hints(TrainScriptArguments)}
    for name, value in recipe.items():
        kind = type(value).__name__
        if isinstance(value, (list, dict)) and name in hints and not _takes(hints[name], kind):
            raise TraacError(f"--config {path}: {name}: {value!r} is a {kind}; one value belongs")
    return recipe


def _takes(hint: Any, kind: str) -> bool:
    """Whether a field's type admits a list (or a dict)."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return any(_takes(a, kind) for a in typing.get_args(hint))
    origin = typing.get_origin(hint) or hint
    return getattr(origin, "__name__", "") == kind


def _checkpointing_names() -> dict[str, str]:
    """{name a recipe may use: the name the installed transformers takes}."""
    if hasattr(TRAACConfig, "activation_checkpointing"):
        return dict(CHECKPOINTING)
    return {new: old for old, new in CHECKPOINTING.items()}


class _Parser(TrlParser):
    """TRL's parser, reading either name of the checkpointing fields (`CHECKPOINTING`), after
    `parse` has checked each setting's spelling (`check_spelling`). Its errors are one line (no
    usage dump); an unknown field, in the recipe or on the command line, names the nearest one; a
    prefix of an option is never taken for it; a recipe's value of the wrong type is named before
    it reaches transformers. The methods' settings, in their blocks (a recipe's `alp: {beta:
    1.0}`, an option `--alp.beta 1.0`), are routed into `method_args` here, before `TRAACConfig`
    parses it (`route_settings`); those of other modes than the trained one are kept in
    `unused`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.recipe: dict[str, Any] = {}
        self.line: dict[str, Any] = {}  # the fields the command line set, by name, as parsed
        self.blocks: dict[str, dict[str, Any]] = {}  # the recipe's blocks of method settings
        self.line_blocks: dict[str, dict[str, Any]] = {}  # the command line's (`--alp.beta`)
        self.unused: dict[type, dict[str, Any]] = {}

    def set_defaults_with_config(self, **kwargs: Any) -> list[str]:
        self.blocks = {k: kwargs.pop(k) for k in list(kwargs) if k in spellings()}
        names = _checkpointing_names()
        values = {names.get(k, k): v for k, v in kwargs.items()}
        for action in self._actions:
            if action.dest in values:
                _check_type(action.dest, values[action.dest], action.type)
        self.recipe = values
        return super().set_defaults_with_config(**values)

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        parsed, rest = super().parse_known_args(args, namespace)
        options = {o: a.dest for a in self._actions for o in a.option_strings}
        line = {options[a.partition("=")[0]] for a in args or () if a.partition("=")[0] in options}
        self.line = {dest: getattr(parsed, dest) for dest in line}  # `--no_x` sets x
        self.unused = route_settings(parsed, self.blocks, self.line_blocks)
        return parsed, rest

    def parse_args_and_config(self, args: Any = None, **kwargs: Any) -> Any:
        if args is not None:
            self.line_blocks, args = dotted_options(list(args))
            names = _checkpointing_names()
            args = [_renamed_flag(a, names) for a in args]
        fields = sorted({a.dest for a in self._actions if a.dest != "help"})
        *parsed, from_recipe, from_line = super().parse_args_and_config(
            args, return_remaining_strings=True, separate_remaining_strings=True
        )
        if from_recipe:
            raise unknown_recipe_field(from_recipe[0][2:], fields)
        if from_line:
            flag = from_line[0].partition("=")[0]
            if not flag.startswith("--"):
                raise TraacError(f"unexpected argument {flag!r}; options are --field value")
            raise unknown_option(flag, fields)
        return tuple(parsed)

    def error(self, message: str) -> NoReturn:
        raise TraacError(f"{message} (see `traac train --help`)")


def route_settings(
    parsed: Any, recipe: dict[str, dict[str, Any]], line: dict[str, dict[str, Any]]
) -> dict[type, dict[str, Any]]:
    """The one place the methods' settings join `method_args`, on the parser's namespace
    `parsed`, before `TRAACConfig` parses it: each block of the recipe, the command line's
    options of that block over it (`--alp.beta`). The trained mode's block goes into
    `method_args`; those of other modes, which a recipe may hold for the variants that switch
    modes, are returned, by settings class (the parse checks them, and the run notes or refuses
    them: `recipe_effects`)."""
    merged = {b: {**recipe.get(b, {}), **line.get(b, {})} for b in {**recipe, **line}}
    parsed.method_args, others = split_blocks(merged, parsed.mode)
    return others


def _check_type(name: str, value: Any, kind: Any) -> None:
    """A recipe's number field holding text that is no number (TRL would pass it on as text)."""
    if isinstance(value, (list, tuple)):  # a list field (nargs): each element
        for item in value:
            _check_type(name, item, kind)
        return
    if kind not in (int, float) or value is None or isinstance(value, (int, float)):
        return
    try:
        kind(value)
    except (TypeError, ValueError):
        what = "an integer" if kind is int else "a number"
        raise TraacError(f"{name}: {value!r} must be {what}") from None


def _renamed_flag(arg: str, names: dict[str, str]) -> str:
    """`--old[=value]` as `--new[=value]` for a pair of `names`; anything else as it is."""
    flag, sep, value = arg.partition("=")
    if flag.startswith("--") and flag[2:] in names:
        return f"--{names[flag[2:]]}{sep}{value}"
    return arg


def build_parser() -> _Parser:
    """The train parser: `parse_args_and_config` returns the script arguments and the config
    (the methods' blocks routed into its `method_args`)."""
    return _Parser((TrainScriptArguments, TRAACConfig), prog="traac train", allow_abbrev=False)


def parse_recipe(
    argv: list[str], dry_run: bool
) -> tuple[TrainScriptArguments, TRAACConfig, str | None]:
    """`parse`, except that a dry run on a machine without a GPU validates a GPU recipe with
    `use_cpu` set (transformers refuses bf16 without a GPU); the note says so."""
    try:
        script, config = parse(argv)
        return script, config, None
    except TraacError:
        if not dry_run or torch.cuda.is_available():
            raise
    script, config = parse([*argv, "--use_cpu", "true"])
    note = ("the recipe trains on GPUs and none is visible here: validated as on the CPU; "
            "bf16 support and the GPU count are checked at run time")  # fmt: skip
    return script, config, note


def checkpoints(output_dir: str) -> list[str]:
    """The checkpoints of a run directory, oldest first (transformers' own scan)."""
    if not Path(output_dir).is_dir():
        return []
    return sort_checkpoints(output_dir, PREFIX_CHECKPOINT_DIR)


def resume_checkpoint(value: str | None, output_dir: str) -> str | None:
    """The checkpoint `--resume-from-checkpoint` names: a path, or `auto`/`true` for the newest
    complete `checkpoint-N` in `output_dir` (None: none yet, a fresh start)."""
    text = (value or "").strip()
    if text.lower() in _NO_RESUME:
        return None
    if text.lower() not in RESUME_LATEST:
        if not (Path(text) / "trainer_state.json").is_file():
            raise TraacError(f"resume_from_checkpoint: {text} is not a checkpoint directory "
                             "(no trainer_state.json); pass one, or auto")  # fmt: skip
        return text
    # A save cut short by a crash lacks the state files, which are written last.
    complete = [
        c for c in checkpoints(output_dir)
        if (Path(c) / "trainer_state.json").is_file() and (Path(c) / STATE_FILE).is_file()
    ]  # fmt: skip
    return complete[-1] if complete else None


def check_unfinished(checkpoint: str | None, max_steps: int) -> None:
    """A checkpoint already at `max_steps` is a finished run: transformers would still train one
    step past it (its stop test runs after a step) and overwrite the finished model."""
    if checkpoint is None or max_steps <= 0:
        return
    step = TrainerState.load_from_json(str(Path(checkpoint) / TRAINER_STATE_NAME)).global_step
    if step >= max_steps:
        raise TraacError(
            f"resume_from_checkpoint: {checkpoint} is at step {step} and max_steps is {max_steps}, "
            "so the run is finished; raise --max-steps to train on, or load the model from "
            "output_dir (or from that checkpoint)"
        )


def validate(script: TrainScriptArguments, config: TRAACConfig) -> str | None:
    """Every check of a parsed recipe that needs no weights, no data and no GPU of its own, run
    by `traac train --dry-run` (`make_plan`) and by `train` before any model loads, so that a
    recipe the dry run passes starts (what this machine lacks, a quantized base's CUDA, is the
    dry run's note and the run's error). Returns the checkpoint the run resumes from, if any."""
    writable_dir(config.output_dir, "output_dir")  # transformers makes it in Trainer.__init__
    check_packages(script, config)  # a logger or engine the recipe names
    check_evaluation(script, config)
    script.check_lora(config.use_vllm)
    check_threads(script.num_threads)
    check_trainer_arguments(script, config)
    check_launch(script, config)
    check_fresh_start(config)
    resume = resume_checkpoint(config.resume_from_checkpoint, config.output_dir)
    check_unfinished(resume, config.max_steps)
    if resume is not None:
        check_resumable(resume, config)
    return resume


def check_trainer_arguments(script: TrainScriptArguments, config: TRAACConfig) -> None:
    """Pairs of fields TRL's `GRPOTrainer` refuses only once the model is loaded (a ValueError
    after minutes of loading), in one line each before it."""
    init = config.model_init_kwargs or {}
    if script.quantized and "quantization_config" in init:
        raise TraacError(f"model_init_kwargs: a quantization_config beside "
                         f"{script.quantization_field}; keep one of them")  # fmt: skip
    if config.sync_ref_model and config.beta == 0.0:
        raise TraacError("sync_ref_model: with beta 0 there is no reference model to sync; set "
                         "sync_ref_model false or beta above 0")  # fmt: skip
    if config.sync_ref_model and script.use_peft:
        raise TraacError("sync_ref_model: LoRA's reference is the base with its adapters "
                         "disabled, which TRL cannot sync; set sync_ref_model false")  # fmt: skip
    if (config.liger_kernel_config or {}).get("fused_linear_cross_entropy"):
        raise TraacError("liger_kernel_config: fused_linear_cross_entropy replaces the model's "
                         "forward, which the trainer patches; leave it out")  # fmt: skip


def check_launch(script: TrainScriptArguments, config: TRAACConfig) -> None:
    """One process that sees several GPUs would train through `nn.DataParallel`, which TRL's
    GRPO trainer refuses after loading the model. A dry run planning a launch
    (`--dry-run-processes`) is not that process."""
    if config.n_gpu > 1 and script.dry_run_processes is None:
        raise TraacError(
            f"{config.n_gpu} GPUs are visible to one training process; launch one process per GPU "
            "(accelerate launch --config-file recipes/accelerate/zero2.yaml -m traac.cli train "
            "...) or train on one: CUDA_VISIBLE_DEVICES=0"
        )


def check_evaluation(script: TrainScriptArguments, config: TRAACConfig) -> None:
    """`eval_dataset` and `eval_strategy` come together: one without the other is a recipe
    whose evaluation would never run, or fail at trainer init."""
    strategy = str(getattr(config.eval_strategy, "value", config.eval_strategy))
    if strategy != "no" and not script.eval_dataset:
        raise TraacError(f"eval_strategy: {strategy} needs held-out problems; set eval_dataset "
                         "(a dataset spec, e.g. testbed:all?n=64)")  # fmt: skip
    if script.eval_dataset and strategy == "no":
        raise TraacError("eval_dataset: set, but eval_strategy is no, so it is never evaluated; "
                         "add eval_strategy: steps and eval_steps: N")  # fmt: skip


def check_fresh_start(config: TRAACConfig) -> None:
    """A run into a directory that holds checkpoints must say whether it continues them."""
    found = checkpoints(config.output_dir)
    if found and not (config.resume_from_checkpoint or "").strip():
        last = re.sub(r".*/", "", found[-1])
        raise TraacError(
            f"output_dir {config.output_dir} already holds {last}; pass "
            "--resume-from-checkpoint auto to continue it, or another --output-dir"
        )


def check_final_model(output_dir: str) -> None:
    """The trained model must load from `output_dir` before the run reports success: under FSDP
    with a sharded state dict, or ZeRO-3 without 16-bit gathering, transformers saves no weights
    (nor, under FSDP, a config) there, and every later command would fail on it."""
    problem = missing_model_files(output_dir)
    if problem is not None:
        raise TraacError(
            f"output_dir {output_dir}: the trained model was not saved ({problem}); in the "
            "accelerate config set fsdp_state_dict_type: FULL_STATE_DICT (FSDP) or "
            "zero3_save_16bit_model: true (ZeRO-3); any checkpoint-N keeps the weights"
        )


def train(
    script: TrainScriptArguments, config: TRAACConfig, progress: Progress | None = None
) -> TrainResult:
    """Train to the end, or until SIGINT/SIGTERM (checkpoint saved, `interrupted` set)."""
    PartialState()  # this launch's processes, before anything logs
    resume = validate(script, config)  # what the dry run checks, before any model loads
    for note in script.notes:  # what the dry run's plan notes
        logger.warning(f"note: {note}")
    script.check_quantization()  # a 4-bit base on a machine without CUDA: one line, at once
    items = load_training_items(script.training_spec())  # bad rows fail here, before the model
    held_out = load_training_items(script.eval_dataset) if script.eval_dataset else None
    if config.resume_from_checkpoint and resume is None:
        logger.info(f"no checkpoint in {config.output_dir} yet; starting fresh")
    model_path = resolve_model(script.model_name_or_path, progress)
    if script.use_peft and Path(model_path).is_dir():  # the adapter names its base absolutely
        model_path = str(Path(model_path).resolve())
    tokenizer = load_tokenizer(model_path)
    tokenizer.padding_side = "left"
    set_threads(script.num_threads)
    to_dataset = functools.partial(
        items_to_dataset,
        prompt_suffix=script.prompt_suffix,
        system_prompt=script.system_prompt,
        conversational=bool(getattr(tokenizer, "chat_template", None)),
    )
    dataset = to_dataset(items)
    eval_dataset = to_dataset(held_out) if held_out else None
    with quiet_libraries():  # our progress instead of the libraries' load/save/map bars
        trainer = TRAACTrainer(
            model_path,
            args=config,
            train_dataset=dataset,
            eval_dataset=eval_dataset,
            processing_class=tokenizer,
            **script.trainer_kwargs(config.bf16),
        )
        trainer.base_model_name = script.model_name_or_path  # the card names it, not the cache
        if not config.disable_tqdm:
            # transformers' bar prints every step's log dict (the telemetry holds them)
            trainer.remove_callback(ProgressCallback)
            trainer.add_callback(
                TrainerProgress(progress or NullProgress(), f"{config.mode} steps")
            )
        trainer.train(resume_from_checkpoint=resume)
        step = trainer.state.global_step
        if trainer.interrupted is None:  # train() saved the model, tokenizer and card
            if trainer.args.should_save:  # the process that wrote it
                check_final_model(config.output_dir)
            return TrainResult(step, config.output_dir, None)
        checkpoint = str(Path(config.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{step}")
        return TrainResult(step, config.output_dir, trainer.interrupted, checkpoint)
