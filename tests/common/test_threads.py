from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from traac.common.threads import set_threads
from traac.errors import TraacError

PROBE = "import os, sys, traac.cli; print(os.environ['OMP_WAIT_POLICY'], 'torch' in sys.modules)"


def test_the_users_count_wins() -> None:
    before = torch.get_num_threads()
    try:
        assert set_threads(2) == 2
        assert set_threads(None) == 2  # unset: left as it is
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_a_bad_count_names_the_field(bad: object) -> None:
    with pytest.raises(TraacError, match="num_threads"):
        set_threads(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(("given", "expected"), [(None, "PASSIVE"), ("active", "active")])
def test_the_command_line_waits_passively_unless_told(given: str | None, expected: str) -> None:
    """Set before torch loads (OpenMP reads it once, then), and never over the user's choice."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if given is not None:
        env["OMP_WAIT_POLICY"] = given
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == [expected, "False"]
