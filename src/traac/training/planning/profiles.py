"""Optimiser profiles: the GRPO settings a method's optimiser changes, set together by one
recipe field (`optimizer_profile`), separate from the reward, so any mode can run under any
profile (TRAAC under DLER's optimiser, DLER's reward under TRAAC's).

Every setting is TRL's own `GRPOConfig` option, read by `GRPOTrainer` as it is; traac's
`dynamic_sampling` is the one that is not TRL's (TRL has no group filter):

- `scale_rewards`: `group` divides each group's centred rewards by the group's standard
  deviation (GRPO), `batch` by the whole batch's (DLER's batch-wise normalisation, PPO-Lite);
- `epsilon_high`: the upper clip of the ratio (DAPO's clip-higher; the lower is `epsilon`);
- `loss_type`: `grpo` averages each rollout over its own tokens, `dapo` averages over every
  token of the batch (verl's `token-mean`, the aggregation DLER's script trains with);
- `dynamic_sampling`: degenerate groups resampled (`resample`, DAPO's and DLER's filter).

A field the recipe leaves unset takes the profile's value (without a profile named, what the
mode needs first: DDCA's `scale_rewards: none`); a field set explicitly to another value than an
explicitly chosen profile's is an error naming both (`resolve_profile`).
"""

from __future__ import annotations

from typing import Any

from traac.errors import TraacError

# The TRAAC paper's GRPO (its training setup: clip-higher 0.28, per-rollout token mean) and DLER's
# optimiser (NVlabs/DLER dler_slurm.sh: reinforce_plus_plus_baseline, i.e. group mean removed
# then whitened over the batch; clip_ratio_high 0.28; filter_groups on; token-mean loss).
OPTIMIZER_PROFILES: dict[str, dict[str, Any]] = {
    "grpo": {
        "scale_rewards": "group",
        "epsilon_high": 0.28,
        "loss_type": "grpo",
        "dynamic_sampling": "none",
    },
    "dler": {
        "scale_rewards": "batch",
        "epsilon_high": 0.28,
        "loss_type": "dapo",
        "dynamic_sampling": "resample",
    },
}
DEFAULT_PROFILE = "grpo"
PROFILE_FIELDS = tuple(OPTIMIZER_PROFILES[DEFAULT_PROFILE])
# TRL accepts booleans for scale_rewards (True is "group", False is "none").
_SCALE_ALIASES = {True: "group", False: "none"}


def resolve_profile(
    profile: str | None, values: dict[str, Any], aggregation: str, needs: dict[str, Any]
) -> dict[str, Any]:
    """The profile's settings merged with the explicit `values` (None: unset): each unset field
    takes the profile's value, an explicit one is kept. Without an explicit `profile`, a value
    the mode `needs` (DDCA's unscaled rewards) counts as explicit where the field is unset. With
    an explicit `profile`, an explicit value that differs from the profile's is an error. TRL's
    `normalize_then_sum` (`aggregation`) always normalises the summed reward over the batch, so
    there an unset `scale_rewards` resolves to `batch` and an explicit other value is an error."""
    name = DEFAULT_PROFILE if profile is None else profile
    if name not in OPTIMIZER_PROFILES:
        raise TraacError(
            f"optimizer_profile: {profile!r} is not one of {', '.join(OPTIMIZER_PROFILES)}"
        )
    if not needs.keys() <= set(PROFILE_FIELDS):
        raise TypeError(f"a mode needs only the profile's fields {PROFILE_FIELDS}: {needs}")
    values = dict(values)
    if profile is None:  # what the mode needs, as if set, over the default profile
        values.update({k: v for k, v in needs.items() if values[k] is None})
    scale = values.get("scale_rewards")
    if isinstance(scale, bool):
        values["scale_rewards"] = _SCALE_ALIASES[scale]
    out = {}
    for key, preset in OPTIMIZER_PROFILES[name].items():
        value = values.get(key)
        if profile is not None and value is not None and value != preset:
            raise TraacError(
                f"{key}: {value!r} conflicts with optimizer_profile {name}, which sets "
                f"{preset!r}; drop one of the two"
            )
        out[key] = preset if value is None else value
    if aggregation == "normalize_then_sum":
        if values.get("scale_rewards") not in (None, "batch"):
            raise TraacError(
                f"scale_rewards: {values['scale_rewards']!r} is not used with "
                "multi_objective_aggregation normalize_then_sum (TRL normalises the sum over the "
                "batch); set batch or leave it unset"
            )
        out["scale_rewards"] = "batch"
    return out


def describe_profile(profile: str | None, config: Any) -> str:
    """One line for `--dry-run`: the profile and the values the trainer will read."""
    name = DEFAULT_PROFILE if profile is None else profile
    origin = "" if profile is not None else " (default)"
    aggregation = config.multi_objective_aggregation
    per_reward = (
        "each reward normalised within its group before the weighted sum"
        if aggregation == "normalize_then_sum"
        else "rewards summed, then normalised"
    )
    return (
        f"{name}{origin}: scale_rewards {config.scale_rewards}, clip {config.epsilon:g}/"
        f"{config.epsilon_high:g}, loss_type {config.loss_type}, dynamic_sampling "
        f"{config.dynamic_sampling}, multi_objective_aggregation {aggregation} ({per_reward})"
    )
