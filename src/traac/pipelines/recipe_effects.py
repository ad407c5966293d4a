"""A recipe that says more than it does: fields the run does not read
(`traac.training.planning.effects`), refused or noted by who set them.

A field is refused (one line, exit 2) when it was written together with, or after, what makes it
unread: in the same recipe as its `mode` (or `use_peft`), or on the command line. Its author
wrote it for this run and expects it to matter. It is only noted (one line, and the dry run's
plan) when it comes from the recipe and the mode (or `use_peft`) from the command line or an
experiment's variant: a shared recipe reused under another mode, as `traac train --config
recipes/smollm2-think.yaml --mode cr_lr` and every `traac experiment` variant do; the recipe
is right for its own mode, and refusing it would make one recipe per mode. So is a recipe's
block of another mode's settings: a recipe may hold several, for the variants that switch modes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from traac.errors import TraacError
from traac.training.methods.registry import blocks
from traac.training.planning.effects import Unread, describe, unread_fields

_RECIPE, _LINE = 1, 2  # where a field was set: the recipe file, the command line (or a variant)
_FIX = {
    "mode": "drop it, or train a mode that reads it",
    "use_peft": "drop it, or set use_peft true",
}


def _given(recipe: Mapping[str, Any], line: Mapping[str, Any]) -> dict[str, tuple[Any, int]]:
    """Each field set, with its value as written (a `difficulty` given as JSON read) and where;
    each setting of a method's block also as `block.key`, with where it was set."""
    given: dict[str, tuple[Any, int]] = {k: (v, _RECIPE) for k, v in recipe.items()}
    given.update({k: (v, _LINE) for k, v in line.items()})
    for block in blocks().keys() & {*recipe, *line}:
        theirs = line.get(block, {})
        merged = {**recipe.get(block, {}), **theirs}  # a mapping: `check_spelling`
        given[block] = (merged, _RECIPE)
        given.update({f"{block}.{k}": (v, _LINE if k in theirs else _RECIPE)
                      for k, v in merged.items()})  # fmt: skip
    value, where = given.get("difficulty", (None, 0))
    if isinstance(value, str):  # JSON, valid: the config has read it (`train.parse`)
        given["difficulty"] = (json.loads(value), where)
    return given


def _label(field: Unread, where: int) -> str:
    """How its author wrote the field: a recipe field, or an option (`--difficulty` and its key)."""
    if where == _RECIPE:
        return f"recipe field {field.name}"
    name, _, key = field.name.partition(".")
    if name in blocks():  # `--alp.beta`
        return f"--{field.name}"
    return f"--{name.replace('_', '-')}" + (f" {key}" if key else "")


def settings_without_effect(
    recipe: Mapping[str, Any], line_values: Mapping[str, Any], mode: str, use_peft: bool
) -> list[str]:
    """Refuse the fields the run does not read that were set with or after what makes them so
    (TraacError, one line naming the first, and the fix); return one note for each reason the
    others have (the fields the recipe set that the command line's mode leaves unread)."""
    given = _given(recipe, line_values)
    unread = unread_fields({k: v for k, (v, _) in given.items() if "." not in k}, mode, use_peft)
    refused: list[str] = []
    noted: list[Unread] = []
    for field in unread:
        where = given.get(field.name, given[field.name.split(".")[0]])[1]
        if where == _RECIPE and field.name.split(".")[0] in blocks():
            noted.append(field)  # a recipe may hold other modes' blocks
        elif where >= given.get(field.because_of, (None, 0))[1]:
            refused.append(f"{_label(field, where)}: no effect ({field.why}); "
                           f"{_FIX[field.because_of]}")  # fmt: skip
        else:
            noted.append(field)
    if refused:
        more = f" (and {len(refused) - 1} more such fields)" if len(refused) > 1 else ""
        raise TraacError(refused[0] + more)
    return [
        f"the recipe's {line} ({cause} {_value(line_values[cause])} given over the recipe)"
        if cause in line_values
        else f"the recipe's {line} (kept for the modes that read it)"
        for line, cause in describe(noted)
    ]


def _value(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
