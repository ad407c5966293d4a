"""Which recipe fields a run reads: a field set under a mode that never reads it (a peer's
block under `mode: traac`, the `traac` block under a mode that never compresses, `lora_r` with
`use_peft` off) changes nothing, though whoever wrote it expects it to matter.

Everything here reads the registries, never a list of mode names: a mode's `compresses` and
`bins` and the rewards it sums, and its settings class, from one table
(`traac.training.methods.registry.METHODS`), and the LoRA fields of `LoraArguments`. A new mode
or method is covered without an edit here. What a caller does with a field found (refuse it,
or note it) depends on who set it: `traac.pipelines.recipe_effects`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from traac.compression.difficulty import DifficultySettings
from traac.training.methods.registry import METHODS, Method, blocks
from traac.training.methods.traac import TraacSettings
from traac.training.methods.traac_presets import PRESET_FILLS
from traac.training.planning.lora import LoraArguments

LORA_FIELDS = tuple(f.name for f in dataclasses.fields(LoraArguments) if f.name.startswith("lora_"))


@dataclass(frozen=True)
class Unread:
    """A field the run does not read, and the field that makes it so (`mode` or `use_peft`)."""

    name: str
    because_of: str
    why: str


def _block_unread(block: str, mode: Method) -> str | None:
    """Why a run of `mode` reads no setting of `block` (None: it reads them)."""
    cls = blocks()[block]
    if mode.settings is cls:
        return None
    if cls is TraacSettings and not mode.compresses:
        return f"mode {mode.name} never compresses"
    readers = ", ".join(name for name, method in METHODS.items() if method.settings is cls)
    return f"only mode {readers} reads it, not {mode.name}"


def _difficulty_unread(mode: Method, keys: Iterable[str]) -> list[str]:
    """The `difficulty` keys `mode` does not read: the thresholds bin the prompts; `tau` and
    `single_tau` are compression's targets with and without bins; `length_scale` and
    `single_scale` scale TRAAC's length reward with and without bins."""
    length = "length_reward" in mode.rewards
    reads = {
        "easy_threshold": mode.bins,
        "medium_threshold": mode.bins,
        "tau": mode.compresses and mode.bins,
        "single_tau": mode.compresses and not mode.bins,
        "length_scale": length and mode.bins,
        "single_scale": length and not mode.bins,
    }
    return [key for key in keys if not reads.get(key, True)]


def unread_fields(given: Mapping[str, Any], mode_name: str, use_peft: bool) -> list[Unread]:
    """Of the fields `given` (name -> value as written; `difficulty` a mapping or its JSON
    keys; a method's block a mapping, each of whose keys counts as `block.key`), those a run of
    `mode_name` (with `use_peft`) does not read, each with why."""
    mode = METHODS[mode_name]
    out = []
    for name in given:
        why = _block_unread(name, mode) if name in blocks() else None
        if why is not None and isinstance(given[name], Mapping):
            out += [Unread(f"{name}.{key}", "mode", why) for key in given[name]]
        elif name in LORA_FIELDS and not use_peft:
            out.append(Unread(name, "use_peft", "use_peft is off, so no adapters are trained"))
        elif name == "length_weight" and "length_reward" not in mode.rewards:
            out.append(Unread(name, "mode", f"mode {mode.name} has no TRAAC length reward"))
        elif name == "format_preset" and "format_reward" not in mode.rewards:
            out.append(Unread(name, "mode", f"mode {mode.name} has no format reward"))
        elif name == "difficulty" and isinstance(given[name], Mapping):
            for key in _difficulty_unread(mode, given[name]):
                what = "bins no prompts" if "threshold" in key else "does not read it"
                out.append(Unread(f"difficulty.{key}", "mode", f"mode {mode.name} {what}"))
    return out


def describe(unread: list[Unread]) -> list[tuple[str, str]]:
    """One line per reason ("scorer, probe_heads have no effect: mode cr_lr never
    compresses"), each with the field that makes them unread."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for field in unread:
        grouped.setdefault((field.because_of, field.why), []).append(field.name)
    return [
        (f"{', '.join(names)} {'has' if len(names) == 1 else 'have'} no effect: {why}", cause)
        for (cause, why), names in grouped.items()
    ]


def config_unread(config: Any) -> list[Unread]:
    """The fields of a `TRAACConfig` its mode does not read, among those set to other than their
    default (a field its preset filled counts as unset): what a Python caller wrote, read off
    the object, since no recipe says who set what. Its `method_args` are its mode's own."""
    defaults = {f.name: f.default for f in dataclasses.fields(config)}
    filled = set(PRESET_FILLS[config.preset]) - set(getattr(config, "preset_pinned", {}))
    given = {
        name: getattr(config, name)
        for name in ("length_weight", "format_preset")
        if name not in filled and getattr(config, name) != defaults[name]
    }
    paper = DifficultySettings().to_recipe()
    given["difficulty"] = {
        key: value for key, value in (config.difficulty or {}).items() if paper.get(key) != value
    }
    return unread_fields(given, config.mode, use_peft=True)  # LoRA is not the config's
