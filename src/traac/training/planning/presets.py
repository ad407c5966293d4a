"""`preset: traac | paper | authors` (docs/method.md#presets): the values where traac's own
default, the paper and the authors' code (joykirat18/TRAAC, a fork of verl) disagree, and for
the authors' preset every setting of their code traac reproduces, with the file that sets it.

`traac`, the default, is the paper's form with one change the verdict study measured at the
seed level (docs/results.md#verdict): the compressed copies' think blocks masked from the loss
(`copy_loss: answer_only`); `paper` is the paper's exact form.

A preset fills only the fields a recipe leaves unset (those default to None, "from the preset"),
the config's and its mode's own (`method_args`: the compression settings of the modes that
compress); a field the recipe or the command line sets is kept, and the dry run says it
overrode the preset (`preset_rows`). `loss_type` belongs to `optimizer_profile` as well: the
authors' token mean is filled only when neither `loss_type` nor `optimizer_profile` is set; an
explicit profile sets it (`dler`: the same token mean; `grpo`: the paper's per-rollout mean,
reported as overriding the preset), and an explicit `loss_type` beats both. The rows whose
traac default is already the authors' value are checked, never changed: one the recipe set
otherwise is reported likewise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from traac.compression.difficulty import DifficultySettings
from traac.compression.formats import AUX_PROMPT
from traac.compression.settings import check_choice, preset_name
from traac.training.methods.traac import authors_probe_layers

_ABSENT = object()  # a setting the run's mode does not have
AUTHORS_REPO = "joykirat18/TRAAC"
ROLLOUT = "verl/workers/rollout/vllm_rollout/vllm_rollout_spmd.py"
EVICTION = "verl/workers/rollout/vllm_rollout/redundant_token_eviction.py"
QWEN_HOST = "scripts/train/model_host_qwen.py"

# What each preset fills where the recipe leaves the field unset. The paper's loss is the
# default optimiser profile's (grpo: each rollout averaged over its own tokens).
PAPER_FILLS: dict[str, Any] = {
    "format_preset": "paper",
    "length_weight": 2.0,
    "probe_layers": "all",
    "copy_pool": "evicted",
    "copy_loss": "full",
}
PRESET_FILLS: dict[str, dict[str, Any]] = {
    # On SmolLM2 (smollm2-think, 30 steps) copies trained on in full taught the policy to write
    # pruned reasoning: 11.87 points below CR+LR, and masking their think blocks gave back
    # 11.60 [+9.78, +13.41] (three seeds, seed-level t-interval; records/smollm2-think-verdict).
    "traac": {**PAPER_FILLS, "copy_loss": "answer_only"},
    "paper": PAPER_FILLS,
    # probe_layers None: the authors' rule per model (`authors_probe_layers`)
    "authors": {"format_preset": "authors", "length_weight": 1.0, "probe_layers": None,
                "copy_pool": "all_correct", "copy_loss": "full", "loss_type": "dapo"},
}  # fmt: skip
PRESET_NAMES = tuple(PRESET_FILLS)


@dataclass(frozen=True)
class AuthorsSetting:
    """One setting of the authors' code: the traac field, its value there, the file that sets
    it, and what it is."""

    field: str
    value: Any
    where: str
    what: str


AUTHORS: tuple[AuthorsSetting, ...] = (
    AuthorsSetting("format_preset", "authors", "verl/utils/reward_score/math_verify_sum.py",
                   "format reward 0.25 + 0.25"),
    AuthorsSetting("length_weight", 1.0, "verl/workers/reward_manager/sumLinear.py",
                   "length reward weight W = 1"),
    AuthorsSetting("probe_layers", None, f"{QWEN_HOST}, scripts/train/model_host_deepseek.py",
                   "first half of the layers for Qwen3, all for the R1 distills; traac: the "
                   "first half for any other model"),
    AuthorsSetting("copy_pool", "all_correct", f"{ROLLOUT} (summary_inputs)",
                   "every right, well-formed rollout re-answered, evicted or not"),
    AuthorsSetting("copy_loss", "full", f"{ROLLOUT} (the re-answered responses join the batch)",
                   "a copy trained on in full, its think block included"),
    AuthorsSetting("loss_type", "dapo", "verl/trainer/config/actor/actor.yaml",
                   "verl's loss_agg_mode token-mean, which the training scripts keep"),
    AuthorsSetting("scorer", "attention", "scripts/train/run_qwen3-4b-with-summary-linear-"
                   "reward-attention.sh", "summary_mode attention_weights"),
    AuthorsSetting("scoring_model", "reference", QWEN_HOST,
                   "a frozen copy of the base model"),
    AuthorsSetting("probe_heads", "all", QWEN_HOST, "heads averaged"),
    AuthorsSetting("step_scope", "probe", f"{EVICTION} (segment_reasoning_chain)",
                   "steps split over the whole probe text"),
    AuthorsSetting("aux_prompt", AUX_PROMPT, f"{ROLLOUT} (summarize_attention_weights)",
                   "the auxiliary prompt before the closer"),
    AuthorsSetting("uniformity_gate", 0.8, f"{EVICTION} (determine_eviction_percentage)",
                   "no eviction above u = 0.8"),
    AuthorsSetting("eviction_cap", 0.8, f"{EVICTION} (determine_eviction_percentage)",
                   "at most 80% of the steps"),
    AuthorsSetting("uniformity_calibration", "none", EVICTION, "the uniformity as measured"),
    AuthorsSetting("difficulty", DifficultySettings().to_recipe(),
                   f"{ROLLOUT} (get_difficulty_class, get_reduction_score), "
                   "verl/workers/reward_manager/sumLinear.py",
                   "bins 0.8 / 0.3, tau 0.6 / 0.4 / 0.2, length scale 1 / 0.75 / 0.5"),
)  # fmt: skip
# The authors' code does these too; traac does not reproduce them (docs/method.md#presets).
AUTHORS_NOT_APPLIED: dict[str, str] = {
    "copy_tags": "the authors' copies carry two openers and closers, an accident left off "
    f"(copy_tags double reproduces it; {EVICTION} ~160, {ROLLOUT} create_vllm_summary_inputs)",
    "split_phrases": "on word boundaries; the authors' code matched substrings of token strings, "
    f"not reproduced ({EVICTION} split_by_tokens)",
}


def apply_preset(config: Any) -> dict[str, str]:
    """Fill the preset's fields that `config` leaves unset (`PRESET_FILLS`; `config.preset`
    is checked and its old name replaced first): its own fields, and the keys of its
    `method_args` where the mode's settings have them (`probe_layers`, `copy_pool`, `copy_loss`:
    the modes that compress); a mode without them has nothing to fill. Returns the preset fields
    already set, each with who set it: `recipe`, or `optimizer_profile NAME` for a `loss_type`
    the profile owns. Runs before the optimiser profile is resolved and the settings parsed."""
    config.preset = preset_name("preset", config.preset)
    check_choice("preset", config.preset, PRESET_NAMES)
    settings = config.mode_spec.settings
    own = settings.names() if settings is not None else ()
    pinned = {}
    for name, value in PRESET_FILLS[config.preset].items():
        in_args = name in own
        if not in_args and not hasattr(config, name):
            continue  # a setting of the modes that compress, which this one does not
        if (config.method_args.get(name) if in_args else getattr(config, name)) is not None:
            pinned[name] = "recipe"
        elif name == "loss_type" and config.optimizer_profile is not None:
            pinned[name] = f"optimizer_profile {config.optimizer_profile}"
        elif in_args:
            config.method_args[name] = value
        else:
            setattr(config, name, value)
    return pinned


def preset_rows(config: Any, model_name: str) -> list[tuple[str, str]]:
    """The dry run's rows for the preset: for `authors`, each setting of the authors' code the
    run has, its value in this run and its file, or who overrode it; for `traac` and `paper`,
    the values it filled."""
    pinned = getattr(config, "preset_pinned", {})
    names = {*PRESET_FILLS["authors"], *(s.field for s in AUTHORS), *AUTHORS_NOT_APPLIED}
    values = {name: config.setting(name, _ABSENT) for name in names}
    has = {name: value for name, value in values.items() if value is not _ABSENT}
    if config.preset != "authors":
        filled = [f"{k} {_plain(has[k])}" for k in PRESET_FILLS[config.preset]
                  if k in has and k not in pinned]  # fmt: skip
        kept = [f"{k} {_plain(has[k])} ({by})" for k, by in pinned.items()]
        return [(f"preset {config.preset}", ", ".join(filled) + (
            f"; set elsewhere: {', '.join(kept)}" if kept else ""))]  # fmt: skip
    rows = []
    for s in AUTHORS:
        if s.field not in has:
            continue
        value, authors = has[s.field], s.value
        if s.field == "probe_layers":  # the rule per model, unless the recipe set the layers
            authors = authors_probe_layers(None, model_name)
            value = authors if value is None else value
        shown = "verbatim" if value == AUX_PROMPT else _plain(value)
        if value == authors:
            line = f"{shown}, the authors' ({s.what}; {s.where})"
        else:
            by = pinned.get(s.field, "recipe")
            line = f"{shown}, the {by}'s: overrides the authors' {_plain(authors)} ({s.where})"
        rows.append((f"authors: {s.field}", line))
    rows += [(f"authors: {k}", f"{has[k] or 'the paper list'}, not the authors': {v}")
             for k, v in AUTHORS_NOT_APPLIED.items() if k in has]  # fmt: skip
    return rows


def _plain(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, dict):
        return "the recipe mapping" if value != DifficultySettings().to_recipe() else "the default"
    return str(value)
