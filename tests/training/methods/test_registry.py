"""The registry is the one table: every method's settings fields are `TRAACConfig` fields with
their defaults and help, every method is a mode, and its variants are `experiment compare`'s."""

from __future__ import annotations

import dataclasses

import pytest

from traac.pipelines.variants import COMPARE
from traac.training.config import TRAACConfig
from traac.training.methods.registry import METHODS, method_fields, settings_classes


def test_every_settings_field_is_a_config_field_with_its_default_and_help() -> None:
    config = {f.name: f for f in dataclasses.fields(TRAACConfig)}
    declared = [f for cls in settings_classes() for f in dataclasses.fields(cls)]
    # 18 of the peers, GFPO's 2, DOT's 2, the first-correct penalty's 1, LC-R1's 2, DDCA's 1,
    # ARLCP's 2, AdaptThink's 2
    assert len(declared) == len({f.name for f in declared}) == 30
    for f in declared:
        assert config[f.name].default == f.default, f.name
        assert config[f.name].metadata["help"] == f.metadata["help"], f.name


def test_every_peer_is_a_mode_and_its_variants_are_compared() -> None:
    for name, method in METHODS.items():
        if method.settings is None:  # TRAAC's own: their variants are variants.py's
            assert not method.compare
            continue
        assert method.rewards[2:] == ((method.reward,) if method.reward else ())
        assert method.compare, name
        for label, fields in method.compare:
            assert COMPARE[label] == fields and fields["mode"] == name


def test_a_field_declared_twice_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    twin = dataclasses.make_dataclass("Twin", [("alp_beta", float, dataclasses.field(default=2.0))])
    method = dataclasses.replace(METHODS["alp"], name="twin", settings=twin)
    monkeypatch.setitem(METHODS, "twin", method)
    with pytest.raises(TypeError, match="two methods declare one field"):
        method_fields()
