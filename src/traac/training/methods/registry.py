"""Every training method by name, TRAAC's own and its peers': the one table `TRAACConfig` (its
`mode` and `method_args`), the train parser (each settings class's block), the trainer
(`traac.training.methods.hooks`), `--dry-run`, `experiment compare` and the docs read. Adding a
method is a module in this package (settings, reward function, state, `LengthMethod`), its test,
and one line here.

Each entry says, per phase of the step: the rewards TRL sums (`rewards`, with the method's own
term from `make`), what it adds to a group (`compresses`: TRAAC's compressed, re-answered
copies), what it keeps (its reward object's `retain`: GFPO's filter), what it needs bound (its
reward object's `bind`: the tokenizer), and its settings (`settings`: its block in a recipe,
`BLOCK: {name: value}`, the config's `method_args` when it trains; None for a mode with none)."""

from __future__ import annotations

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
from traac.training.methods.base import LengthMethod, MethodSettings, RunContext
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


def blocks() -> dict[str, type[MethodSettings]]:
    """Each settings class once, in the registry's order, by its block's name (`alp` of a
    recipe's `alp: {beta: 1.0}`)."""
    classes = list(dict.fromkeys(m.settings for m in METHODS.values() if m.settings is not None))
    out = {cls.BLOCK: cls for cls in classes}
    if len(out) != len(classes):
        raise TypeError(f"two settings classes declare one block: {sorted(out)}")
    return out


def spellings() -> dict[str, tuple[str | None, tuple[str, ...]]]:
    """Each block with its flat prefix from before the blocks (`FLAT_PREFIX`) and its settings'
    names: what a recipe's spelling is checked against (`traac.pipelines.recipe.check_spelling`,
    which reads the same off the sources before the imports)."""
    return {block: (cls.FLAT_PREFIX, cls.names()) for block, cls in blocks().items()}


def flat_form(values: Mapping[str, Any]) -> dict[str, Any]:
    """A recipe's (or a variant's) fields with each block written as its flat names from before
    the blocks (`alp: {beta: 1}` as `alp_beta: 1`): the form run keys hash, so that a run keeps
    its key in a store trained before the blocks. A block never written flat stays a block."""
    owners = blocks()
    out: dict[str, Any] = {}
    for key, value in values.items():
        cls = owners.get(key)
        if cls is None or cls.FLAT_PREFIX is None or not isinstance(value, Mapping):
            out[key] = value
        else:
            out.update({f"{cls.FLAT_PREFIX}{name}": v for name, v in value.items()})
    return out


def method_mapping(value: Any) -> dict[str, Any]:
    """`method_args` as a mapping (unset: empty)."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise TraacError(f"method_args: {value!r} is not a mapping of setting: value")
    return dict(value)


def split_blocks(
    given: Mapping[str, Mapping[str, Any]], mode: str
) -> tuple[dict[str, Any], dict[type[MethodSettings], dict[str, Any]]]:
    """The blocks of a recipe (block name -> its settings) split into the trained mode's own
    settings (its `method_args`) and, by settings class, those of the modes not trained (a
    recipe may hold several, for the variants that switch modes). A mode no method has takes
    none (the config names it)."""
    if mode not in METHODS:
        return {}, {}
    own_cls = METHODS[mode].settings
    owners = blocks()
    own: dict[str, Any] = {}
    others: dict[type[MethodSettings], dict[str, Any]] = {}
    for block, values in given.items():
        if owners[block] is own_cls:
            own = dict(values)
        else:
            others[owners[block]] = dict(values)
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
        cls.from_mapping(values, cls.BLOCK).check(run)
