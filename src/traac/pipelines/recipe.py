"""A training recipe read before the training stack is imported: `traac train` checks here the
recipe file and its YAML, the counts of `traac.training.planning.counts` and a misspelt built-in
model name, so those mistakes are named in a second rather than after the imports of torch,
transformers and TRL. The full parse follows (`traac.pipelines.train.parse`), which checks every
field again.

A method's settings are written in its block (`alp: {beta: 1.0}`, `--alp.beta 1.0`); a flat
key of earlier releases (`alp_beta`) is refused naming its block (`check_spelling`, which the
full parse runs too).
Unknown fields are named from the field list `traac.pipelines.recipe_fields` reads off the
classes' sources without importing them; where it cannot (a release outside the versions
pyproject.toml allows, whose classes lie elsewhere), the full parse names the field, in the same
words, after its imports.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import yaml

from traac.common.model_names import check_model_name
from traac.common.outputs import writable_dir
from traac.common.scoring_model import is_foreign
from traac.compression.difficulty import FLAT_KEYS
from traac.errors import TraacError
from traac.pipelines.recipe_fields import declared_blocks, declared_fields
from traac.training.planning.counts import check_counts


class _DuplicateKey(Exception):
    """A mapping of the recipe holds a key twice: YAML keeps the last value in silence."""

    def __init__(self, key: Any, first: int, again: int) -> None:
        super().__init__(key)
        self.key, self.first, self.again = key, first, again


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key written twice in one mapping (the recipe's own, or
    a nested one such as `difficulty`)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base`, whose keys it may override
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if isinstance(key, str | int | float | bool) and key in seen:
                raise _DuplicateKey(key, seen[key], line)
            if isinstance(key, str | int | float | bool):
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


def read_recipe(path: Path, flag: str = "--config") -> dict[str, Any]:
    """The recipe's mapping, or one line naming what keeps it from being one (and the option
    `flag` that gave the path); a key written twice is refused, naming both lines."""
    if not path.is_file():
        raise TraacError(f"{flag} {path}: no such recipe file")
    try:
        recipe = yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)
    except _DuplicateKey as twice:
        raise TraacError(
            f"{flag} {path}: {twice.key} is written twice (lines {twice.first} and "
            f"{twice.again}), and YAML keeps only the last; keep one"
        ) from None
    except UnicodeDecodeError as err:
        raise TraacError(f"{flag} {path}: not UTF-8 text ({err.reason})") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or type(err).__name__
        raise TraacError(f"{flag} {path}: not valid YAML ({problem}{where})") from None
    if not isinstance(recipe, dict):
        raise TraacError(f"{flag} {path}: a recipe is a YAML mapping of field: value")
    return recipe


def check_continuable(recipe: Path, source: Path) -> None:
    """`source`, whose runs `recipe`'s continue (`traac.pipelines.continuation`): the two files
    alike but for `max_steps`."""
    ours, theirs = read_recipe(recipe), read_recipe(source, "--continue-from")
    differ = sorted(
        key for key in ours.keys() | theirs.keys()
        if key != "max_steps" and ours.get(key) != theirs.get(key)
    )  # fmt: skip
    if differ:
        raise TraacError(
            f"--continue-from {source}: it differs from --config {recipe} in "
            f"{', '.join(differ)}; only max_steps may differ (or drop --continue-from)"
        )


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


def dotted_options(argv: list[str]) -> tuple[dict[str, dict[str, str]], list[str]]:
    """The options of the methods' blocks (`--alp.beta 1.0`, `--alp.beta=1.0`; dashes read as
    underscores) by block and setting, and the rest of the command line."""
    found: dict[str, dict[str, str]] = {}
    rest: list[str] = []
    at = 0
    while at < len(argv):
        arg = argv[at]
        at += 1
        flag, eq, value = arg.partition("=")
        if not flag.startswith("--") or "." not in flag or flag == "--config":
            rest.append(arg)
            continue
        if not eq:
            if at >= len(argv) or argv[at].startswith("--"):
                raise TraacError(f"{flag} needs a value ({flag} VALUE)")
            value, at = argv[at], at + 1
        block, _, key = flag[2:].replace("-", "_").partition(".")
        found.setdefault(block, {})[key] = value
    return found, rest


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


# Names read by other means than a field: the recipe's `env` mapping, `--config`, the help.
_NOT_FIELDS = ("env", "config", "help", "help_all")


def nearest(name: str, fields: list[str], option: bool = False) -> str:
    """'; did you mean F?' for the field `name` begins (if one) or the nearest, else ''; as an
    option (`--field-name`) with `option`."""
    key = name.replace("-", "_")
    starts = [f for f in fields if f.startswith(key)]
    near = starts if len(starts) == 1 else difflib.get_close_matches(key, fields, n=1)
    if not near:
        return ""
    return f"; did you mean {'--' + near[0].replace('_', '-') if option else near[0]}?"


def unknown_recipe_field(key: str, fields: list[str]) -> TraacError:
    return TraacError(f"recipe field {key}: no such field{nearest(key, fields)}")


def unknown_option(flag: str, fields: list[str]) -> TraacError:
    return TraacError(f"unknown option {flag}{nearest(flag[2:], fields, option=True)}")


# Each method's block: the prefix its settings took as flat fields before the blocks (None: never
# flat) and its settings' names; read off the sources before the imports
# (`recipe_fields.declared_blocks`), from the classes by the full parse (`registry.spellings`).
Blocks = dict[str, tuple[str | None, tuple[str, ...]]]


def flat_names(blocks: Blocks) -> dict[str, str]:
    """Each setting's flat name from before the blocks (`alp_beta`), with its spelling now
    (`alp.beta`)."""
    pairs = [(f"{prefix}{name}", f"{block}.{name}") for block, (prefix, names) in blocks.items()
             if prefix is not None for name in names]  # fmt: skip
    if len(dict(pairs)) != len(pairs):
        raise TypeError(f"two settings share one flat name: {sorted(dict(pairs))}")
    return dict(pairs)


def _flat_key(name: str, flat: dict[str, str]) -> TraacError | None:
    """A key of earlier releases in one line with its spelling now (None: any other name): a
    method's setting (`alp_beta`, or a negated flag `no_l1_budget_in_prompt`) its block,
    `method_args` the blocks, a difficulty field (`tau_easy`) its place in `difficulty`."""
    spelling = flat.get(name) or (flat.get(name[3:]) if name.startswith("no_") else None)
    if spelling is not None:
        block, _, key = spelling.partition(".")
        return TraacError(f"{name}: a method's setting is written in its mode's block now: "
                          f"{block}: {{{key}: VALUE}} in a recipe, --{spelling} VALUE on the "
                          "command line")  # fmt: skip
    if name == "method_args":
        return TraacError(f"{name}: write the mode's settings in its block (traac: {{scorer: "
                          "random} in a recipe, --traac.scorer random as an option)")  # fmt: skip
    if name in FLAT_KEYS:
        value = "VALUE"
        for key in reversed(FLAT_KEYS[name].split(".")[1:]):
            value = f"{{{key}: {value}}}"
        return TraacError(f"{name}: the bins are one mapping now, {FLAT_KEYS[name]}: write "
                          f"`difficulty: {value}` in the recipe (JSON with --difficulty on the "
                          "command line)")  # fmt: skip
    return None


def check_spelling(blocks: Blocks, recipe: dict[str, Any], argv: list[str]) -> None:
    """One spelling of each setting, the recipe's and the command line's (`argv`): no key of
    earlier releases (`_flat_key`); each block, the recipe's and the options' (`--alp.beta`), a
    mapping of its mode's settings, in the words of `MethodSettings.from_mapping`."""
    line, rest = dotted_options(argv)
    flat = flat_names(blocks)
    for name in (*recipe, *overrides(rest)):
        if (error := _flat_key(name, flat)) is not None:
            raise error
    for block, values in [*((b, v) for b, v in recipe.items() if b in blocks), *line.items()]:
        if block not in blocks:  # an option's (`--alpp.beta`), naming the nearest
            near = difflib.get_close_matches(block, list(blocks), n=1)
            hint = (
                f"; did you mean --{near[0]}.?" if near else f"; the blocks are {', '.join(blocks)}"
            )
            raise TraacError(f"--{block}.{next(iter(values))}: no mode's settings are called "
                             f"{block}{hint}")  # fmt: skip
        if not isinstance(values, dict):  # a recipe's
            raise TraacError(f"recipe field {block}: the settings of mode {block} are a mapping "
                             f"({block}: {{setting: value}})")  # fmt: skip
        names = blocks[block][1]
        for key in values:
            if key not in names:
                raise TraacError(f"{block}.{key}: not a setting of mode {block}; its settings "
                                 f"are {', '.join(names)}")  # fmt: skip


