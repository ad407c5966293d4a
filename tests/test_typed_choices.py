"""The compressing modes' choices and the modes are asked of the objects that own them, never
compared as strings elsewhere: a comparison of a string with one of these fields (an attribute,
a name or a mapping key of that name), or with one of the values only they take, is refused
outside the field's owner. A module's own string constants count as strings."""

from __future__ import annotations

import ast
from pathlib import Path

import traac
from traac.compression.early_exit import COMPRESSION_KINDS
from traac.compression.settings import CompressionSettings
from traac.training.methods.traac import TraacSettings

ROOT = Path(traac.__file__).parent
# Each field, the module that owns its values (and alone may compare them), and what the others ask.
OWNERS = {
    "compression": "traac.compression.early_exit",  # CompressionKind (.compression_kind)
    "copy_loss": "traac.training.step.copy_rules",  # CopySettings.masks_think
    "copy_pool": "traac.training.step.copy_rules",  # CopySettings.copies_whole
    "copy_tags": "traac.training.step.copy_rules",  # CopySettings.double_tags
    "scoring_model": "traac.common.scoring_model",  # is_foreign, names_policy, names_reference
    "uniformity_calibration": "traac.training.methods.traac",  # TraacSettings.ranks_uniformity
    "scorer": "traac.compression.settings",  # ScorerKind
    "step_scope": "traac.compression.settings",  # CompressionSettings.splits_probe
    "probe_heads": "traac.compression.settings",  # CompressionSettings.gates_heads
    "mode": "traac.training.methods.registry",  # the method object (METHODS) and its fields
}
# Values no other setting takes: compared anywhere but at their owner, they are these choices.
ONLY_THEIRS = {
    "answer_only": "copy_loss",
    "all_correct": "copy_pool",
    "early_exit": "compression",
    "early_exit_attention_weights": "compression",
    "after_answer": "compression",
}
# (module, function): why it may compare. A stored run key's spelling is matched as written.
ALLOWED = {
    ("traac.pipelines.experiments", "_unnamed_copies"): "the old run keys of TRAAC's variants",
}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def strings(node: ast.AST, constants: dict[str, set[str]]) -> set[str] | None:
    """The strings `node` is, if it is only strings (None allowed): a literal, a tuple, list or
    set of them, or a module constant bound to one; else None."""
    if isinstance(node, ast.Constant):
        return (
            {node.value} if isinstance(node.value, str) else set() if node.value is None else None
        )
    if isinstance(node, ast.Name) and node.id in constants:
        return constants[node.id]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        parts = [strings(e, constants) for e in node.elts]
        return None if any(p is None for p in parts) else set().union(*parts)
    return None


def named(node: ast.AST) -> set[str]:
    """The fields `node` is: a name, an attribute or a string key (`x["mode"]`, `x.get("mode")`),
    a method called on one (`x.mode.lower()`), each of a tuple's; a method's `name` is its
    mode. A bare `mode` is too common a word (the data adapters' answer modes) to count."""
    if isinstance(node, ast.Tuple | ast.List):
        return set().union(*(named(e) for e in node.elts))
    if isinstance(node, ast.Name):
        return {node.id} - {"mode"}
    if isinstance(node, ast.Attribute):
        method = isinstance(node.value, ast.Attribute) and node.value.attr == "method"
        return {node.attr} | ({"mode"} if method and node.attr == "name" else set())
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return {str(node.slice.value)}
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr == "get" and node.args and isinstance(node.args[0], ast.Constant):
            return {str(node.args[0].value)}
        return named(node.func.value)
    return set()


def comparisons(source: str, module: str) -> list[str]:
    """Each comparison of a string with an owned field outside its owner, as `module:line`."""
    tree = ast.parse(source)
    constants: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            value = strings(node.value, {})
            if isinstance(target, ast.Name) and value:
                constants[target.id] = value
    allowed = {f for m, f in ALLOWED if m == module}
    skip = {
        id(sub)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.name in allowed
        for sub in ast.walk(node)
    }
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare) or id(node) in skip:
            continue
        operands = [node.left, *node.comparators]
        values = [strings(o, constants) for o in operands]
        literal = set().union(*(v for v in values if v))
        if not literal:
            continue
        read = set().union(*(named(o) for o, v in zip(operands, values, strict=True) if v is None))
        fields = (read & OWNERS.keys()) | {ONLY_THEIRS[s] for s in literal & ONLY_THEIRS.keys()}
        if any(OWNERS[f] != module for f in fields):
            found.append(f"{module}:{node.lineno} {ast.unparse(node)}")
    return found


def test_no_choice_is_compared_as_a_string_outside_its_owner() -> None:
    found = [
        line
        for path in sorted(ROOT.rglob("*.py"))
        for line in comparisons(path.read_text(), module_name(path))
    ]
    assert found == []


def test_the_scan_finds_what_it_refuses() -> None:
    """Each way of comparing is found (and not at the owner)."""
    source = """
POOL = "all_correct"
CHOICES = ("scorer", "early_exit")
def f(args, settings, run, overrides, pool):
    a = args.copy_loss == "answer_only"
    b = settings.compression != "scorer"
    c = overrides.get("mode") == "cr"
    d = run.method.name == "dler"
    e = pool == POOL
    g = settings.compression in CHOICES
    h = args.x == "after_answer"
    k = args.copy_loss.lower() == "full"
    i = args.copy_loss is None
    j = args.other == "full"
    m = mode == "mcq"
    n = "length_reward" in mode.rewards
"""
    lines = [line.split()[0] for line in comparisons(source, "traac.elsewhere")]
    assert lines == [f"traac.elsewhere:{n}" for n in range(5, 13)]
    owner = OWNERS["copy_loss"]  # where only the other fields' comparisons are refused
    lines = [line.split()[0] for line in comparisons(source.replace('"mode"', '"x"'), owner)]
    assert lines == [f"{owner}:{n}" for n in (6, 8, 10, 11)]


def test_the_owners_answer_for_the_values_users_write() -> None:
    """The settings keep the strings a recipe writes, and answer what the step asks."""
    settings = TraacSettings(compression="after_answer", copy_loss="answer_only",
                             uniformity_calibration="rank")  # fmt: skip
    assert settings.compression_kind is COMPRESSION_KINDS["after_answer"]
    assert settings.copies.masks_think and settings.ranks_uniformity
    assert type(settings.compression) is str and type(settings.copy_loss) is str
    default = TraacSettings()
    assert default.compression_kind is COMPRESSION_KINDS["scorer"]
    assert not default.copies.masks_think and not default.ranks_uniformity
    scope = CompressionSettings(step_scope="reasoning", probe_heads="gated")
    assert not scope.splits_probe and scope.gates_heads
    assert CompressionSettings().splits_probe and not CompressionSettings().gates_heads
