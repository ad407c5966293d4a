"""Dataset specs: the name and its options."""

from __future__ import annotations

from traac.data.specs import split_spec


def test_split_spec_reads_options():
    assert split_spec("reasoning-gym:ab?size=3&seed=7") == (
        "reasoning-gym:ab",
        {"size": "3", "seed": "7"},
    )
    assert split_spec("aime") == ("aime", {})