def _check_names(recipe: dict[str, Any], argv: list[str]) -> None:
    """One spelling of each setting; every recipe key and option a known field or block (when
    the sources can be read)."""
    blocks = declared_blocks()
    if blocks is not None:
        check_spelling(blocks, recipe, argv)
    fields = declared_fields()
    if fields is None:
        return
    known = {
        *fields,
        *_NOT_FIELDS,
        *FLAT_KEYS,
        *(blocks or ()),
    }  # FLAT_KEYS: named above, or by the parse
    for key in recipe:
        if key not in known:
            raise unknown_recipe_field(key, fields)
    for arg in dotted_options(argv)[1]:
        flag = arg.partition("=")[0]
        if flag.startswith("--") and flag[2:].replace("-", "_") not in known:
            raise unknown_option(flag, fields)


def precheck(argv: list[str]) -> None:
    """What the recipe and the command line get wrong, named before TRL is imported."""
    path = config_path(argv)
    recipe = read_recipe(path) if path is not None else {}
    _check_names(recipe, argv)
    values = {**recipe, **overrides(argv)}
    check_counts(values)
    model = values.get("model_name_or_path")
    if isinstance(model, str):
        check_model_name(model, "model_name_or_path")
    if isinstance(values.get("output_dir"), str):  # what transformers would fail to make
        writable_dir(values["output_dir"], "output_dir")
    block = recipe.get("traac") if isinstance(recipe.get("traac"), dict) else {}
    scorer = {**block, **dotted_options(argv)[0].get("traac", {})}.get("scoring_model")
    if isinstance(scorer, str) and is_foreign(scorer):
        check_model_name(scorer, "traac.scoring_model")
