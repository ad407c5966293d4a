"""The testbed's settings key the build cache (`~/.cache/traac/testbed/<name>-seed<n>-<hash>`):
the hash covers the settings' field names and values, never their class names, so renaming a
class keeps every cached model while a changed field or value builds a new one."""

from __future__ import annotations

from dataclasses import replace

import pytest

from traac.data.testbed_long import LONG_TIERS
from traac.errors import TraacError
from traac.testbed.config import SMOLLM2_THINK, TINY, TrainSettings, default_config

# The keys of the models built before the settings classes were renamed (`*Config` to
# `*Settings`); the caches of the testbed and smollm2-think builds are stored under them.
KEYS = {
    "full": (default_config(), "ff8770138923"),
    "quick": (default_config(quick=True), "6c32eb8acad6"),
    "tiny": (TINY, "02a9e7816114"),
    "smollm2-think": (default_config(base="smollm2"), "eb8ce6dec65b"),
    # SmolLM2 on the long traces (not built yet): pinned so that a change is deliberate
    "smollm2-think-long-trailing": (default_config(base="smollm2", long="trailing"),
                                    "85f510af4be1"),
    "smollm2-think-long-interleaved": (default_config(base="smollm2", long="interleaved"),
                                       "66c09a9b7f57"),
}  # fmt: skip


@pytest.mark.parametrize(("position", "key"), [("trailing", "1ad3c312020b"),
                                               ("interleaved", "3a5c2badaa49")])  # fmt: skip
def test_the_long_builds_before_carry_keep_their_keys(position, key):
    """The second pair of long builds (9,000 traces in 563 steps of 16, no carry), cached."""
    settings = default_config(long=position)
    before = replace(settings, teacher=replace(settings.teacher, carry=False),
                     train=replace(settings.train, n_traces=9_000, batch_size=16))  # fmt: skip
    assert before.hash() == key


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
    assert interleaved.teacher.carry and interleaved.train == default_config().train
    with pytest.raises(TraacError, match="--long builds the full tiny model or --base; drop "
                       "--quick"):  # fmt: skip
        default_config(quick=True, long="trailing")
    with pytest.raises(TraacError, match="--long builds the full tiny model or --base; drop "
                       "--quick"):  # fmt: skip
        default_config(quick=True, base="smollm2", long="trailing")
    with pytest.raises(TraacError, match="unknown --base 'smollm3'"):
        default_config(base="smollm3", long="trailing")
    with pytest.raises(TraacError, match="unknown --long 'sideways'"):
        default_config(long="sideways")  # type: ignore[arg-type]


def test_interruptions_are_a_setting_of_the_long_builds_alone():
    """The comparison build: the same long build but for the short teacher's interruptions."""
    plain = default_config(long="interleaved")
    interrupted = default_config(long="interleaved", interruptions=True)
    assert interrupted.name == "long-interleaved-interrupted"
    assert plain.teacher.interrupt_prob == 0.0 and interrupted.teacher.interrupt_prob == 0.15
    assert replace(interrupted, name=plain.name, teacher=plain.teacher) == plain
    assert plain.hash() == "6cc496352f02"  # the registered build, cached
    assert interrupted.hash() != plain.hash()
    with pytest.raises(TraacError, match="--interruptions is a setting of the long builds"):
        default_config(interruptions=True)


@pytest.mark.parametrize("position", ["trailing", "interleaved"])
def test_smollm2_learns_the_long_traces_as_smollm2_think_learnt_the_short(position):
    """`--base smollm2 --long POS`: the tiny long build's traces (carry on), smollm2-think's
    training, the long card with a cap that fits SmolLM2's longest trace; its own key."""
    tiny, think = default_config(long=position), default_config(base="smollm2")
    smol = default_config(base="smollm2", long=position)
    assert (smol.name, smol.base) == (f"smollm2-think-long-{position}", "smollm2")
    assert smol.teacher == tiny.teacher and smol.teacher.carry and smol.tiers == LONG_TIERS
    assert (
        replace(smol.train, micro_batch=None) == think.train and smol.measure.max_new_tokens == 1024
    )
    assert smol.train.micro_batch == 4 and smol.train.batch_size % 4 == 0
    assert replace(smol.measure, max_new_tokens=512) == tiny.measure
    assert len({smol.hash(), tiny.hash(), think.hash()}) == 3
    interrupted = default_config(base="smollm2", long=position, interruptions=True)
    assert interrupted.name == f"smollm2-think-long-{position}-interrupted"
    assert replace(interrupted, name=smol.name, teacher=smol.teacher) == smol


@pytest.mark.parametrize("micro_batch", [0, 5])
def test_micro_batch_must_divide_the_batch(micro_batch: int) -> None:
    with pytest.raises(
        TraacError, match=rf"train.micro_batch: {micro_batch} does not divide batch_size 32"
    ):
        TrainSettings(batch_size=32, micro_batch=micro_batch)
    assert TrainSettings(batch_size=32, micro_batch=4).micro_batch == 4
