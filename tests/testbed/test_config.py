"""The testbed's settings key the build cache (`~/.cache/traac/testbed/<name>-seed<n>-<hash>`):
the hash covers the settings' field names and values, never their class names, so renaming a
class keeps every cached model while a changed field or value builds a new one."""

from __future__ import annotations

from dataclasses import replace

import pytest

from traac.errors import TraacError
from traac.testbed.config import SMOLLM2_THINK, TINY, default_config

# The keys of the models built before the settings classes were renamed (`*Config` to
# `*Settings`); the caches of the testbed and smollm2-think builds are stored under them.
KEYS = {
    "full": (default_config(), "ff8770138923"),
    "quick": (default_config(quick=True), "6c32eb8acad6"),
    "tiny": (TINY, "02a9e7816114"),
    "smollm2-think": (default_config(base="smollm2"), "eb8ce6dec65b"),
    # built before the long teacher's `carry` setting
    "long-trailing": (default_config(long="trailing"), "1ad3c312020b"),
    "long-interleaved": (default_config(long="interleaved"), "3a5c2badaa49"),
}


@pytest.mark.parametrize("name", sorted(KEYS))
def test_cache_keys_of_the_built_in_testbeds_are_stable(name):
    settings, key = KEYS[name]
    assert settings.name == name and settings.hash() == key


def test_any_changed_value_changes_the_key():
    think = default_config(base="smollm2")
    assert think == SMOLLM2_THINK
    assert replace(think, train=replace(think.train, epochs=2.0)).hash() != think.hash()
    assert default_config(seed=1).hash() != default_config().hash()


def test_the_long_builds_have_their_own_keys_and_refuse_other_flags():
    trailing, interleaved = default_config(long="trailing"), default_config(long="interleaved")
    assert (trailing.name, interleaved.name) == ("long-trailing", "long-interleaved")
    # the same build but for the redundancy's position
    assert replace(trailing, name="x", teacher=interleaved.teacher) == replace(
        interleaved, name="x"
    )
    assert len({trailing.hash(), interleaved.hash(), default_config().hash()}) == 3
    carried = replace(interleaved, teacher=replace(interleaved.teacher, carry=True))
    assert carried.hash() != interleaved.hash()
    with pytest.raises(TraacError, match="--long builds the tiny model"):
        default_config(quick=True, long="trailing")
    with pytest.raises(TraacError, match="unknown --long 'sideways'"):
        default_config(long="sideways")  # type: ignore[arg-type]
