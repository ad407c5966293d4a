"""TRAAC and its ablations as methods: TRAAC's own rewards (`TraacRewards`), with or without
compression and difficulty bins. The modes that compress (`traac`, `compression_no_difficulty`)
have settings of their own, `TraacSettings`: everything only compression reads. The rest of what
they read (`difficulty`, the reward weights, `split_phrases`) every run shares: `TRAACConfig`'s."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

from traac.common.scoring_model import check_scoring_model
from traac.compression.early_exit import COMPRESSION_KINDS, COMPRESSIONS, CompressionKind
from traac.compression.settings import SCORER_KINDS, CompressionSettings, ScorerKind, check_choice
from traac.errors import TraacError
from traac.training.methods.base import (
    TRAAC_REWARDS,
    MethodRun,
    MethodSettings,
    RunContext,
    RunRule,
    declared_in,
)
from traac.training.step.copy_rules import CopySettings

CALIBRATIONS = ("none", "rank")
# A CompressionSettings field every run shares: the peers that read the text split it too.
SHARED_COMPRESSION_FIELDS = ("split_phrases",)
R1_DISTILL = "r1-distill"  # in the model's name or path: a DeepSeek-R1 distill


@dataclass(frozen=True)
class TraacSettings(MethodSettings):
    """What only compression reads: how steps are scored and evicted (`CompressionSettings`,
    whose `split_phrases` is shared), which compressed copies are made and what they are trained
    on (`CopySettings`), the oracle compressions, the scoring model and the uniformity
    calibration. `probe_layers`, `copy_pool` and `copy_loss` left unset are the preset's
    (`traac.training.methods.traac_presets`)."""

    BLOCK, FLAT_PREFIX = "traac", ""
    COUNTS = ("calibration_window",)

    scorer: str = declared_in(CompressionSettings, "scorer")
    probe_layers: str | None = declared_in(CompressionSettings, "probe_layers")
    probe_heads: str = declared_in(CompressionSettings, "probe_heads")
    step_scope: str = declared_in(CompressionSettings, "step_scope")
    uniformity_gate: float = declared_in(CompressionSettings, "uniformity_gate")
    eviction_cap: float = declared_in(CompressionSettings, "eviction_cap")
    aux_prompt: str = declared_in(CompressionSettings, "aux_prompt")
    confidence_top_k: int = declared_in(CompressionSettings, "confidence_top_k")
    copy_loss: str | None = declared_in(CopySettings, "copy_loss")
    copy_pool: str | None = declared_in(CopySettings, "copy_pool")
    copy_tags: str = declared_in(CopySettings, "copy_tags")
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
    uniformity_calibration: str = field(
        default="none",
        metadata={"help": "none (paper) | rank: replace each uniformity by its rank among the "
                  "recent correct rollouts' uniformities before the gate (a deviation for models "
                  "whose step scores are near-uniform)."},
    )  # fmt: skip
    calibration_window: int = field(
        default=512, metadata={"help": "Recent uniformities the rank calibration compares with."}
    )

    @property
    def scorer_kind(self) -> ScorerKind:
        """What the scorer reads (`traac.compression.settings.SCORER_KINDS`)."""
        return SCORER_KINDS[self.scorer]

    @property
    def compression_kind(self) -> CompressionKind:
        """What the compression does (`traac.compression.early_exit.COMPRESSION_KINDS`)."""
        return COMPRESSION_KINDS[self.compression]

    @property
    def copies(self) -> CopySettings:
        """Which copies are made and what they are trained on, asked of `CopySettings`."""
        return CopySettings(self.copy_loss, self.copy_pool, self.copy_tags)

    @property
    def ranks_uniformity(self) -> bool:
        """The rank calibration is on: each uniformity is ranked before the gate."""
        return self.uniformity_calibration == "rank"

    def check(self, run: RunContext) -> None:
        super().check(run)
        self.compression_settings(self.probe_layers)  # its own checks (unset layers pass)
        CopySettings(self.copy_loss, self.copy_pool, self.copy_tags)  # and these
        check_choice("compression", self.compression, COMPRESSIONS)
        check_choice("uniformity_calibration", self.uniformity_calibration, CALIBRATIONS)
        check_scoring_model(
            self.scoring_model or "", self.scorer, reads_policy=self.scorer_kind.policy
        )  # None: as empty
        if self.compression_kind.needs_attention and not self.scorer_kind.attention:
            raise TraacError(f"compression: {self.compression} reads the attention probe; set "
                             f"scorer attention, not {self.scorer}")  # fmt: skip

    def probe_layers_for(self, model_type: str | None, name: str = "") -> str:
        """The probe layers for a model (its type and its name or path): as set, else the
        preset's (docs/method.md#presets: paper, all; authors, all for the R1 distills and the
        first half for Qwen3 and every other model, `authors_probe_layers`)."""
        if self.probe_layers is not None:
            return self.probe_layers
        return authors_probe_layers(model_type, name)

    def compression_settings(
        self, probe_layers: str | None, split_phrases: list[str] | None = None
    ) -> CompressionSettings:
        """These settings as the commands' `CompressionSettings` (checked there), with the
        probe layers and the run's shared `split_phrases` given."""
        values = {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(CompressionSettings)
            if f.name not in SHARED_COMPRESSION_FIELDS
        }
        return CompressionSettings(
            **{**values, "probe_layers": probe_layers, "split_phrases": split_phrases}
        )


