"""Laser-D: targets chosen on schedule from the monitoring sample, the worked example, and its
state across a checkpoint."""

from __future__ import annotations

import json

import pytest

from traac.training.methods.laser_d import (
    laser_band,
    laser_length_reward,
    laser_target_lengths,
    laser_thresholds,
)


def test_laser_d_chooses_targets_on_its_schedule_and_pays_the_worked_example(
    peer, call, state
) -> None:
    """The docs' monitoring sample (K = 6, targets 100..500 step 100): high 200, medium 300,
    low 500; the bonus 0.5 x 4 / 1.5 for right answers within their band's target."""
    monitor = [
        ([80, 120, 150, 180, 260, 420], [True] * 6),
        ([150, 210, 260, 330, 380, 470], [True, True, False, True, False, False]),
        ([240, 300, 310, 390, 450, 500], [True] + [False] * 5),
    ]
    rewards = peer("laser_d", monitor_steps=2, num_generations=6)
    assert rewards.func.__name__ == "laser_d_length_reward"
    logged: dict[str, float] = {}
    lengths = [n for g, _ in monitor for n in g]
    correct = [ok for _, g in monitor for ok in g]
    # Step 0: no targets yet, so this batch is the monitoring sample.
    call(rewards, lengths, correct, trainer_state=state(0), log_metric=logged.__setitem__)
    assert logged == {"laser/target_low": 500.0, "laser/target_medium": 300.0,
                      "laser/target_high": 200.0}  # fmt: skip
    group = [90, 190, 210, 320, 350, 480]
    high, medium = [True] * 4 + [False] * 2, [True, True, False, True, False, False]
    bonus = 0.5 * 4 / 1.5
    got = call(rewards, group + group, high + medium, trainer_state=state(1))
    assert got == pytest.approx([bonus, bonus, 0, 0, 0, 0, bonus, bonus, 0, 0, 0, 0])
    # Step 2 re-chooses from steps 1 and 2 alone (the step-0 sample is gone): the only group
    # above 2/3 is step 2's, all right at 100 tokens, so high moves to 100; no group is low,
    # so low takes the largest threshold.
    short = [100, 100, 100, 100, 100, 100]
    call(rewards, short, [True] * 6, trainer_state=state(2), log_metric=logged.__setitem__)
    assert rewards.laser.chosen_at == 2
    assert logged["laser/target_high"] == 100.0 and logged["laser/target_low"] == 500.0


def test_laser_d_state_round_trips_through_json(peer, call, state) -> None:
    """A reward object restored from another's state (through JSON, as the checkpoint keeps
    it) rewards the next steps as the original does."""
    batches = [
        ([300, 300, 300, 300], [True] * 4),
        ([200, 200, 200, 200], [True] * 4),
        ([250, 250, 450, 450], [True, True, True, False]),
    ]
    original = peer("laser_d", monitor_steps=2)
    call(original, *batches[0], trainer_state=state(0))
    restored = peer("laser_d", monitor_steps=2)
    restored.load_state_dict(json.loads(json.dumps(original.state_dict())))
    for step, (lengths, correct) in enumerate(batches[1:], start=1):
        got = call(restored, lengths, correct, trainer_state=state(step))
        assert got == call(original, lengths, correct, trainer_state=state(step))
    assert restored.state_dict() == original.state_dict()


# The formulas on their own

LASER_MONITOR = [
    ([80, 120, 150, 180, 260, 420], [True] * 6),  # high (6/6)
    ([150, 210, 260, 330, 380, 470], [True, True, False, True, False, False]),  # medium (3/6)
    ([240, 300, 310, 390, 450, 500], [True] + [False] * 5),  # low (1/6)
]

LASER_GROUP = [90, 190, 210, 320, 350, 480]


def approx(values: list[float]):
    return pytest.approx(values, abs=1e-12)


def test_laser_d_worked_example():
    thresholds = laser_thresholds(100, 500, 100)
    assert thresholds == [100, 200, 300, 400, 500]
    targets = laser_target_lengths(LASER_MONITOR, thresholds)
    assert targets == {"low": 500, "medium": 300, "high": 200}
    high = [True, True, True, True, False, False]  # 4/6 >= 2/3: high, target 200
    medium = [True, True, False, True, False, False]  # 3/6: medium, target 300
    assert (laser_band(4 / 6), laser_band(3 / 6), laser_band(1 / 6)) == ("high", "medium", "low")
    assert laser_length_reward(LASER_GROUP, high, target=200) == approx([0.5, 0.5] + [0.0] * 4)
    assert laser_length_reward(LASER_GROUP, medium, target=300) == approx([0.5, 0.5] + [0.0] * 4)
    assert laser_length_reward(LASER_GROUP, [True] * 6, target=300) == approx(
        [0.5, 0.5, 0.5, 0.0, 0.0, 0.0]
    )
    # Expecting 3 right rollouts within the target: floor(4/6 x 4) = 2 at 200 falls short,
    # floor(5/6 x 4) = 3 at 300 does not.
    assert laser_target_lengths(LASER_MONITOR, thresholds, expected_correct=3)["high"] == 300
    # An unaligned range ends at its upper bound; an empty band gets the largest threshold.
    assert laser_thresholds(40, 165, 25) == [40, 65, 90, 115, 140, 165]
    assert laser_target_lengths(LASER_MONITOR[:1], thresholds)["low"] == 500
