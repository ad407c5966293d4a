"""A training recipe read before the training stack is imported: `traac train` checks here what
needs no field list from TRL (the recipe file and its YAML, the counts of
`traac.training.counts`, a misspelt built-in model name), so those mistakes are named in a
second rather than after the imports of torch, transformers and TRL. The full parse follows
(`traac.pipelines.train.parse`), which checks every field again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from traac.common.model_names import check_model_name
from traac.errors import TraacError
from traac.training.counts import check_counts

_SCORERS = ("reference", "policy")  # scoring_model values that name no model


def read_recipe(path: Path) -> dict[str, Any]:
    """The recipe's mapping, or one line naming what keeps it from being one."""
    if not path.is_file():
        raise TraacError(f"--config {path}: no such recipe file")
    try:
        recipe = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as err:
        raise TraacError(f"--config {path}: not UTF-8 text ({err.reason})") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or type(err).__name__
        raise TraacError(f"--config {path}: not valid YAML ({problem}{where})") from None
    if not isinstance(recipe, dict):
        raise TraacError(f"--config {path}: a recipe is a YAML mapping of field: value")
    return recipe


def config_path(argv: list[str]) -> Path | None:
    """The `--config` of a command line (None without one)."""
    for at, arg in enumerate(argv):
        if arg.startswith("--config="):
            return Path(arg.partition("=")[2])
        if arg == "--config":
            if at + 1 >= len(argv) or argv[at + 1].startswith("--"):
                raise TraacError("--config needs a recipe path (traac train --config RECIPE.yaml)")
            return Path(argv[at + 1])
    return None


def overrides(argv: list[str]) -> dict[str, Any]:
    """`--field value`, `--field=value` and bare `--flag` (true) of a command line, by field
    name (dashes read as underscores); the first value of a list."""
    values: dict[str, Any] = {}
    at = 0
    while at < len(argv):
        arg = argv[at]
        at += 1
        if not arg.startswith("--") or arg == "--config":
            continue
        name, eq, value = arg[2:].partition("=")
        if not eq:
            follows = at < len(argv) and not argv[at].startswith("--")
            value = argv[at] if follows else "true"
            at += follows
        values[name.replace("-", "_")] = value
    return values


def precheck(argv: list[str]) -> None:
    """What the recipe and the command line get wrong that is named without TRL's field list."""
    path = config_path(argv)
    recipe = read_recipe(path) if path is not None else {}
    values = {**recipe, **overrides(argv)}
    check_counts(values)
    model = values.get("model_name_or_path")
    if isinstance(model, str):
        check_model_name(model, "model_name_or_path")
    scorer = values.get("scoring_model")
    if isinstance(scorer, str) and scorer not in _SCORERS:
        check_model_name(scorer, "scoring_model")
