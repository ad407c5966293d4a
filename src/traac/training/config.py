"""`TRAACConfig`: TRL's `GRPOConfig` plus what TRAAC adds (SPEC sections 1-4).

Defaults are the paper's. `preset: reference` switches the values the paper and the authors'
implementation disagree on (format 0.25 + 0.25, length weight W = 1, probe layers = first half
of the model) unless a field is set explicitly: those fields default to `None`, "from preset".
The peer modes (`traac.training.peer_rewards`) carry their papers' values, and
`dynamic_sampling` filters groups on correctness for every mode.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, NoReturn

from trl import GRPOConfig

from traac.errors import TraacError
from traac.method.difficulty import DifficultyConfig
from traac.method.length_rewards import dapo_cache_length
from traac.method.rewards import RewardConfig
from traac.method.settings import CompressionSettings, FormatSettings
from traac.training.peer_rewards import PEER_MODES, PeerSettings

TRAAC_MODES = ("traac", "cr", "cr_lr", "compression_no_difficulty")
MODES = (*TRAAC_MODES, *PEER_MODES)
DYNAMIC_SAMPLING = ("none", "drop", "resample")
SCORING_MODELS = ("reference", "policy")
PRESET_NAMES = ("paper", "reference")
CALIBRATIONS = ("none", "rank")
_UNIT_FIELDS = (
    "easy_threshold", "medium_threshold", "tau_easy", "tau_medium", "tau_hard", "tau_single",
)  # fmt: skip
_NONNEGATIVE_FIELDS = (
    "correctness_reward", "length_weight",
    "length_scale_easy", "length_scale_medium", "length_scale_hard", "length_scale_single",
)  # fmt: skip

# Values that differ between the paper and the authors' implementation (SPEC sections 2-3).
_PRESETS: dict[str, dict[str, Any]] = {
    "paper": {"format_preset": "paper", "length_weight": 2.0, "probe_layers": "all"},
    # probe layers: the authors' code read the first half for Qwen3, all for its R1-distill host
    "reference": {"format_preset": "reference", "length_weight": 1.0, "probe_layers": None},
}


class TRAACConfigError(TraacError, ValueError):
    """An invalid configuration value; the message names the field (a ValueError for API users)."""


@dataclass
class TRAACConfig(GRPOConfig, CompressionSettings, FormatSettings):
    r"""Configuration of [`TRAACTrainer`]: every `GRPOConfig` field, the compression and think
    format settings the commands share (`traac.method.settings`), and the TRAAC fields below.

    Deviations from TRL's defaults follow the paper (SPEC section 4): `beta=0.001` (TRL's KL
    estimator is k3, the paper's "low-variance KL"), `epsilon_high=0.28`, `weight_decay=0.1`,
    10 warm-up steps at a constant rate, `max_completion_length=10000`, `loss_type="grpo"`
    (the appendix objective averages each rollout over its own tokens), `logging_steps=1`.
    """

    # --- GRPO defaults that differ from TRL's (SPEC section 4) ---
    beta: float = field(default=0.001, metadata={"help": "KL coefficient (paper: 0.001, k3)."})
    epsilon_high: float | None = field(default=0.28, metadata={"help": "Upper clip ratio."})
    weight_decay: float = field(default=0.1, metadata={"help": "AdamW weight decay."})
    warmup_steps: float = field(default=10, metadata={"help": "Learning-rate warm-up steps."})
    lr_scheduler_type: str = field(
        default="constant_with_warmup",
        metadata={"help": "Scheduler (paper: constant after warm-up)."},
    )
    max_completion_length: int | None = field(
        default=10000, metadata={"help": "Maximum response tokens (paper: 10k)."}
    )
    loss_type: str = field(
        default="grpo", metadata={"help": "GRPO loss aggregation (paper: per-rollout token mean)."}
    )
    logging_steps: float = field(default=1, metadata={"help": "Log every N optimizer steps."})

    # --- TRAAC ---
    mode: str = field(
        default="traac",
        metadata={"help": "traac | cr (correctness only) | cr_lr (+format+length, one bin, no "
                  "compression) | compression_no_difficulty (one bin, tau_single) | a peer "
                  "method, whose length term replaces TRAAC's length reward and compression "
                  "(correctness and format stay; docs/peer_methods.md): alp (ALP, solve-rate "
                  "scaled per-token penalty) | shorterbetter (distance to the group's shortest "
                  "right length) | kimi (Kimi k1.5 min-max length reward) | dapo_overlong "
                  "(DAPO soft overlong punishment, TRL's) | l1_max (L1-Max budget reward, "
                  "budgets in the prompt)."},
    )  # fmt: skip
    preset: str = field(
        default="paper",
        metadata={"help": "paper | reference: defaults of the fields left unset (format_preset, "
                  "length_weight, probe_layers)."},
    )  # fmt: skip
    scoring_model: str = field(
        default="reference",
        metadata={"help": "Model the probe runs through: reference (the frozen initial policy, "
                  "TRL's KL reference model) | policy (the current policy)."},
    )  # fmt: skip
    probe_layers: str | None = field(
        default=None,
        metadata={"help": "Attention layers averaged: all | first_half | comma-separated indices "
                  "(unset: from preset)."},
    )  # fmt: skip
    easy_threshold: float = field(default=0.8, metadata={"help": "Pass rate >= this: easy."})
    medium_threshold: float = field(default=0.3, metadata={"help": "Pass rate >= this: medium."})
    tau_easy: float = field(default=0.6, metadata={"help": "Target compression rate, easy."})
    tau_medium: float = field(default=0.4, metadata={"help": "Target compression rate, medium."})
    tau_hard: float = field(default=0.2, metadata={"help": "Target compression rate, hard."})
    tau_single: float = field(
        default=0.6, metadata={"help": "Target rate of the one bin of compression_no_difficulty."}
    )
    correctness_reward: float = field(default=4.0, metadata={"help": "Reward of a right answer."})
    format_preset: str | None = field(
        default=None, metadata={"help": "Format reward: paper (0.5+0.5) | reference (0.25+0.25)."}
    )
    length_weight: float | None = field(
        default=None, metadata={"help": "Length reward weight W (paper 2, reference 1)."}
    )
    length_window_steps: int = field(
        default=10, metadata={"help": "Training steps kept in each length window."}
    )
    length_scale_easy: float = field(default=1.0, metadata={"help": "Length reward scale, easy."})
    length_scale_medium: float = field(default=0.75, metadata={"help": "Length scale, medium."})
    length_scale_hard: float = field(default=0.5, metadata={"help": "Length reward scale, hard."})
    length_scale_single: float = field(
        default=1.0, metadata={"help": "Length scale of the one bin of the modes without bins."}
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

    # --- dynamic sampling (every mode) ---
    dynamic_sampling: str = field(
        default="none",
        metadata={"help": "Groups whose rollouts are all right or all wrong carry no "
                  "correctness signal: none (train on them) | drop (mask them out of the loss) "
                  "| resample (DAPO: replace their prompts with fresh ones from the training "
                  "set, up to max_resample_rounds times, then drop what is left). Decided on "
                  "the verifiers' verdicts only, never on the shaped reward."},
    )  # fmt: skip
    max_resample_rounds: int = field(
        default=2,
        metadata={"help": "dynamic_sampling resample: extra generation rounds per step at most "
                  "(DAPO's max_num_gen_batches)."},
    )  # fmt: skip

    # --- peer methods (docs/peer_methods.md) ---
    alp_beta: float = field(
        default=1.0,
        metadata={"help": "alp: global coefficient beta (traac's choice, see docs)."},
    )
    alp_normalizer: float | None = field(
        default=None,
        metadata={"help": "alp: normalisation constant N in tokens (unset: "
                  "max_completion_length, traac's choice)."},
    )  # fmt: skip
    shorterbetter_beta: float = field(
        default=0.001, metadata={"help": "shorterbetter: beta per token (authors' 0.001)."}
    )
    kimi_weight: float = field(
        default=1.0, metadata={"help": "kimi: weight of the length reward (paper gives none)."}
    )
    dapo_cache_length: int | None = field(
        default=None,
        metadata={"help": "dapo_overlong: soft-punish band L_cache in tokens (unset: a fifth of "
                  "max_completion_length, the paper's 4096 of 20480)."},
    )  # fmt: skip
    l1_alpha: float = field(default=0.0003, metadata={"help": "l1_max: slope alpha (paper)."})
    l1_delta: float = field(default=0.5, metadata={"help": "l1_max: offset delta (paper)."})
    l1_budget_min: int = field(
        default=100, metadata={"help": "l1_max: smallest budget n_gold in tokens (paper 100)."}
    )
    l1_budget_max: int = field(
        default=4000, metadata={"help": "l1_max: largest budget n_gold in tokens (paper 4000)."}
    )
    l1_budget_in_prompt: bool = field(
        default=True,
        metadata={"help": "l1_max: append \"Think for maximum n_gold tokens.\" to each prompt "
                  "(L1's protocol); off only for a model that cannot read it."},
    )  # fmt: skip

    def __post_init__(self) -> None:
        self._validate_traac()
        for name, value in _PRESETS[self.preset].items():
            if getattr(self, name) is None:
                setattr(self, name, value)
        CompressionSettings.__post_init__(self)
        FormatSettings.__post_init__(self)
        super().__post_init__()

    def _validate_traac(self) -> None:
        choices = {
            "mode": MODES,
            "preset": PRESET_NAMES,
            "scoring_model": SCORING_MODELS,
            "uniformity_calibration": CALIBRATIONS,
            "dynamic_sampling": DYNAMIC_SAMPLING,
        }
        if self.format_preset is not None:
            choices["format_preset"] = PRESET_NAMES
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                _fail(name, f"{getattr(self, name)!r} is not one of {', '.join(allowed)}")
        for name in _UNIT_FIELDS:
            if not 0.0 <= getattr(self, name) <= 1.0:  # NaN fails too
                _fail(name, f"{getattr(self, name)} must lie in [0, 1]")
        if self.medium_threshold > self.easy_threshold:
            _fail("medium_threshold", f"{self.medium_threshold} exceeds easy_threshold "
                  f"{self.easy_threshold}")  # fmt: skip
        for name in ("length_window_steps", "calibration_window", "max_resample_rounds"):
            if getattr(self, name) < 1:
                _fail(name, f"{getattr(self, name)} must be at least 1")
        for name in _NONNEGATIVE_FIELDS:
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value >= 0):
                _fail(name, f"{value} must be a finite number >= 0")
        # GRPO settings that transformers and TRL accept but no run can use (NaN included)
        for name in ("learning_rate", "temperature", "max_completion_length", "top_p"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                _fail(name, f"{value} must be a finite number > 0")
        if not (math.isfinite(self.beta) and self.beta >= 0):
            _fail("beta", f"{self.beta} must be a finite number >= 0 (0 turns the KL term off)")
        self._validate_peers()

    def _validate_peers(self) -> None:
        for name in ("alp_beta", "alp_normalizer", "shorterbetter_beta", "l1_alpha"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                _fail(name, f"{value} must be a finite number > 0")
        for name in ("kimi_weight", "l1_delta"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) >= 0):
                _fail(name, f"{getattr(self, name)} must be a finite number >= 0")
        cache = self.dapo_cache_length
        if cache is not None and not 0 <= cache <= self.max_completion_length:
            _fail("dapo_cache_length", f"{cache} must lie in [0, max_completion_length "
                  f"{self.max_completion_length}]")  # fmt: skip
        if self.l1_budget_min < 1:
            _fail("l1_budget_min", f"{self.l1_budget_min} must be at least 1")
        if self.l1_budget_max < self.l1_budget_min:
            _fail("l1_budget_max", f"{self.l1_budget_max} is below l1_budget_min "
                  f"{self.l1_budget_min}")  # fmt: skip
        if self.mode == "l1_max" and self.l1_budget_max > self.max_completion_length:
            _fail("l1_budget_max", f"{self.l1_budget_max} exceeds max_completion_length "
                  f"{self.max_completion_length}: no response could use that budget; lower "
                  "l1_budget_max (and l1_budget_min) or raise max_completion_length")  # fmt: skip

    # --- derived settings the trainer reads ---

    def resolved_probe_layers(self, model_type: str | None) -> str:
        """The probe layers for a model: as set, else the preset's (SPEC section 2: paper, all;
        reference, the first half for Qwen3 models and all for the others, e.g. R1 distills)."""
        if self.probe_layers is not None:
            return self.probe_layers
        return "first_half" if (model_type or "").startswith("qwen3") else "all"

    def compression_settings(self, model_type: str | None) -> CompressionSettings:
        """The recipe's compression settings alone (probe layers resolved for the model): what
        test-time compression of the trained model uses, so it prunes as training did."""
        values = {f.name: getattr(self, f.name) for f in fields(CompressionSettings)}
        return CompressionSettings(
            **{**values, "probe_layers": self.resolved_probe_layers(model_type)}
        )

    @property
    def peer_mode(self) -> bool:
        """A peer method's length term in place of TRAAC's length reward and compression."""
        return self.mode in PEER_MODES

    @property
    def compresses(self) -> bool:
        """Whether correct rollouts are compressed and re-answered (SPEC section 1, steps 4-6)."""
        return self.mode in ("traac", "compression_no_difficulty")

    def difficulty_config(self) -> DifficultyConfig:
        """Bins, tau and length scale per bin; one bin (`all`) in the modes without difficulty.
        The peer modes keep the bins for telemetry only (nothing of theirs reads a bin)."""
        return DifficultyConfig(
            easy_threshold=self.easy_threshold,
            medium_threshold=self.medium_threshold,
            tau={"easy": self.tau_easy, "medium": self.tau_medium, "hard": self.tau_hard},
            length_scale={
                "easy": self.length_scale_easy,
                "medium": self.length_scale_medium,
                "hard": self.length_scale_hard,
            },
            enabled=self.mode == "traac" or self.peer_mode,
            single_tau=self.tau_single,
            single_scale=self.length_scale_single,
        )

    def reward_config(self) -> RewardConfig:
        """Correctness (+ format except in mode `cr`, + TRAAC's length reward in TRAAC's own
        modes but `cr`) with this config's weights."""
        return RewardConfig.preset(
            self.format_preset,
            correct=self.correctness_reward,
            length_weight=self.length_weight,
            window_size=int(self.length_window_steps),
            use_format=self.mode != "cr",
            use_length=self.mode in TRAAC_MODES and self.mode != "cr",
        )

    def peer_settings(self) -> PeerSettings:
        """The peer method's values, defaults resolved against `max_completion_length`."""
        max_len = int(self.max_completion_length)
        return PeerSettings(
            mode=self.mode,
            correctness_reward=self.correctness_reward,
            max_completion_length=max_len,
            alp_beta=self.alp_beta,
            alp_normalizer=self.alp_normalizer or float(max_len),
            shorterbetter_beta=self.shorterbetter_beta,
            kimi_weight=self.kimi_weight,
            dapo_cache_length=dapo_cache_length(max_len, self.dapo_cache_length),
            l1_alpha=self.l1_alpha,
            l1_delta=self.l1_delta,
            l1_budget_min=self.l1_budget_min,
            l1_budget_max=self.l1_budget_max,
            l1_budget_in_prompt=self.l1_budget_in_prompt,
        )


def _fail(name: str, message: str) -> NoReturn:
    raise TRAACConfigError(f"{name}: {message}")
