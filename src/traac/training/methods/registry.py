"""Every training method by name, TRAAC's own and its peers': the one table `TRAACConfig` (its
`mode` and `method_args`), the train parser (the flat spelling of the settings), the trainer
(`traac.training.methods.hooks`), `--dry-run`, `experiment compare` and the docs read. Adding a
method is a module in this package (settings, reward function, state, `LengthMethod`), its test,
and one line here.

Each entry says, per phase of the step: the rewards TRL sums (`rewards`, with the method's own
term from `make`), what it adds to a group (`compresses`: TRAAC's compressed, re-answered
copies), what it keeps (its reward object's `retain`: GFPO's filter), what it needs bound (its
reward object's `bind`: the tokenizer), and its settings (`settings`: what a recipe's
`method_args` holds when it trains; None for a mode with none)."""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Mapping
from typing import Any

from traac.errors import TraacError
from traac.training.methods import (
    adaptthink,
    alp,
    arlcp,
    dapo_overlong,
    ddca,
    dler,
    dot,
    first_correct_penalty,
    gfpo,
    kimi,
    l1_max,
    laser_d,
    lc_r1,
    prime_rl,
    short_rl,
    shorterbetter,
    traac,
)
from traac.training.methods.base import LengthMethod, MethodRun, MethodSettings, RunContext
from traac.training.methods.traac import TraacMethod

Method = TraacMethod | LengthMethod

METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        traac.TRAAC,
        traac.CR,
        traac.CR_LR,
        traac.NO_COMPRESSION,
        traac.NO_DIFFICULTY,
        alp.METHOD,
        shorterbetter.METHOD,
        kimi.METHOD,
        dapo_overlong.METHOD,
        l1_max.METHOD,
        dler.METHOD,
        dler.DIFFICULTY,
        laser_d.METHOD,
        gfpo.METHOD,
        dot.METHOD,
        first_correct_penalty.METHOD,
        lc_r1.METHOD,
        ddca.METHOD,
        arlcp.METHOD,
        adaptthink.METHOD,
        short_rl.METHOD,
        prime_rl.METHOD,
    )
}


def settings_classes() -> list[type[MethodSettings]]:
    """Each settings class once, in the registry's order."""
    out: list[type[MethodSettings]] = []
    for method in METHODS.values():
        if method.settings is not None and method.settings not in out:
            out.append(method.settings)
    return out


def method_fields() -> type:
    """Every method's settings as one dataclass of flat fields (types resolved, defaults and
    help kept): the train parser takes them as recipe keys and options, the spelling from before
    `method_args`, which `split_settings` routes. One name is one method's setting."""
    specs: list[tuple[str, Any, dataclasses.Field]] = []
    for cls in settings_classes():
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            default = dataclasses.field(default=f.default, metadata=f.metadata)
            specs.append((f.name, hints[f.name], default))
    names = [name for name, _, _ in specs]
    if len(names) != len(set(names)):
        raise TypeError(f"two methods declare one field: {sorted(names)}")
    flat = dataclasses.make_dataclass("MethodFields", specs)
    flat._argument_group_name = (  # type: ignore[attr-defined]
        "method settings: the keys of method_args, each also taken flat (a recipe key or an "
        "option); one of another mode than the trained one is accepted and unused"
    )
    return flat


def setting_names() -> set[str]:
    """Every method's settings' names (the keys a recipe may also write flat)."""
    return {name for cls in settings_classes() for name in cls.names()}


def _owner(key: str) -> type[MethodSettings] | None:
    return next((cls for cls in settings_classes() if key in cls.names()), None)


def method_mapping(value: Any) -> dict[str, Any]:
    """`method_args` as a mapping: JSON text (the command line's) read, unset as empty."""
    if value is None:
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as err:
            raise TraacError(f"method_args: {value!r} is not JSON ({err.msg})") from None
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise TraacError(f"method_args: {value!r} is not a mapping of setting: value")
    return dict(value)


def join_flat(nested: Any, flat: Mapping[str, Any], where: str = "") -> dict[str, Any]:
    """`method_args` (`nested`) with the settings written `flat` beside it, the spelling from
    before `method_args`, flat over nested; a key written both ways in one place (`where`: the
    recipe, the command line) is refused in one line, since one would silently win."""
    nested = method_mapping(nested)
    twice = sorted(flat.keys() & nested.keys())
    if twice:
        place = f" in {where}" if where else ""
        raise TraacError(f"{twice[0]}: set flat and in method_args{place}; keep one "
                         f"(method_args: {{{twice[0]}: VALUE}})")  # fmt: skip
    return {**nested, **flat}


def split_settings(
    values: Mapping[str, Any], mode: str
) -> tuple[dict[str, Any], dict[type[MethodSettings], dict[str, Any]]]:
    """Method settings by name (a recipe's `method_args` and its flat keys) split into the
    mode's own (its `method_args`) and, by settings class, those of the methods not trained (a
    shared recipe serves every mode). A key no method has stays with the mode's, whose parse
    names it."""
    cls = METHODS[mode].settings
    own_keys = cls.names() if cls is not None else ()
    own: dict[str, Any] = {}
    others: dict[type[MethodSettings], dict[str, Any]] = {}
    for key, value in values.items():
        owner = None if key in own_keys else _owner(key)
        if owner is None:
            own[key] = value
        else:
            others.setdefault(owner, {})[key] = value
    return own, others


def parse_settings(mode: str, values: Mapping[str, Any], run: RunContext) -> MethodSettings | None:
    """The settings of `mode` from its `method_args`, checked: the one parse (a key it does not
    have, one line naming it, the mode and the keys it has). None: a mode with no settings."""
    cls = METHODS[mode].settings
    if cls is None:
        if values:
            key = next(iter(values))
            raise TraacError(f"method_args: {key} is not a setting of mode {mode}, which has none")
        return None
    settings = cls.from_mapping(values, mode)
    settings.check(run)
    return settings


def check_unused(others: Mapping[type[MethodSettings], Mapping[str, Any]], run: RunContext) -> None:
    """The settings of methods not trained that a shared recipe gives: unused, and in range all
    the same, so a recipe's mistake fails under whichever mode runs it."""
    for cls, values in others.items():
        modes = [name for name, method in METHODS.items() if method.settings is cls]
        cls.from_mapping(values, modes[0]).check(run)


def method_run(name: str, settings: MethodSettings | None, run: RunContext) -> MethodRun | None:
    """The method `name` with its checked settings resolved for the run (None: a method with
    no length term of its own)."""
    return METHODS[name].run_of(settings, run)
