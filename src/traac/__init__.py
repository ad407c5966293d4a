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
    "Compressor": "traac.compression.compression",
    "CompressionResult": "traac.compression.compression",
    "uniformity": "traac.compression.compression",
    "eviction_fraction": "traac.compression.compression",
    "CompressionSettings": "traac.compression.settings",
    "build_compressor": "traac.compression.factory",
    "AttentionScorer": "traac.compression.scoring",
    "ConfidenceScorer": "traac.compression.scoring",
    "RandomScorer": "traac.compression.scoring",
    "split_steps": "traac.compression.segmentation",
    "ChatFormat": "traac.compression.formats",
    "resolve_chat_format": "traac.compression.formats",
    # rewards and metrics
    "RewardSettings": "traac.compression.rewards",
    "LengthWindows": "traac.compression.rewards",
    "format_reward": "traac.compression.rewards",
    "length_reward": "traac.compression.rewards",
    "auc_oaa": "traac.evaluation.harness.paper_metrics",
    "oaa": "traac.evaluation.harness.paper_metrics",
    "otb_f1": "traac.evaluation.harness.paper_metrics",
    "group_stats": "traac.evaluation.harness.paper_metrics",
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
    from traac.compression.compression import (
        CompressionResult,
        Compressor,
        eviction_fraction,
        uniformity,
    )
    from traac.compression.factory import build_compressor
    from traac.compression.formats import ChatFormat, resolve_chat_format
    from traac.compression.rewards import (
        LengthWindows,
        RewardSettings,
        format_reward,
        length_reward,
    )
    from traac.compression.scoring import AttentionScorer, ConfidenceScorer, RandomScorer
    from traac.compression.segmentation import split_steps
    from traac.compression.settings import CompressionSettings
    from traac.errors import TraacError
    from traac.evaluation.harness.paper_metrics import auc_oaa, group_stats, oaa, otb_f1
    from traac.evaluation.inference.testtime import ThinkingGenerator
    from traac.pipelines.model_registry import resolve_model
    from traac.training.planning.traac_config import TRAACConfig
    from traac.training.trl_adapter.trainer import TRAACTrainer
    from traac.verification import extract_answer, verify_choice, verify_math, verify_task
