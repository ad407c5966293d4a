"""One registry resolves every model name, GGUF file and directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from traac.common.gguf import smollm2_file
from traac.errors import TraacError
from traac.pipelines.model_registry import MODELS, resolve_model
from traac.testbed.build import CARD

CPU_2PROC = Path(__file__).resolve().parents[2] / "recipes" / "accelerate" / "cpu_2proc.yaml"


def test_names_resolve_to_their_cached_models(quick_testbed, smollm2):
    assert resolve_model("testbed-quick") == str(quick_testbed)
    assert MODELS["testbed-quick"].cached() == quick_testbed
    assert resolve_model("smollm2") == str(smollm2)
    assert MODELS["smollm2"].cached() == smollm2


def test_a_gguf_path_is_keyed_by_content_so_the_same_file_is_one_entry(tmp_path, smollm2):
    link = tmp_path / smollm2_file().name
    link.symlink_to(smollm2_file())
    assert resolve_model(str(link)) == str(smollm2)


def test_directories_pass_through_and_missing_ones_are_named(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    assert resolve_model(str(tmp_path)) == str(tmp_path)
    with pytest.raises(TraacError, match="no such directory"):
        resolve_model(str(tmp_path / "missing" / "dir"))
    assert resolve_model("org/some-model") == "org/some-model"  # a hub id, checked on load


def test_every_name_has_a_description():
    assert set(MODELS) >= {"testbed", "testbed-quick", "smollm2"}
    assert all(m.description for m in MODELS.values())
    assert Path(smollm2_file()).suffix == ".gguf"


WORKER = """
import json, sys

import torch.distributed as dist
from accelerate import PartialState
from accelerate.utils import gather_object

from traac.pipelines.model_registry import resolve_model

state = PartialState(cpu=True)  # the launch's process group, as `traac train` starts it
paths = gather_object([resolve_model(sys.argv[1])])
if state.is_main_process:
    print("PATHS " + json.dumps(paths), flush=True)
dist.barrier()
dist.destroy_process_group()
"""


@pytest.mark.slow
def test_a_launch_builds_a_missing_named_model_once_without_deadlock(
    tmp_path: Path, free_port: Callable[[], int]
) -> None:
    """Two processes of one launch, an empty cache: the testbed's build (TRL's SFTTrainer,
    whose barriers would wait for the process blocked on the cache's lock) runs outside the
    launch's process group, and both processes get the one directory it made."""
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    cache = tmp_path / "cache"
    launch = [
        sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(CPU_2PROC),
        "--main_process_port", str(free_port()), str(script), "testbed-quick",
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TRAAC_CACHE_DIR": str(cache)}
    try:  # the build takes under a minute alone; a deadlock holds both processes for ever
        done = subprocess.run(launch, capture_output=True, text=True, timeout=420, env=env)
    except subprocess.TimeoutExpired as err:
        pytest.fail(f"the launch hung building the model; stderr: {err.stderr!s:.3000}")
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("PATHS "))
    paths = json.loads(line.removeprefix("PATHS "))
    assert len(paths) == 2 and paths[0] == paths[1]
    assert Path(paths[0]).parent.parent == cache and (Path(paths[0]) / CARD).is_file()


def test_the_built_in_names_checked_before_imports_are_the_registrys() -> None:
    """`common.model_names.BUILTIN_MODELS` refuses a misspelt name before anything is imported;
    it must list exactly the names the registry builds."""
    from traac.common.model_names import BUILTIN_MODELS

    assert set(BUILTIN_MODELS) == set(MODELS)


@pytest.mark.parametrize("position", ["trailing", "interleaved"])
def test_the_long_smollm2_names_are_their_builds(position, tmp_path, monkeypatch):
    """`--model smollm2-think-long-POS` is what `traac testbed build --base smollm2 --long POS`
    writes (its card there is what `cached` reads; nothing is built here)."""
    from traac.testbed.build import cache_path
    from traac.testbed.config import default_config

    monkeypatch.setenv("TRAAC_CACHE_DIR", str(tmp_path))
    name = f"smollm2-think-long-{position}"
    entry = cache_path(default_config(base="smollm2", long=position))
    assert entry.name.startswith(f"{name}-seed0-") and MODELS[name].cached() is None
    entry.mkdir(parents=True)
    (entry / CARD).write_text("{}")
    assert MODELS[name].cached() == entry


@pytest.mark.parametrize(("typo", "meant"), [("testbd", "testbed"), ("smolm2", "smollm2"),
                                             ("testbed_quick", "testbed-quick")])  # fmt: skip
def test_a_misspelt_built_in_name_is_not_looked_up_on_the_hub(typo: str, meant: str) -> None:
    with pytest.raises(TraacError, match=f"did you mean {meant}\\?"):
        resolve_model(typo)
    assert resolve_model("owner/model") == "owner/model"  # a hub id passes, unchanged
