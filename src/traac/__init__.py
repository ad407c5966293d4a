"""traac: Think Right with Adaptive, Attentive Compression.

The public API, importable from the package itself::

    from traac import TRAACConfig, TRAACTrainer, Compressor, resolve_model

Each name is imported on first use (PEP 562), so `import traac` stays light: importing the
trainer pulls in torch, transformers and TRL (8-10 s on a 2-core CPU), which code that only
splits steps or verifies answers does not need.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from traac.common import model_names

__version__ = "0.1.0"

# Where each public name lives: name -> module. One table, read by __getattr__ and __dir__.
_EXPORTS: dict[str, str] = {
    # training
    "TRAACConfig": "traac.training.planning.traac_config",
    "TRAACTrainer": "traac.training.trl_adapter.trainer",
    # the compression module
    "Compressor": "traac.method.compression",
    "CompressionResult": "traac.method.compression",
    "uniformity": "traac.method.compression",
    "eviction_fraction": "traac.method.compression",
    "CompressionSettings": "traac.method.settings",
    "build_compressor": "traac.method.factory",
    "AttentionScorer": "traac.method.scoring",
    "ConfidenceScorer": "traac.method.scoring",
    "RandomScorer": "traac.method.scoring",
    "split_steps": "traac.method.segmentation",
    "ChatFormat": "traac.method.formats",
    "resolve_chat_format": "traac.method.formats",
    # rewards and metrics
    "RewardSettings": "traac.method.rewards",
    "LengthWindows": "traac.method.rewards",
    "format_reward": "traac.method.rewards",
    "length_reward": "traac.method.rewards",
    "auc_oaa": "traac.method.metrics",
    "oaa": "traac.method.metrics",
    "otb_f1": "traac.method.metrics",
    "group_stats": "traac.method.metrics",
    # verification
    "extract_answer": "traac.verification",
    "verify_math": "traac.verification",
    "verify_choice": "traac.verification",
    "verify_task": "traac.verification",
    # models and inference
    "resolve_model": "traac.pipelines.model_registry",
    "load_model": "traac.common.models",
    "load_tokenizer": "traac.common.models",
    "ThinkingGenerator": "traac.evaluation.inference.testtime",
    "TraacError": "traac.errors",
}

__all__ = [
    "AttentionScorer",
    "ChatFormat",
    "CompressionResult",
    "CompressionSettings",
    "Compressor",
    "ConfidenceScorer",
    "LengthWindows",
    "RandomScorer",
    "RewardSettings",
    "TRAACConfig",
    "TRAACTrainer",
    "ThinkingGenerator",
    "TraacError",
    "__version__",
    "auc_oaa",
    "build_compressor",
    "eviction_fraction",
    "extract_answer",
    "format_reward",
    "group_stats",
    "length_reward",
    "load_model",
    "load_tokenizer",
    "oaa",
    "otb_f1",
    "resolve_chat_format",
    "resolve_model",
    "split_steps",
    "uniformity",
    "verify_choice",
    "verify_math",
    "verify_task",
]


def _resolve_model(model: str) -> str:
    """`traac.pipelines.model_registry.resolve_model`, imported when a name is first resolved;
    a build or conversion on first use reports its progress on stderr every few seconds."""
    from traac.common.progress import LogProgress, to_stderr

    progress = LogProgress(interval=5.0, emit=to_stderr)
    return importlib.import_module("traac.pipelines.model_registry").resolve_model(model, progress)


model_names.install(_resolve_model)  # TRAACTrainer(model="testbed") as on the command line


def __getattr__(name: str) -> Any:
    """Import a public name's module on first access and cache the name here."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'traac' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


if TYPE_CHECKING:  # what type checkers and IDEs see; nothing is imported at run time
    from traac.common.models import load_model, load_tokenizer
    from traac.errors import TraacError
    from traac.evaluation.inference.testtime import ThinkingGenerator
    from traac.method.compression import (
        CompressionResult,
        Compressor,
        eviction_fraction,
        uniformity,
    )
    from traac.method.factory import build_compressor
    from traac.method.formats import ChatFormat, resolve_chat_format
    from traac.method.metrics import auc_oaa, group_stats, oaa, otb_f1
    from traac.method.rewards import LengthWindows, RewardSettings, format_reward, length_reward
    from traac.method.scoring import AttentionScorer, ConfidenceScorer, RandomScorer
    from traac.method.segmentation import split_steps
    from traac.method.settings import CompressionSettings
    from traac.pipelines.model_registry import resolve_model
    from traac.training.planning.traac_config import TRAACConfig
    from traac.training.trl_adapter.trainer import TRAACTrainer
    from traac.verification import extract_answer, verify_choice, verify_math, verify_task
