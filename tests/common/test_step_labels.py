"""The testbed registers its one step-labelling rule; the training step asks the registry and
imports no testbed knowledge."""

from __future__ import annotations

import ast
import inspect

from traac.common.step_labels import labeller_for
from traac.data import testbed_problems
from traac.training.step import phases as step


def test_the_testbed_registers_its_rule_under_its_data_source() -> None:
    assert labeller_for(testbed_problems.DATA_SOURCE) is testbed_problems.step_kinds
    assert labeller_for("gsm8k") is None  # most data's steps carry no labels
    steps = ["First, 3 + 5 = 8.\n", "So the answer is 8.\n", "Wait, 3 + 5 = 8.\n"]
    assert testbed_problems.step_kinds(steps) == ["compute", "conclude", "recheck"]


def test_the_training_step_imports_no_testbed_knowledge() -> None:
    tree = ast.parse(inspect.getsource(step))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert "traac.common.step_labels" in imported
    assert not [m for m in imported if m.startswith(("traac.testbed", "traac.data"))]
