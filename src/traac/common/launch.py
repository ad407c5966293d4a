"""What a run's launch shards, known before any weight loads: the recipe's DeepSpeed or FSDP
setting, else the `accelerate launch` config's, which reaches the processes only through the
environment accelerate sets (transformers reads the same variables when it builds the run)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def zero_stage(deepspeed: Any) -> int | None:
    """The ZeRO stage of `deepspeed` (the recipe's config: a dict or a JSON file), else of the
    accelerate launch; None without DeepSpeed or where the stage is left to "auto"."""
    config = deepspeed
    if not config and _true("ACCELERATE_USE_DEEPSPEED"):
        config = os.environ.get("ACCELERATE_DEEPSPEED_CONFIG_FILE")
        if not config:
            return _stage(os.environ.get("ACCELERATE_DEEPSPEED_ZERO_STAGE"))
    if isinstance(config, (str, Path)) and Path(config).is_file():
        try:
            config = json.loads(Path(config).read_text())
        except (OSError, ValueError):
            return None  # DeepSpeed itself names an unreadable config
    if isinstance(config, dict):
        return _stage(config.get("zero_optimization", {}).get("stage"))
    return None


def fsdp_launch(fsdp: Any) -> bool:
    """Whether the run shards with FSDP: the recipe's `fsdp`, else the accelerate launch's."""
    return bool(fsdp) or _true("ACCELERATE_USE_FSDP")


def _stage(value: Any) -> int | None:
    return int(value) if str(value).isdigit() else None


def _true(name: str) -> bool:
    return os.environ.get(name, "").lower() == "true"
