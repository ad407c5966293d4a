"""The names `traac train` reads (every field of `TrainScriptArguments` and `TRAACConfig`, so
of TRL's `GRPOConfig` and transformers' `TrainingArguments`, and every method's settings, in
their blocks: `declared_blocks`), found without importing torch, transformers or TRL, so that a
misspelt field is named in a second even on a fresh install.

Each class's fields are read off its source file (`ast`: the annotated names of its body),
following the bases the classes have today (`CLASSES`). Where a class is not where it is
expected or its bases differ (another TRL or transformers release, a new mixin of
`TRAACConfig`), there is no list and the full parse names the mistake instead, in the same
words, after its imports. `tests/pipelines/test_recipe_fields.py` checks the list against the
parser's.
"""

from __future__ import annotations

import ast
import functools
from importlib.util import find_spec
from pathlib import Path

# transformers 5.24 renamed gradient_checkpointing(_kwargs) activation_checkpointing(_kwargs),
# keeping the old names with a FutureWarning; 5.17 (what the gpu extra installs) knows only the
# old ones. A recipe may use either: each is read as the name the installed release takes.
CHECKPOINTING = {
    "gradient_checkpointing": "activation_checkpointing",
    "gradient_checkpointing_kwargs": "activation_checkpointing_kwargs",
}

# (package, file in it, class, its bases as written in that file)
CLASSES = (
    ("transformers", "training_args.py", "TrainingArguments", ()),
    ("trl", "trainer/base_config.py", "_BaseConfig", ("TrainingArguments",)),
    ("trl", "trainer/grpo_config.py", "GRPOConfig", ("_BaseConfig",)),
    ("traac", "compression/settings.py", "FormatSettings", ()),
    ("traac", "training/planning/traac_config.py", "TRAACConfig", ("GRPOConfig", "FormatSettings")),
    ("traac", "training/planning/lora.py", "LoraArguments", ()),
    ("traac", "pipelines/train.py", "TrainScriptArguments", ("LoraArguments",)),
)  # fmt: skip
# Every method's settings (`MethodSettings` subclasses there): a recipe's blocks
METHODS = ("traac", "training/methods", "MethodSettings")


class Unexpected(Exception):
    """A class is not where `CLASSES` says, or has other bases."""


def _package_dir(package: str) -> Path:
    spec = find_spec(package)  # finds a top-level package without running it
    if spec is None or not spec.submodule_search_locations:
        raise Unexpected(package)
    return Path(next(iter(spec.submodule_search_locations)))


@functools.cache
def _classes(path: Path) -> dict[str, ast.ClassDef]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError) as err:
        raise Unexpected(str(path)) from err
    return {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}


def _fields(node: ast.ClassDef) -> dict[str, bool]:
    """The dataclass fields a class body declares (annotated names; ClassVars are none), each
    with whether it is a boolean that defaults to true (transformers' parser adds `--no_<field>`
    for those)."""
    fields = {}
    for stmt in node.body:
        if not isinstance(stmt, ast.AnnAssign) or not isinstance(stmt.target, ast.Name):
            continue
        annotation = ast.unparse(stmt.annotation)
        if "ClassVar" not in annotation:
            fields[stmt.target.id] = "bool" in annotation and _default(stmt.value) is True
    return fields


def _default(value: ast.expr | None) -> object:
    """A field's default as written (`= x` or `field(default=x)`) where it is a constant."""
    if isinstance(value, ast.Call):
        value = next((k.value for k in value.keywords if k.arg == "default"), None)
    return value.value if isinstance(value, ast.Constant) else None


def declared_fields() -> list[str] | None:
    """Every field name (and `no_<flag>`) the train parser takes, read off the sources; None
    where a class is not as expected."""
    fields: dict[str, bool] = {}  # a subclass's field overrides its base's (CLASSES: bases first)
    try:
        for package, file, name, bases in CLASSES:
            node = _classes(_package_dir(package) / file).get(name)
            if node is None or tuple(ast.unparse(b) for b in node.bases) != bases:
                raise Unexpected(f"{package}/{file}: {name}")
            fields.update(_fields(node))
    except Unexpected:
        return None
    negated = {f"no_{name}" for name, true in fields.items() if true}
    return sorted({*fields, *negated, *CHECKPOINTING, *CHECKPOINTING.values()})


def _constants(node: ast.ClassDef) -> dict[str, object]:
    """The constants a class body assigns (`BLOCK, FLAT_PREFIX = "alp", "alp_"`)."""
    out: dict[str, object] = {}
    for stmt in node.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, value = stmt.targets[0], stmt.value
            pairs = (zip(target.elts, value.elts, strict=False)
                     if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple)
                     else [(target, value)])  # fmt: skip
            for name, constant in pairs:
                if isinstance(name, ast.Name) and isinstance(constant, ast.Constant):
                    out[name.id] = constant.value
    return out


def declared_blocks() -> dict[str, tuple[str | None, tuple[str, ...]]] | None:
    """Each method's block (`MethodSettings.BLOCK`) with its flat prefix from before the blocks
    (`FLAT_PREFIX`) and its settings' names, read off the sources; None where a class is not as
    expected."""
    package, folder, base = METHODS
    out: dict[str, tuple[str | None, tuple[str, ...]]] = {}
    try:
        for path in sorted((_package_dir(package) / folder).glob("*.py")):
            for node in _classes(path).values():
                if base in (ast.unparse(b) for b in node.bases):
                    constants = _constants(node)
                    if not isinstance(constants.get("BLOCK"), str):
                        raise Unexpected(f"{path}: {node.name}")
                    prefix = constants.get("FLAT_PREFIX")
                    block = str(constants["BLOCK"])
                    out[block] = (prefix if isinstance(prefix, str) else None,
                                  tuple(_fields(node)))  # fmt: skip
    except Unexpected:
        return None
    return out
