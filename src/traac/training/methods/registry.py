"""The length-control methods by name: the one table `TRAACConfig` (its fields and `mode`),
`--dry-run`, `experiment compare` and the docs read. Adding a method is a module in this package
(settings, reward function, state, `LengthMethod`), its test, and one line here."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

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
    shorterbetter,
)
from traac.training.methods.base import LengthMethod, MethodRun, RunContext

METHODS: dict[str, LengthMethod] = {
    m.name: m
    for m in (
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
    )
}


def settings_classes() -> list[type]:
    """Each settings class once, in the registry's order."""
    out: list[type] = []
    for method in METHODS.values():
        if method.settings not in out:
            out.append(method.settings)
    return out


def method_fields() -> type:
    """A dataclass with every method's settings fields (types resolved, defaults and help kept):
    `TRAACConfig` inherits it, so the fields are the config's, declared once, in their method."""
    specs: list[tuple[str, Any, dataclasses.Field]] = []
    for cls in settings_classes():
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            default = dataclasses.field(default=f.default, metadata=f.metadata)
            specs.append((f.name, hints[f.name], default))
    names = [name for name, _, _ in specs]
    if len(names) != len(set(names)):
        raise TypeError(f"two methods declare one field: {sorted(names)}")
    return dataclasses.make_dataclass("MethodFields", specs)


def check_methods(source: Any, run: RunContext) -> None:
    """Every method's fields in range (whatever the mode: a recipe's mistake fails early)."""
    for cls in settings_classes():
        cls.from_values(source).check(run)


def method_run(name: str, source: Any, run: RunContext) -> MethodRun:
    """The method `name` with its settings read off `source` and resolved for the run."""
    method = METHODS[name]
    settings = method.settings.from_values(source)
    settings.check(run)
    return MethodRun(method, settings.resolved(run), run)
