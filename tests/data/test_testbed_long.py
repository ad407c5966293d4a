"""The long testbed's problems (`testbed-long:...`, longer tiers, the same pools) and its step
grammar, which labels any text: the teacher's steps as its labels say, a model's own
deviations as `other`."""

from __future__ import annotations

import pytest

from traac.common.step_labels import labeller_for
from traac.data.datasets import load_items
from traac.data.testbed_long import (
    LONG_SOURCE,
    LONG_TIERS,
    coarse_kinds,
    long_step_kind,
    parse_long_spec,
)
from traac.data.testbed_problems import make_items
from traac.data.training import load_training_items
from traac.errors import TraacError


def test_long_specs_draw_longer_chains_from_the_same_pools():
    items = parse_long_spec("testbed-long:all?n=4")
    assert [i.tier for i in items] == ["easy"] * 4 + ["medium"] * 4 + ["hard"] * 4
    for item in items:
        assert item.entry["metadata"]["num_terms"] == LONG_TIERS.terms[item.tier]
        assert item.data_source == LONG_SOURCE and item.id.startswith(f"{LONG_SOURCE}/")
    assert [i.question for i in load_items("testbed-long:hard?n=3")] == [
        i.question for i in make_items("hard", 3, tiers=LONG_TIERS)
    ]
    rl = load_training_items("testbed-long:easy?n=3")
    assert {i.entry["metadata"]["num_terms"] for i in rl} == {3}
    assert {i.id for i in rl}.isdisjoint(i.id for i in parse_long_spec("testbed-long:easy?n=300"))
    with pytest.raises(TraacError, match="unknown parameter 'terms'"):
        load_items("testbed-long:easy?terms=4")


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("First, 3 + 5 = 8.", "needed"),
        ("Then -4 - 9 = -13.\n", "needed"),
        ("So the answer is -13.", "conclude"),
        ("Hmm, the rest is long, so I will estimate.", "guess"),
        ("Let me double-check 8 - 2 = 6.", "recheck"),
        ("Let me verify 8 - 2: 6.", "recheck"),
        ("Hmm, 8 - 2 is 6.", "recheck"),
        ("Let me restate the problem: 3 + 5 - 2 + 7.", "restate"),
        ("Okay, so far the total is 6.", "restate"),
        ("Alternatively, let me group 5 - 2 first.", "detour"),
        ("Hmm, that does not make it easier, back to 6.", "detour"),
        # what a model may write instead: no shape of the grammar
        ("Then 3 + 5 = 8. Then", "other"),
        ("Let me restate the problem: 3 +.", "other"),
        ("Wait, 3 + = 8.", "other"),
        ("", "other"),
    ],
)
def test_the_grammar_reads_each_steps_kind_from_its_text(text, kind):
    assert long_step_kind(text) == kind


def test_telemetry_counts_every_redundant_kind_as_a_recheck():
    steps = ["First, 1 + 2 = 3.", "Okay, so far the total is 3.", "Then 3 + 1 = 4.",
             "Alternatively, let me group 2 + 1 first.", "So the answer is 4.", "Oops"]  # fmt: skip
    expected = ["compute", "recheck", "compute", "recheck", "conclude", "compute"]
    assert coarse_kinds(steps) == expected
    assert labeller_for(LONG_SOURCE)(steps) == expected
