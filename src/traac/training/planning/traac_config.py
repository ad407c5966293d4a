"""`TRAACConfig`: TRL's `GRPOConfig` plus what every TRAAC run shares (docs/method.md), and the
trained method's own settings, one field: `method_args`, parsed once (`method_settings`) into
the settings class of its mode's entry in `traac.training.methods.registry.METHODS` (a recipe
writes them in the mode's block, `alp: {beta: 1.0}`, which the train parser routes there).

The defaults are the paper's but one: `preset: traac` masks the compressed copies' think blocks
from the loss (the verdict study, docs/method.md#copies). Where a field left unset (`None`)
takes its value (the preset, then the optimiser profile with what the mode needs; a method's
`resolved`) is told once, in docs/training.md#defaults; `__post_init__` applies them in that
order and checks every field once, with the check helpers of `traac.compression.settings`.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

import torch
from trl import GRPOConfig

from traac.compression.difficulty import DifficultySettings
from traac.compression.rewards import REWARD_PRESETS, RewardSettings
from traac.compression.settings import (
    CompressionSettings,
    FormatSettings,
    check_choice,
    check_phrases,
    check_positive,
    preset_name,
)
from traac.errors import TraacError
from traac.training.methods.base import MethodRun, MethodSettings, RunContext, declared_in
from traac.training.methods.registry import (
    METHODS,
    Method,
    blocks,
    check_unused,
    method_mapping,
    parse_settings,
    split_blocks,
)
from traac.training.methods.traac import TraacMethod, TraacSettings
from traac.training.planning.counts import COUNTS, check_counts
from traac.training.planning.extra_rewards import check_extra_weights
from traac.training.planning.precision import DTYPE_NAMES, load_dtype, resolve_bf16
from traac.training.planning.presets import PRESET_FILLS, apply_preset
from traac.training.planning.profiles import OPTIMIZER_PROFILES, PROFILE_FIELDS, resolve_profile
from traac.training.planning.rollout_batching import ROLLOUT_BATCHINGS, check_refill

DYNAMIC_SAMPLING = ("none", "drop", "resample")
_NONNEGATIVE_FIELDS = ("correctness_reward", "length_weight", "beta")
# GRPO settings that transformers and TRL accept but no run can use (NaN fails too); each
# method's own fields are checked by its settings (`traac.training.methods`).
_POSITIVE_FIELDS = ("learning_rate", "temperature", "max_completion_length", "top_p")
_COUNT_FIELDS = ("length_window_steps", "max_resample_rounds")


class TRAACConfigError(TraacError, ValueError):
    """An invalid configuration value; the message names the field (a ValueError for API users)."""


def _mode_help() -> str:
    own = [f"{m.name} ({m.help})" for m in METHODS.values() if isinstance(m, TraacMethod)]
    peers = [f"{m.name} ({m.help})" for m in METHODS.values() if not isinstance(m, TraacMethod)]
    return (
        f"{' | '.join(own)} | a peer method, whose length term replaces TRAAC's length reward "
        "and compression (correctness and format stay; docs/peer_methods.md): "
        f"{' | '.join(peers)}."
    )


@dataclass
class TRAACConfig(GRPOConfig, FormatSettings):  # type: ignore[misc]
    r"""Configuration of [`TRAACTrainer`]: every `GRPOConfig` field, the think format the
    commands share (`traac.compression.settings.FormatSettings`), the fields every TRAAC run shares
    (below), and `method_args`, the trained method's own settings.

    Deviations from TRL's defaults follow the paper (docs/method.md#grpo): `beta=0.001` (TRL's KL
    estimator is k3, the paper's "low-variance KL"), `weight_decay=0.1`, 10 warm-up steps at a
    constant rate, `max_completion_length=10000`, `logging_steps=1`; and, through the default
    optimiser profile `grpo`, `epsilon_high=0.28` and `loss_type="grpo"` (the appendix
    objective averages each rollout over its own tokens).

    Every field is documented once, in its help (`traac train --help` prints it):

    Parameters: its fields' help

    Telemetry needs no field: every step goes to TRL's logs and to `metrics.jsonl` in
    `output_dir` (`traac.training.telemetry.step_stats`).
    """

    # --- GRPO defaults that differ from TRL's (docs/method.md#grpo) ---
    beta: float = field(default=0.001, metadata={"help": "KL coefficient (paper: 0.001, k3)."})
    epsilon_high: float | None = field(
        default=None, metadata={"help": "Upper clip ratio (unset: the optimizer_profile's, 0.28)."}
    )
    scale_rewards: str | None = field(
        default=None,
        metadata={"help": "TRL's reward scaling: group | batch | none (unset: none for a mode "
                  "that needs it, ddca or arlcp; else the optimizer_profile's; grpo: group, "
                  "dler: batch)."},
    )  # fmt: skip
    weight_decay: float = field(default=0.1, metadata={"help": "AdamW weight decay."})
    warmup_steps: float = field(default=10, metadata={"help": "Learning-rate warm-up steps."})
    lr_scheduler_type: str = field(
        default="constant_with_warmup",
        metadata={"help": "Scheduler (paper: constant after warm-up)."},
    )
    max_completion_length: int | None = field(
        default=10000, metadata={"help": "Maximum response tokens (paper: 10k)."}
    )
    loss_type: str | None = field(
        default=None,
        metadata={"help": "GRPO loss aggregation (unset: the optimizer_profile's; grpo: grpo, "
                  "the paper's per-rollout token mean; dler: dapo, the batch's token mean)."},
    )  # fmt: skip
    logging_steps: float = field(default=1, metadata={"help": "Log every N optimizer steps."})

    # Its fields without effect in its mode already noted or refused, by who set them (`traac
    # train` does, `traac.pipelines.recipe_effects`); else `TRAACTrainer` notes them
    settings_noted = False

    # --- TRAAC ---
    mode: str = field(default="traac", metadata={"help": _mode_help()})
    optimizer_profile: str | None = field(
        default=None,
        metadata={"help": "The optimiser, separate from the reward: grpo (the paper's GRPO; the "
                  "default) | dler (DLER's: batch-level reward normalisation, clip-higher, "
                  "token-mean loss, dynamic sampling). Sets scale_rewards, epsilon_high, "
                  "loss_type and dynamic_sampling where they are unset; an explicit value that "
                  "differs from an explicit profile's is an error.",
                  "choices": tuple(OPTIMIZER_PROFILES)},
    )  # fmt: skip
    preset: str = field(
        default="traac",
        metadata={"help": "traac (the paper's values, the copies' think blocks masked: "
                  "copy_loss answer_only) | paper (the paper's exact form) | authors (the "
                  "authors' code): the values of the fields left unset (format_preset, "
                  "length_weight, probe_layers, copy_pool, copy_loss; authors also loss_type "
                  "dapo, the token mean, unless optimizer_profile is set). reference, the "
                  "authors' old name, still works."},
    )  # fmt: skip
    method_args: dict[str, Any] | None = field(
        default=None,
        metadata={"help": "The mode's own settings, one mapping parsed once into its settings "
                  "class (method_settings; docs/training.md, docs/peer_methods.md). Keys left "
                  "out keep their defaults (probe_layers, copy_pool, copy_loss the preset's); a "
                  "key the mode does not have is refused, naming those it has. A recipe writes "
                  "them in the mode's block (traac: {scorer: random}; --traac.scorer random) "
                  "and may hold other modes' blocks, unused. After the parse it holds every "
                  "key."},
    )  # fmt: skip
    # A `Field`, as CompressionSettings declares it (shared: the peers that read steps split too)
    split_phrases: list[str] | None = declared_in(CompressionSettings, "split_phrases")  # noqa: RUF009
    difficulty: dict[str, Any] | str | None = field(
        default=None,
        metadata={"help": "The pass-rate bins, one mapping (JSON on the command line): "
                  "easy_threshold (0.8: a pass rate at least this is easy), medium_threshold "
                  "(0.3: at least this, medium; below, hard), tau (the compression target per "
                  "bin, {easy: 0.6, medium: 0.4, hard: 0.2}), length_scale (the length "
                  "reward's scale per bin, {easy: 1.0, medium: 0.75, hard: 0.5}), single_tau "
                  "and single_scale (0.6, 1.0: the one bin of the modes without bins). Keys "
                  "left out keep these values; the flat fields of earlier releases (tau_easy, "
                  "...) are refused with their new spelling."},
    )  # fmt: skip
    correctness_reward: float = field(default=4.0, metadata={"help": "Reward of a right answer."})
    format_preset: str | None = field(
        default=None, metadata={"help": "Format reward: paper (0.5+0.5) | authors (0.25+0.25)."}
    )
    length_weight: float | None = field(
        default=None, metadata={"help": "Length reward weight W (paper 2, authors 1)."}
    )
    length_window_steps: int = field(
        default=10,
        metadata={"help": "Training steps kept in each (data source, bin) length window."},
    )
    # --- rewards a recipe adds (traac.training.planning.extra_rewards) ---
    extra_reward_funcs: list[str] = field(
        default_factory=list,
        metadata={"help": "Reward functions added to the mode's own, as module:function paths "
                  "(TRL's signature: f(prompts, completions, **kwargs) -> list[float])."},
    )  # fmt: skip
    extra_reward_weights: list[float] | None = field(
        default=None,
        metadata={"help": "One weight per extra_reward_funcs entry (unset: 1 each; the mode's "
                  "own rewards keep weight 1); or set TRL's reward_weights for every reward."},
    )  # fmt: skip

    # --- how rollouts decode (traac.training.planning.rollout_batching) ---
    rollout_batching: str = field(
        default="padded",
        metadata={"help": "Transformers generation of rollouts and re-answers: padded (TRL's "
                  "generate: a batch decodes until its longest completion ends) | refill "
                  "(traac's engine: each row leaves the batch as it ends; temperature and "
                  "top_p only)."},
    )  # fmt: skip

    logprob_rows: int | None = field(
        default=None,
        metadata={"help": "Rows per log-prob forward (reference, old policy, loss), sorted by "
                  "length so that each chunk is cut to its own longest row "
                  "(traac.training.trl_adapter.padding); unset: TRL's chunks, in batch order."},
    )  # fmt: skip

    # --- dynamic sampling (every mode) ---
    dynamic_sampling: str | None = field(
        default=None,
        metadata={"help": "Groups whose rollouts are all right or all wrong carry no "
                  "correctness signal: none (train on them) | drop (mask them out of the loss) "
                  "| resample (DAPO: replace their prompts with fresh ones from the training "
                  "set, up to max_resample_rounds times, then drop what is left). Decided on "
                  "the verifiers' verdicts only, never on the shaped reward. Unset: the "
                  "optimizer_profile's (grpo: none, dler: resample)."},
    )  # fmt: skip
    max_resample_rounds: int = field(
        default=2,
        metadata={"help": "dynamic_sampling resample: extra generation rounds per step at most "
                  "(DAPO's max_num_gen_batches)."},
    )  # fmt: skip

    @classmethod
    def from_recipe(cls, **values: Any) -> TRAACConfig:
        """A config from keyword arguments spelt as a recipe, each method's settings in its
        block (`traac={"scorer": "random"}`): the trained mode's block is its `method_args`;
        another mode's is unused, and checked, as `traac train` treats a recipe's
        (`traac.pipelines.train.route_settings`)."""
        given = {name: values.pop(name) for name in list(values) if name in blocks()}
        mode = values.get("mode", "traac")
        own, others = split_blocks(given, mode)
        config = cls(**values, method_args=own)
        check_unused(others, config.run_context())
        return config

    def __post_init__(self) -> None:
        try:
            check_choice("mode", self.mode, tuple(METHODS))  # its settings class comes next
            self.method_args = method_mapping(self.method_args)
            self.preset_pinned = apply_preset(self)  # before the profile: loss_type (presets)
            self._check_rules(self._resolve_profile())
            self._validate_traac()
            FormatSettings.__post_init__(self)
            self.bf16 = resolve_bf16(self.bf16, self.fp16, self.use_cpu)
        except TraacError as error:  # a ValueError too, as transformers' own checks raise
            raise TRAACConfigError(str(error)) from None
        super().__post_init__()
        if self.load_dtype is not None:  # TRL loads float32 unless told (policy and reference)
            self.model_init_kwargs = {"dtype": DTYPE_NAMES[self.load_dtype],
                                      **(self.model_init_kwargs or {})}  # fmt: skip

    @property
    def load_dtype(self) -> torch.dtype | None:
        """The dtype every model of the run loads in (`precision.load_dtype`)."""
        return load_dtype(self.model_init_kwargs, self.bf16, self.fp16)

    def _resolve_profile(self) -> dict[str, Any]:
        """The optimiser profile's values for the fields left unset (`resolve_profile`), with
        what the mode needs (its method's `RunRule`s) over the default profile's. Returns the
        rules' fields as given (None: unset), for `_check_rules` to name a profile's value."""
        rules = METHODS[self.mode].rules
        given = {rule.field: getattr(self, rule.field) for rule in rules}
        needs = {rule.field: rule.needs for rule in rules if rule.needs is not None}
        values = {name: getattr(self, name) for name in PROFILE_FIELDS}
        aggregation = self.multi_objective_aggregation
        resolved = resolve_profile(self.optimizer_profile, values, aggregation, needs)
        for name, value in resolved.items():
            setattr(self, name, value)
        return given

    def _check_rules(self, given: dict[str, Any]) -> None:
        """A value that cancels the mode (its method's `RunRule`s), set or the profile's, in one
        line naming it and the fix."""
        for rule in METHODS[self.mode].rules:
            value = getattr(self, rule.field)
            if not rule.broken_by(value):
                continue
            profile = self.optimizer_profile if given[rule.field] is None else None
            raise TraacError(rule.message(self.mode, value, profile))

    def _validate_traac(self) -> None:
        if self.format_preset is not None:
            self.format_preset = preset_name("format_preset", self.format_preset)
            check_choice("format_preset", self.format_preset, tuple(REWARD_PRESETS))
        choices = {
            "dynamic_sampling": DYNAMIC_SAMPLING,
            "scale_rewards": ("group", "batch", "none"),
            "rollout_batching": ROLLOUT_BATCHINGS,
        }
        for name, allowed in choices.items():
            check_choice(name, getattr(self, name), allowed)
        counts = [name for name in ("max_steps", *COUNTS) if hasattr(self, name)]
        check_counts({name: getattr(self, name) for name in counts})  # TRL's and transformers'
        self.difficulty = self.difficulty_config().to_recipe()  # checked, every key given
        check_refill(self)
        for name in _NONNEGATIVE_FIELDS:
            if getattr(self, name) is not None:
                check_positive(name, getattr(self, name), zero=True)
        for name in _POSITIVE_FIELDS:
            if getattr(self, name) is not None:
                check_positive(name, getattr(self, name))
        for name in _COUNT_FIELDS:
            check_positive(name, getattr(self, name), integer=True)
        if self.logprob_rows is not None:
            check_positive("logprob_rows", self.logprob_rows, integer=True)
        check_phrases(self.split_phrases)
        # The one parse of the mode's own settings; every key given from here on
        self.method_settings: MethodSettings | None = parse_settings(
            self.mode, self.method_args, self.run_context()
        )
        if self.method_settings is not None:
            self.method_args = dataclasses.asdict(self.method_settings)
        check_extra_weights(self.extra_reward_funcs, self.extra_reward_weights, self.reward_weights)
        self.method_run()  # resolved: DLER's limit, Laser-D's, L1's within the cap

    # --- derived settings the trainer reads ---

    @property
    def traac_settings(self) -> TraacSettings:
        """The compression settings: the mode's own where it compresses; else the defaults
        with the preset's values, for what compresses with them after training (the demo's
        think-budget sweep)."""
        if isinstance(self.method_settings, TraacSettings):
            return self.method_settings
        keys = TraacSettings.names()
        return TraacSettings(**{k: v for k, v in PRESET_FILLS[self.preset].items() if k in keys})

    def setting(self, name: str, absent: Any = None) -> Any:
        """A setting of this run by name: the config's field, else its mode's own (`absent`:
        the mode has no such setting), for what reports settings by name (the preset rows)."""
        if self.method_settings is not None and name in self.method_settings.names():
            return getattr(self.method_settings, name)
        names = {f.name for f in dataclasses.fields(self)} - {"method_args"}
        return getattr(self, name) if name in names else absent

    def compression_settings(self, model_type: str | None, name: str = "") -> CompressionSettings:
        """The recipe's compression settings alone (probe layers resolved for the model, as
        set or the preset's: `TraacSettings.probe_layers_for`): what test-time compression of
        the trained model uses, so it prunes as training did."""
        settings = self.traac_settings
        return settings.compression_settings(
            settings.probe_layers_for(model_type, name), self.split_phrases
        )

    @property
    def mode_spec(self) -> Method:
        """What `mode` trains: compression, bins and rewards (`traac.training.methods`)."""
        return METHODS[self.mode]

    @property
    def compresses(self) -> bool:
        """Whether right rollouts are compressed and re-answered (docs/method.md#step, 4-6)."""
        return self.mode_spec.compresses

    def difficulty_config(self) -> DifficultySettings:
        """Bins, tau and length scale per bin; one bin (`all`) in the modes without difficulty.
        The peer modes keep the bins for telemetry only (nothing of theirs reads a bin)."""
        values = self.difficulty
        if isinstance(values, str):  # JSON, from the command line
            try:
                values = json.loads(values)
            except json.JSONDecodeError as err:
                raise TraacError(f"difficulty: {values!r} is not JSON ({err.msg})") from None
        return DifficultySettings.from_recipe(values, enabled=self.mode_spec.bins)

    def reward_config(self) -> RewardSettings:
        """TRAAC's reward weights (which rewards a mode sums is `mode_spec.rewards`)."""
        return RewardSettings.preset(
            self.format_preset,
            correct=self.correctness_reward,
            length_weight=self.length_weight,
            window_size=int(self.length_window_steps),
        )

    def run_context(self) -> RunContext:
        """The run's values every method's settings resolve against."""
        return RunContext(
            correctness_reward=self.correctness_reward,
            max_completion_length=int(self.max_completion_length),
            easy_threshold=self.difficulty_config().easy_threshold,
            num_generations=int(self.num_generations),
        )

    def method_run(self) -> MethodRun | None:
        """The method with its own values, defaults resolved against the run; None for a
        method with no length term of its own (its `run_of`)."""
        return self.mode_spec.run_of(self.method_settings, self.run_context())
