"""The names `traac train` reads (every field of `TrainScriptArguments` and `TRAACConfig`, so
of TRL's `GRPOConfig` and transformers' `TrainingArguments`, and every method's settings, the
keys of `method_args` a recipe may also write flat), found without importing torch,
transformers or TRL, so that a misspelt field is named in a second even on a fresh install.

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
# The parser's third class, `method_fields()`: every method's settings (`MethodSettings`
# subclasses there), the keys of `method_args` that a recipe may also write flat
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


def _declared() -> set[str]:
    fields: dict[str, bool] = {}  # a subclass's field overrides its base's (CLASSES: bases first)
    for package, file, name, bases in CLASSES:
        node = _classes(_package_dir(package) / file).get(name)
        if node is None or tuple(ast.unparse(b) for b in node.bases) != bases:
            raise Unexpected(f"{package}/{file}: {name}")
        fields.update(_fields(node))
    package, folder, base = METHODS
    for path in sorted((_package_dir(package) / folder).glob("*.py")):
        for node in _classes(path).values():
            if node.name == base or base in (ast.unparse(b) for b in node.bases):
                fields.update(_fields(node))
    negated = {f"no_{name}" for name, true in fields.items() if true}
    return {*fields, *negated, *CHECKPOINTING, *CHECKPOINTING.values()}


def declared_fields() -> list[str] | None:
    """Every field name (and `no_<flag>`) the train parser takes, read off the sources; None
    where a class is not as expected."""
    try:
        return sorted(_declared())
    except Unexpected:
        return None
