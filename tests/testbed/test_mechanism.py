"""A long build's responses for the mechanism table: what a step states as its answer."""

from __future__ import annotations

from traac.compression.first_correct import step_answer
from traac.testbed.mechanism import stated_result


def test_a_carried_step_states_its_result_not_the_chains_last_number():
    carried = "Then 4 + 5 = 9, leaving 9 + 5 - 8."
    assert step_answer(carried) == "8"  # the generic reader: the step's last number
    assert stated_result(carried) == "9"
    assert stated_result("Wait, 2 + 3 = 5.\n") == "5"
    assert stated_result("Let me restate the problem: 3 - 3 + 3.") == "3"