@dataclass(frozen=True)
class TraacMethod:
    """One of TRAAC's own methods: which of TRAAC's rewards it sums, whether the step
    compresses right rollouts and re-answers them (what it adds to the group), whether
    prompts are binned by pass rate (else every prompt falls in the one bin `all`), and its
    settings (`TraacSettings` for the modes that compress, else none)."""

    name: str  # the `mode` that trains it
    help: str
    compresses: bool  # right rollouts are compressed and re-answered (docs/method.md#step, 4-6)
    bins: bool
    rewards: tuple[str, ...]  # the reward functions TRL sums, in this order
    settings: type[TraacSettings] | None = None
    compare: ClassVar[tuple[tuple[str, dict[str, Any]], ...]] = ()  # its variants: variants.py
    rules: ClassVar[tuple[RunRule, ...]] = ()  # none: every run setting leaves TRAAC TRAAC

    def run_of(self, settings: MethodSettings | None, run: RunContext) -> MethodRun | None:
        """No length term of its own to resolve."""
        return None


TRAAC = TraacMethod(
    "traac", "difficulty-aware attentive compression", True, True, TRAAC_REWARDS, TraacSettings
)
CR = TraacMethod("cr", "correctness only", False, False, TRAAC_REWARDS[:1])
CR_LR = TraacMethod("cr_lr", "+format+length, one bin, no compression", False, False,
                    TRAAC_REWARDS)  # fmt: skip
# The control the paper never ran: TRAAC less compression, so that what attentive compression
# adds over difficulty calibration is one contrast (docs/method.md#modes).
NO_COMPRESSION = TraacMethod(
    "traac_no_compression",
    "TRAAC's bins, per-bin length scales and windows; no compression",
    False,
    True,
    TRAAC_REWARDS,
)
NO_DIFFICULTY = TraacMethod(
    "compression_no_difficulty",
    "one bin, difficulty.single_tau",
    True,
    False,
    TRAAC_REWARDS,
    TraacSettings,
)


def authors_probe_layers(model_type: str | None, name: str = "") -> str:
    """The authors' layer rule: all layers for their DeepSeek-R1 distills (recognised by name,
    as the authors' code does: an R1-Distill-Llama is a `llama` like SmolLM2), the first half
    for Qwen3 and, traac's choice, for every other model (docs/method.md#presets)."""
    if (model_type or "").startswith("qwen3"):
        return "first_half"
    return "all" if R1_DISTILL in name.lower() else "first_half"
