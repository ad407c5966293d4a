"""The field list read off the sources is the train parser's, and a class that is not where it
is expected gives no list (the full parse then names the field)."""

from __future__ import annotations

import pytest

from traac.pipelines import recipe_fields
from traac.pipelines.recipe_fields import declared_fields


def test_the_declared_fields_are_the_parsers_names():
    from traac.pipelines.train import build_parser

    parser = build_parser()
    dests = {a.dest for a in parser._actions if a.dest != "help"}
    options = {
        o[2:].replace("-", "_") for a in parser._actions for o in a.option_strings if o[:2] == "--"
    }
    assert declared_fields() == sorted((dests | options) - {"help"})


def test_a_class_not_where_expected_gives_no_list(monkeypatch: pytest.MonkeyPatch):
    moved = [(p, f, c, ("SomeNewBase",) if c == "GRPOConfig" else b)
             for p, f, c, b in recipe_fields.CLASSES]  # fmt: skip
    monkeypatch.setattr(recipe_fields, "CLASSES", tuple(moved))
    assert declared_fields() is None
    monkeypatch.setattr(recipe_fields, "CLASSES", (("trl", "no_such.py", "GRPOConfig", ()),))
    assert declared_fields() is None
