"""Every recipe in recipes/ validates (`traac train --dry-run`) on the machine it names: the GPU
recipes with their GPUs faked (tests/fakes/cuda_fake.py), not through the dry run's CPU fallback,
so a field only a GPU run reads is checked here too."""

from __future__ import annotations

from collections.abc import Iterator
from importlib.util import find_spec
from pathlib import Path

import cuda_fake
import pytest

from traac.cli import main as traac
from traac.training.planning import packages

RECIPES = Path(__file__).resolve().parents[1] / "recipes"
# Each study's frozen copy of its recipe, which its runs still read (records/*/run.sh).
STUDIES = sorted((RECIPES.parent / "records").glob("*/recipe.yaml"))
# Each recipe and the GPUs its header names (0: a CPU recipe).
MACHINES = {"qwen3-4b.yaml": 8, "r1-distill-qwen-7b.yaml": 8, "smollm2-think.yaml": 0,
            "testbed.yaml": 0, "testbed-long-trailing.yaml": 0,
            "testbed-long-interleaved.yaml": 0, "smollm2-long-interleaved.yaml": 0}  # fmt: skip


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No hub, an empty cache, and vLLM found (the gpu extra's, which cannot install here)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRAAC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(
        packages, "find_spec", lambda n: find_spec("json") if n == "vllm" else find_spec(n)
    )
    yield
    cuda_fake.reset()


def test_every_recipe_has_its_machine() -> None:
    assert sorted(p.name for p in RECIPES.glob("*.yaml")) == sorted(MACHINES)


@pytest.mark.usefixtures("offline")
@pytest.mark.parametrize("recipe", sorted(MACHINES))
def test_each_recipe_validates_on_its_machine(
    recipe: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    gpus = MACHINES[recipe]
    argv = ["train", "--config", str(RECIPES / recipe), "--dry-run"]
    if gpus:
        cuda_fake.install(monkeypatch.setattr, gpus)
        argv += ["--dry_run_processes", str(gpus)]
    assert traac(argv) == 0, capsys.readouterr().err
    out = " ".join(capsys.readouterr().out.split())
    assert "dry run: recipe valid" in out
    assert "validated as on the CPU" not in out  # not the CPU fallback
    assert (f"GPU ({gpus} visible here)" if gpus else "CPU (use_cpu)") in out


@pytest.mark.usefixtures("offline")
@pytest.mark.parametrize("recipe", STUDIES, ids=lambda p: p.parent.name)
def test_each_study_recipe_validates(recipe: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A study's recipe is a copy frozen at its design; a change of spelling in the parser must
    migrate it too, or the study's next seed dies at its first command (the long studies' copies
    still spelled TRAAC's settings flat after the merge of one spelling)."""
    assert traac(["train", "--config", str(recipe), "--dry-run"]) == 0, capsys.readouterr().err
    assert "dry run: recipe valid" in " ".join(capsys.readouterr().out.split())


@pytest.mark.usefixtures("offline")
def test_one_process_seeing_eight_gpus_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """TRL refuses nn.DataParallel once the model is loaded; the dry run says so at once."""
    cuda_fake.install(monkeypatch.setattr, 8)
    assert traac(["train", "--config", str(RECIPES / "qwen3-4b.yaml"), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert "8 GPUs are visible to one training process" in err and "\n" not in err
