"""`preset: traac | paper | authors` applied to a run (docs/method.md#presets); the presets
themselves are TRAAC's (`traac.training.methods.traac_presets`).

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

from typing import Any

from traac.compression.difficulty import DifficultySettings
from traac.compression.formats import AUX_PROMPT
from traac.compression.settings import check_choice, preset_name
from traac.training.methods.traac import authors_probe_layers
from traac.training.methods.traac_presets import (
    AUTHORS,
    AUTHORS_NOT_APPLIED,
    PRESET_FILLS,
    PRESET_NAMES,
)

_ABSENT = object()  # a setting the run's mode does not have


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
