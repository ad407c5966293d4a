"""`.ci/run` names test files for its second pass on the GPU extra's versions; a module that
moves must take that list with it, or CI fails after the whole suite has passed."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_test_file_the_ci_script_names_exists() -> None:
    named = re.findall(r"tests/[\w/]+\.py", (ROOT / ".ci" / "run").read_text())
    assert named, "the overlay pass names no test file"
    assert [p for p in named if not (ROOT / p).is_file()] == []
