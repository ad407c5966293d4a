"""`TRAACConfig`: TRL's `GRPOConfig` plus what TRAAC adds (docs/method.md).

Defaults are the paper's. `preset: authors` switches to the authors' implementation where it
differs from the paper (format 0.25 + 0.25, length weight W = 1, probe layers = first half of the
model, every right rollout re-answered, token-mean loss; `traac.training.presets`) unless a
field is set explicitly: those fields default to `None`, "from preset".
What each `mode` trains is its entry in `traac.training.methods.registry.METHODS`; the peer methods
(one module each, whose fields this class inherits) carry their papers' values, and
`dynamic_sampling` filters groups on correctness for every mode. `optimizer_profile`
(`traac.training.profiles`) sets `scale_rewards`, `epsilon_high`, `loss_type` and
`dynamic_sampling` together, for every mode; those four default to `None`, "from the profile".
Every field is checked once, in `__post_init__`, with the check helpers of `traac.method.settings`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any

import torch
from trl import GRPOConfig

from traac.common.scoring_model import check_scoring_model
from traac.errors import TraacError
from traac.method.difficulty import DifficultySettings
from traac.method.early_exit import EARLY_EXIT_MODES, PREFIX_COMPRESSIONS
from traac.method.rewards import RewardSettings
from traac.method.settings import (
    SCORERS,
    CompressionSettings,
    FormatSettings,
    check_choice,
    check_positive,
    preset_name,
)
from traac.training.copies import CopySettings
from traac.training.counts import COUNTS, check_counts
from traac.training.extra_rewards import check_extra_weights
from traac.training.methods.base import MethodRun, RunContext
from traac.training.methods.registry import (
    METHODS,
    Method,
    check_methods,
    compressing_methods,
    method_fields,
    method_run,
)
from traac.training.precision import DTYPE_NAMES, load_dtype, resolve_bf16
from traac.training.presets import PRESET_NAMES, apply_preset, authors_probe_layers
from traac.training.profiles import OPTIMIZER_PROFILES, PROFILE_FIELDS, resolve_profile
from traac.training.rollouts import ROLLOUT_BATCHINGS, check_refill

DYNAMIC_SAMPLING = ("none", "drop", "resample")
CALIBRATIONS = ("none", "rank")
_NONNEGATIVE_FIELDS = ("correctness_reward", "length_weight", "beta")
# GRPO settings that transformers and TRL accept but no run can use (NaN fails too); each
# method's own fields are checked by its settings (`traac.training.methods`).
_POSITIVE_FIELDS = ("learning_rate", "temperature", "max_completion_length", "top_p")
_COUNT_FIELDS = ("length_window_steps", "calibration_window", "max_resample_rounds")


class TRAACConfigError(TraacError, ValueError):
    """An invalid configuration value; the message names the field (a ValueError for API users)."""


def _mode_help() -> str:
    own = [f"{m.name} ({m.help})" for m in METHODS.values() if m.settings is None]
    peers = [f"{m.name} ({m.help})" for m in METHODS.values() if m.settings is not None]
    return (
        f"{' | '.join(own)} | a peer method, whose length term replaces TRAAC's length reward "
        "and compression (correctness and format stay; docs/peer_methods.md): "
        f"{' | '.join(peers)}."
    )


@dataclass
class TRAACConfig(  # type: ignore[misc]
    GRPOConfig, CompressionSettings, FormatSettings, CopySettings, method_fields()
):
    r"""Configuration of [`TRAACTrainer`]: every `GRPOConfig` field, the compression and think
    format settings the commands share (`traac.method.settings`), what the compressed copies
    are trained on (`traac.training.copies`), and the TRAAC fields below.

    Deviations from TRL's defaults follow the paper (docs/method.md#grpo): `beta=0.001` (TRL's KL
    estimator is k3, the paper's "low-variance KL"), `weight_decay=0.1`, 10 warm-up steps at a
    constant rate, `max_completion_length=10000`, `logging_steps=1`; and, through the default
    optimiser profile `grpo`, `epsilon_high=0.28` and `loss_type="grpo"` (the appendix
    objective averages each rollout over its own tokens).

    Parameters:
        > Parameters that choose the method

        mode (`str`, *optional*, defaults to `"traac"`):
            What is trained (`traac.training.methods.registry`): `traac`; the ablations `cr`
            (correctness only), `cr_lr` (+ format + length, one bin, no compression),
            `compression_no_difficulty` (one bin at `difficulty.single_tau`) and the control
            `traac_no_compression` (TRAAC's bins and length rewards, no compression); or a peer
            method (`alp`, `shorterbetter`, `kimi`, `dapo_overlong`, `l1_max`, `dler`,
            `dler_difficulty`, `laser_d`) whose length term replaces TRAAC's length reward and
            compression.
        optimizer_profile (`str` or `None`, *optional*, defaults to `None`):
            `grpo` (the paper's GRPO, the default when unset) or `dler` (DLER's optimiser:
            batch-level reward normalisation, clip-higher, token-mean loss, dynamic sampling):
            the values of `scale_rewards`, `epsilon_high`, `loss_type` and `dynamic_sampling`
            left unset (`traac.training.profiles`). Works with every mode.
        preset (`str`, *optional*, defaults to `"paper"`):
            `paper` or `authors` (the authors' code; `reference`, its old name, still works):
            the values of `format_preset`, `length_weight`, `probe_layers`, `copy_pool`,
            `copy_loss` and (authors, with no `optimizer_profile` set) `loss_type` left unset
            (`traac.training.presets`).

        > Parameters that control compression (with `traac.method.settings.CompressionSettings`:
        > `scorer`, `probe_heads`, `step_scope`, `uniformity_gate`, `eviction_cap`, ...)

        compression (`str`, *optional*, defaults to `"scorer"`):
            `scorer` (the scorer's), the authors' oracle ablations (`traac.method.early_exit`):
            `early_exit` or `early_exit_attention_weights`, or `after_answer` (beyond the
            paper: the scorer evicts only steps after the first one the verifier accepts, and
            a trace with no such step is kept whole).
        scoring_model (`str`, *optional*, defaults to `"reference"`):
            The model the probe runs through: `reference` (TRL's frozen KL reference model, or
            a frozen copy of the initial policy when `beta=0`), `policy`, or any other model
            name or path: a frozen foreign scorer (beyond the paper, as LLMLingua lets a small
            LM compress prompts for a large one) that reads the steps through its own
            tokenizer; check its precision per tier with `traac probe-report --scoring-model`.
        probe_layers (`str` or `None`, *optional*, defaults to `None`):
            Attention layers averaged: `all`, `first_half` or comma-separated indices; unset,
            the preset's (paper: all; authors: all for the R1 distills, the first half for
            Qwen3 and, traac's choice, every other model).
        uniformity_calibration (`str`, *optional*, defaults to `"none"`):
            `none` (the paper) or `rank`: each uniformity is replaced by its rank among the
            last `calibration_window` correct rollouts' before the gate.
        calibration_window (`int`, *optional*, defaults to `512`):
            Recent uniformities the rank calibration compares with.
        copy_loss (`str` or `None`, *optional*, defaults to `None`):
            `full` (the paper) or `answer_only`: a compressed copy's think block is masked
            from the loss and only its re-answer trained on (`traac.training.copies`); unset,
            the preset's (`full` for both).
        copy_pool (`str` or `None`, *optional*, defaults to `None`):
            Which candidates are re-answered and pooled: `evicted` (those that lost a step) or
            `all_correct` (every one, the authors' code); unset, the preset's.
        copy_tags (`str`, *optional*, defaults to `"single"`):
            `single`, or `double`: the copies' think blocks carry two openers and closers, as
            the authors' code's do (an accident, reproduced only on request).

        > Parameters that control difficulty (docs/method.md#step, step 3)

        difficulty (`dict` or `None`, *optional*, defaults to `None`):
            The pass-rate bins (`traac.method.difficulty.DifficultySettings.from_recipe`), one
            mapping: `easy_threshold` (0.8: a prompt whose pass rate is at least this is easy),
            `medium_threshold` (0.3: at least this, medium; below it, hard), `tau` (the target
            compression rate per bin, `{easy: 0.6, medium: 0.4, hard: 0.2}`), `length_scale`
            (the length reward's scale per bin, `{easy: 1.0, medium: 0.75, hard: 0.5}`),
            `single_tau` and `single_scale` (0.6 and 1.0: the one bin of the modes without
            bins). Keys left out keep these values; on the command line, as JSON
            (`--difficulty '{"tau": {"hard": 0.3}}'`). The flat fields of earlier releases
            (`tau_easy`, `length_scale_hard`, ...) are refused with their new spelling.

        > Parameters that control the rewards (docs/method.md#rewards)

        correctness_reward (`float`, *optional*, defaults to `4.0`):
            The reward of a right answer, in every mode.
        format_preset (`str` or `None`, *optional*, defaults to `None`):
            Format reward: `paper` (0.5 + 0.5) or `authors` (0.25 + 0.25); unset, the preset's.
        length_weight (`float` or `None`, *optional*, defaults to `None`):
            Length reward weight W (paper 2, authors 1); unset, the preset's.
        length_window_steps (`int`, *optional*, defaults to `10`):
            Training steps kept in each (data source, bin) length window.

        > Parameters that add rewards (`traac.training.extra_rewards`)

        extra_reward_funcs (`list[str]`, *optional*, defaults to `[]`):
            `module:function` paths of reward functions with TRL's signature, summed after the
            mode's own rewards.
        extra_reward_weights (`list[float]` or `None`, *optional*, defaults to `None`):
            Their weights (unset: 1 each); or set TRL's `reward_weights` for every reward.

        > Parameters that control dynamic sampling (every mode)

        dynamic_sampling (`str` or `None`, *optional*, defaults to `None`):
            For groups whose verdicts all agree: `none` (train on them), `drop` (mask them out
            of the loss) or `resample` (DAPO: new prompts, then drop what is left); unset, the
            optimiser profile's (`grpo`: none, `dler`: resample).
        max_resample_rounds (`int`, *optional*, defaults to `2`):
            Extra generation rounds per step at most (DAPO's `max_num_gen_batches`).

        > Parameters of the peer methods (docs/peer_methods.md)

        Each method's fields (`alp_beta`, `dler_length`, `laser_bonus`, ...) are declared with
        their defaults, help and checks in its module (`traac.training.methods`), and
        inherited from the registry (`traac.training.methods.registry.method_fields`).

        Telemetry needs no field: every step goes to TRL's logs and to `metrics.jsonl` in
        `output_dir` (`traac.training.telemetry`).
    """

    # --- GRPO defaults that differ from TRL's (docs/method.md#grpo) ---
    beta: float = field(default=0.001, metadata={"help": "KL coefficient (paper: 0.001, k3)."})
    epsilon_high: float | None = field(
        default=None, metadata={"help": "Upper clip ratio (unset: the optimizer_profile's, 0.28)."}
    )
    scale_rewards: str | None = field(
        default=None,
        metadata={"help": "TRL's reward scaling: group | batch | none (unset: the "
                  "optimizer_profile's; grpo: group, dler: batch)."},
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

    _layers_from_preset = True  # unset probe_layers: the preset's, per model
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
        default="paper",
        metadata={"help": "paper | authors (the authors' code): the values of the fields left "
                  "unset (format_preset, length_weight, probe_layers, copy_pool, copy_loss; "
                  "authors also loss_type dapo, the token mean, unless optimizer_profile is "
                  "set)."},
    )  # fmt: skip
    compression: str = field(
        default="scorer",
        metadata={"help": "scorer (the scorer field's compression) | early_exit (oracle: cut the "
                  "think block after its first step whose answer the verifier accepts) | "
                  "early_exit_attention_weights (keep that prefix, compress the rest with the "
                  "attention probe at the bin's tau) | after_answer (beyond the paper: the "
                  "scorer evicts only steps after that prefix; a trace with none is kept whole)."},
    )  # fmt: skip
    scoring_model: str = field(
        default="reference",
        metadata={"help": "Model the probe runs through: reference (the frozen initial policy, "
                  "TRL's KL reference model) | policy (the current policy) | any other model "
                  "name or path (a frozen foreign scorer; steps map to its tokenizer by "
                  "characters)."},
    )  # fmt: skip
    difficulty: dict[str, Any] | str | None = field(
        default=None,
        metadata={"help": "The pass-rate bins, one mapping (JSON on the command line): "
                  "easy_threshold, medium_threshold, tau and length_scale ({easy, medium, "
                  "hard}), single_tau, single_scale; keys left out keep the paper's values."},
    )  # fmt: skip
    correctness_reward: float = field(default=4.0, metadata={"help": "Reward of a right answer."})
    format_preset: str | None = field(
        default=None, metadata={"help": "Format reward: paper (0.5+0.5) | authors (0.25+0.25)."}
    )
    length_weight: float | None = field(
        default=None, metadata={"help": "Length reward weight W (paper 2, authors 1)."}
    )
    length_window_steps: int = field(
        default=10, metadata={"help": "Training steps kept in each length window."}
    )
    uniformity_calibration: str = field(
        default="none",
        metadata={"help": "none (paper) | rank: replace each uniformity by its rank among the "
                  "recent correct rollouts' uniformities before the gate (a deviation for models "
                  "whose step scores are near-uniform)."},
    )  # fmt: skip
    calibration_window: int = field(
        default=512, metadata={"help": "Recent uniformities the rank calibration compares with."}
    )

    # --- rewards a recipe adds (traac.training.extra_rewards) ---
    extra_reward_funcs: list[str] = field(
        default_factory=list,
        metadata={"help": "Reward functions added to the mode's own, as module:function paths "
                  "(TRL's signature: f(prompts, completions, **kwargs) -> list[float])."},
    )  # fmt: skip
    extra_reward_weights: list[float] | None = field(
        default=None,
        metadata={"help": "One weight per extra_reward_funcs entry (unset: 1 each; the mode's "
                  "own rewards keep weight 1)."},
    )  # fmt: skip

    # --- how rollouts decode (traac.training.rollouts) ---
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
                  "(traac.training.padding); unset: TRL's chunks, in batch order."},
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

    def __post_init__(self) -> None:
        try:
            self.preset_pinned = apply_preset(self)  # before the profile: loss_type (presets)
            self._resolve_profile()
            self._validate_traac()
            CompressionSettings.__post_init__(self)
            FormatSettings.__post_init__(self)
            CopySettings.__post_init__(self)
            self.check_copies(self.compresses, self.mode, compressing_methods())
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

    def _resolve_profile(self) -> None:
        """The optimiser profile's values for the fields left unset (`resolve_profile`)."""
        values = {name: getattr(self, name) for name in PROFILE_FIELDS}
        aggregation = self.multi_objective_aggregation
        for name, value in resolve_profile(self.optimizer_profile, values, aggregation).items():
            setattr(self, name, value)

    def _validate_traac(self) -> None:
        self.preset = preset_name("preset", self.preset)
        if self.format_preset is not None:
            self.format_preset = preset_name("format_preset", self.format_preset)
            check_choice("format_preset", self.format_preset, PRESET_NAMES)
        choices = {
            "mode": tuple(METHODS),
            "preset": PRESET_NAMES,
            "uniformity_calibration": CALIBRATIONS,
            "dynamic_sampling": DYNAMIC_SAMPLING,
            "scale_rewards": ("group", "batch", "none"),
            "compression": ("scorer", *PREFIX_COMPRESSIONS),
            "rollout_batching": ROLLOUT_BATCHINGS,
            "scorer": SCORERS,
        }
        for name, allowed in choices.items():
            check_choice(name, getattr(self, name), allowed)
        check_scoring_model(
            self.scoring_model or "", self.scorer, reads_policy=self.scorer_kind.policy
        )  # None: as empty
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
        check_methods(self, self.run_context())  # every method's fields, whatever the mode
        check_extra_weights(self.extra_reward_funcs, self.extra_reward_weights, self.reward_weights)
        self.method_run()  # resolved: DLER's limit, Laser-D's, L1's within the cap
        if self.compression != "scorer" and not self.mode_spec.compresses:
            raise TraacError(f"compression: {self.compression} needs a mode that compresses "
                             f"({', '.join(compressing_methods())}), not {self.mode}")  # fmt: skip
        if self.compression == EARLY_EXIT_MODES[1] and not self.scorer_kind.attention:
            raise TraacError(f"compression: {self.compression} reads the attention probe; set "
                             f"scorer attention, not {self.scorer}")  # fmt: skip

    # --- derived settings the trainer reads ---

    def resolved_probe_layers(self, model_type: str | None, name: str = "") -> str:
        """The probe layers for a model (its type and its name or path): as set, else the
        preset's (docs/method.md#presets: paper, all; authors, all for the R1 distills and the
        first half for Qwen3 and every other model, `authors_probe_layers`)."""
        if self.probe_layers is not None:
            return self.probe_layers
        return authors_probe_layers(model_type, name)

    def compression_settings(self, model_type: str | None, name: str = "") -> CompressionSettings:
        """The recipe's compression settings alone (probe layers resolved for the model): what
        test-time compression of the trained model uses, so it prunes as training did."""
        values = {f.name: getattr(self, f.name) for f in fields(CompressionSettings)}
        return CompressionSettings(
            **{**values, "probe_layers": self.resolved_probe_layers(model_type, name)}
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
        method with no settings of its own (`traac.training.methods.registry.method_run`)."""
        return method_run(self.mode, self, self.run_context())
