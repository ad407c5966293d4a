"""The one entry point: every form of spec, and the reasoning-gym sets generated offline."""

from __future__ import annotations

import pytest

from traac.data import adapters, datasets
from traac.data.datasets import load_items
from traac.errors import TraacError


def test_unknown_spec_names_the_forms():
    with pytest.raises(TraacError, match="not a known name"):
        load_items("no-such-benchmark")


def test_reasoning_gym_items_carry_their_entry_and_are_reproducible():
    items = load_items("reasoning-gym:leg_counting?size=3&seed=5")
    again = load_items("reasoning-gym:leg_counting?size=3&seed=5")
    assert [i.question for i in items] == [i.question for i in again]
    assert len(items) == 3 and all(i.verifier == "task" for i in items)
    assert items[0].entry["metadata"]["source_dataset"] == "leg_counting"
    assert len({i.id for i in items}) == 3


def test_reasoning_gym_errors_are_one_line():
    with pytest.raises(TraacError, match="no such task"):
        load_items("reasoning-gym:not_a_task")
    with pytest.raises(TraacError, match="size"):
        load_items("reasoning-gym:leg_counting?size=many")


def test_otb_underthink_has_the_eleven_tasks():
    items = load_items("otb-underthink?n=1&seed=3")
    tasks = [i.entry["metadata"]["source_dataset"] for i in items]
    assert tasks == list(datasets.OTB_UNDERTHINK_TASKS)
    assert {i.data_source for i in items} == {adapters.OTB_UNDERTHINK}
    with pytest.raises(TraacError, match="unknown option"):
        load_items("otb-underthink?size=2")


def test_an_empty_spec_is_not_the_current_directory():
    for spec in ("", "  "):
        with pytest.raises(TraacError, match="dataset: empty spec"):
            load_items(spec)
