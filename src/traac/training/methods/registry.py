"""Every training method by name, TRAAC's own and its peers': the one table `TRAACConfig` (its
fields and `mode`), the trainer (`traac.training.methods.hooks`), `--dry-run`, `experiment
compare` and the docs read. Adding a method is a module in this package (settings, reward
function, state, `LengthMethod`), its test, and one line here.

Each entry says, per phase of the step: the rewards TRL sums (`rewards`, with the method's own
term from `make`), what it adds to a group (`compresses`: TRAAC's compressed, re-answered
copies), what it keeps (its reward object's `retain`: GFPO's filter), what it needs bound (its
reward object's `bind`: the tokenizer), and its settings (`settings`, None for TRAAC's own)."""

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
    traac,
)
from traac.training.methods.base import LengthMethod, MethodRun, RunContext
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
    )
}


def settings_classes() -> list[type]:
    """Each settings class once, in the registry's order."""
    out: list[type] = []
    for method in METHODS.values():
        if method.settings is not None and method.settings not in out:
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


def method_run(name: str, source: Any, run: RunContext) -> MethodRun | None:
    """The method `name` with its settings read off `source` and resolved for the run (None: a
    method with no settings of its own)."""
    return METHODS[name].run_of(source, run)


def compressing_methods() -> list[str]:
    """The methods that compress right rollouts, for the messages that name them."""
    return [name for name, method in METHODS.items() if method.compresses]
