"""reasoning-gym is an optional extra: without it the testbed's problems are drawn and verified as
before, and a reasoning-gym dataset or task asked for is one line naming the extra (exit 2)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from traac.common import reasoning_gym_extra
from traac.data.adapters import adapt_reasoning_gym
from traac.data.datasets import load_items
from traac.errors import TraacError

ROOT = Path(__file__).resolve().parents[2]
EXTRA = "pip install 'traac[reasoning-gym]'"


@pytest.fixture
def without_reasoning_gym(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process sees no reasoning-gym (find_spec finds nothing)."""
    real = reasoning_gym_extra.find_spec
    monkeypatch.setattr(
        reasoning_gym_extra, "find_spec", lambda n: None if n == "reasoning_gym" else real(n)
    )


@pytest.mark.usefixtures("without_reasoning_gym")
def test_reasoning_gym_datasets_name_the_extra() -> None:
    for spec in ("reasoning-gym:leg_counting?size=2", "otb-underthink?n=1"):
        with pytest.raises(TraacError) as caught:
            load_items(spec)
        assert str(caught.value).endswith(EXTRA) and "\n" not in str(caught.value)
    rows = [{"question": "q", "answer": "1", "metadata": {"source_dataset": "ab"}}]
    with pytest.raises(TraacError, match=r"row 0: reasoning-gym task 'ab' needs reasoning-gym"):
        adapt_reasoning_gym(rows)
    chain = [{"question": "1 + 2 =", "answer": "3", "metadata": {"source_dataset": "chain_sum"}}]
    assert adapt_reasoning_gym(chain)[0].entry["metadata"]["source_dataset"] == "chain_sum"


# Run in a fresh interpreter whose sitecustomize hides reasoning-gym from it and from every
# interpreter it starts (the verification zygote included): `import reasoning_gym` fails and
# find_spec finds nothing, as where the extra is not installed.
HIDE = 'import sys\nsys.modules["reasoning_gym"] = None\n'
CHECK = """
import sys
from traac.data.testbed_problems import make_items
from traac.errors import TraacError
from traac.verification import verify_many, verify_task
assert "reasoning_gym" not in [m for m, v in sys.modules.items() if v is not None]
items = make_items("all", 4)
right = verify_many(items, ["</think>" + i.answer for i in items])
wrong = verify_many(items, ["</think>" + str(int(i.answer) + 1) for i in items])
print("testbed", sum(right), sum(wrong))
try:
    verify_task("</think>A", {"answer": "A", "metadata": {"source_dataset": "ab"}})
except TraacError as err:
    print("task:", err)
"""


def _hidden_env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(HIDE)
    path = os.pathsep.join([str(tmp_path / "site"), str(ROOT / "src")])
    return {**os.environ, "PYTHONPATH": path, "HF_HUB_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": "",
            "TRAAC_CACHE_DIR": str(tmp_path / "cache")}  # fmt: skip


def test_without_reasoning_gym_the_testbed_is_drawn_and_verified(tmp_path: Path) -> None:
    env = _hidden_env(tmp_path)
    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, env=env,
                          timeout=300, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "testbed 12 0"
    assert (
        lines[1] == f"task: verify_task: reasoning-gym task 'ab' needs reasoning-gym, an "
        f"optional extra: {EXTRA}"
    )


def test_without_reasoning_gym_a_dry_run_asking_for_it_exits_2(tmp_path: Path) -> None:
    env = _hidden_env(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "traac.cli", "train", "--config",
         str(ROOT / "recipes" / "testbed.yaml"), "--dataset",
         "reasoning-gym:leg_counting?size=4", "--dry-run"],
        capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert "reasoning-gym:leg_counting" in last and last.endswith(EXTRA)
