"""The rows a foreign scorer gets in the probe report."""

from __future__ import annotations

from traac.evaluation.reports.probe_report import foreign_specs


def test_a_foreign_scorer_gets_its_attention_rows_under_its_name() -> None:
    specs = {s.name: s.settings for s in foreign_specs("smollm2")}
    assert list(specs) == [
        "smollm2: attention all", "smollm2: attention first_half",
        "smollm2: attention all, gated heads", "smollm2: attention first_half, gated heads",
    ]  # fmt: skip
    assert {s.scorer for s in specs.values()} == {"attention"}
    assert [(s.probe_layers, s.probe_heads) for s in specs.values()] == [
        ("all", "all"), ("first_half", "all"), ("all", "gated"), ("first_half", "gated"),
    ]  # fmt: skip
