"""The optional packages a recipe uses, checked before any model loads.

A recipe can name packages the core install does not bring: a `report_to` logger, vLLM
(`use_vllm`) and DeepSpeed (`deepspeed`, or an accelerate launch config that selects it); a
quantized base's bitsandbytes is checked with what it needs here (`training.planning.lora`).
Without this check a missing one fails at trainer init, after the model has loaded (or mid-launch on
every GPU). `traac train --dry-run` and the start of a real run call `check_packages`, which
finds each package with `find_spec` (nothing heavy is imported) and names the pip line that
brings it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib.util import find_spec
from typing import Any

from transformers.integrations.integration_utils import INTEGRATION_TO_CALLBACK

from traac.errors import TraacError

GPU_EXTRA = "pip install 'traac[gpu]'"  # vLLM, DeepSpeed and tensorboard: what recipes/ uses

# report_to backend -> (modules, any of which transformers' callback accepts; the pip line).
REPORTERS: dict[str, tuple[tuple[str, ...], str]] = {
    "tensorboard": (("tensorboard", "tensorboardX"), GPU_EXTRA),
    "wandb": (("wandb",), "pip install wandb"),
    "trackio": (("trackio",), "pip install trackio"),
    "mlflow": (("mlflow",), "pip install mlflow"),
    "comet_ml": (("comet_ml",), "pip install comet-ml"),
    "clearml": (("clearml",), "pip install clearml"),
    "dvclive": (("dvclive",), "pip install dvclive"),
    "swanlab": (("swanlab",), "pip install swanlab"),
    "neptune": (("neptune",), "pip install neptune"),
    "codecarbon": (("codecarbon",), "pip install codecarbon"),
    "azure_ml": (("azureml",), "pip install azureml-core"),
    "dagshub": (("dagshub",), "pip install dagshub mlflow"),
    "flyte": (("flytekit",), "pip install flytekit flytekitplugins-deck-standard"),
}


@dataclass(frozen=True)
class Requirement:
    """A package the recipe needs: the setting that asks for it, the modules (any one will do)
    and the pip line that installs it."""

    setting: str
    modules: tuple[str, ...]
    install: str

    @property
    def installed(self) -> bool:
        return any(find_spec(m) is not None for m in self.modules)

    def message(self) -> str:
        return f"{self.setting} needs {self.modules[0]}, which is not installed: {self.install}"


def requirements(*settings: Any) -> list[Requirement]:
    """The packages `settings` (a `TRAACConfig` and the script arguments) need; an unknown
    `report_to` backend is a TraacError naming the known ones."""
    out = []
    for backend in _report_to(settings):
        if backend not in INTEGRATION_TO_CALLBACK:
            known = ", ".join(sorted(INTEGRATION_TO_CALLBACK))
            raise TraacError(f"report_to: {backend!r} is no logger transformers knows ({known})")
        if backend in REPORTERS:
            modules, install = REPORTERS[backend]
            out.append(Requirement(f"report_to {backend}", modules, install))
    if _set(settings, "use_vllm"):
        out.append(Requirement("use_vllm", ("vllm",), "pip install 'traac[vllm]'"))
    if _set(settings, "deepspeed"):
        out.append(Requirement("deepspeed", ("deepspeed",), GPU_EXTRA))
    elif os.environ.get("ACCELERATE_USE_DEEPSPEED", "").lower() == "true":
        out.append(Requirement("the accelerate config's DeepSpeed", ("deepspeed",), GPU_EXTRA))
    return out


def check_packages(*settings: Any) -> None:
    """Fail in one line naming every missing package and its pip line."""
    missing = [r.message() for r in requirements(*settings) if not r.installed]
    if missing:
        raise TraacError("; ".join(missing))


def _set(settings: tuple[Any, ...], name: str) -> bool:
    return any(getattr(s, name, None) for s in settings)


def _report_to(settings: tuple[Any, ...]) -> list[str]:
    """The loggers asked for (`TrainingArguments` has already expanded `all` and `none`)."""
    for s in settings:
        value = getattr(s, "report_to", None)
        if isinstance(value, str):
            return [] if value == "none" else [value]
        if value is not None:
            return list(value)
    return []
