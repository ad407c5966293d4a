"""`traac train --help`: traac's own fields, grouped, with the way to TRL's; `--help-all`: every
field, TRL's `GRPOConfig` and transformers' `TrainingArguments` included (over a thousand lines)."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
from typing import Any

USAGE = "traac train --config RECIPE.yaml [--field-name VALUE ...] [--dry-run]"
DESCRIPTION = (
    "TRAAC on TRL's GRPO. A recipe is a YAML mapping of field: value; every field can be given "
    "on the command line too, which wins (--field-name; underscores work as dashes). "
    "SIGINT/SIGTERM save a "
    "checkpoint; --resume-from-checkpoint auto continues it."
)
# TRL's and transformers' fields a recipe sets most, named where the short help points at them.
COMMON_TRL = (
    "learning_rate", "max_steps", "per_device_train_batch_size", "num_generations",
    "gradient_accumulation_steps", "output_dir", "bf16", "use_vllm", "report_to",
)  # fmt: skip


def _add(group: Any, f: dataclasses.Field) -> None:
    default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default  # type: ignore[misc]
    text = f.metadata.get("help", "") or ""
    group.add_argument(
        "--" + f.name.replace("_", "-"),
        metavar=f.name.upper(),
        help=f"{text} (default: {default})".replace("%", "%%"),
    )


def short_parser() -> argparse.ArgumentParser:
    """The short help as a parser (used for its help text only)."""
    from trl import GRPOConfig

    from traac.method.settings import CompressionSettings, FormatSettings
    from traac.pipelines.train import TrainScriptArguments
    from traac.training.config import TRAACConfig

    p = argparse.ArgumentParser(
        prog="traac train", usage=USAGE, description=DESCRIPTION, add_help=False,
        epilog=f"TRL's GRPOConfig and transformers' TrainingArguments fields ("
        f"{', '.join(COMMON_TRL)}, ...): `traac train --help-all` lists all "
        f"{len(dataclasses.fields(GRPOConfig))} of them.",
    )  # fmt: skip
    own = p.add_argument_group("options")
    own.add_argument("-h", "--help", action="store_true", help="this help")
    own.add_argument("--help-all", action="store_true", help="every field, TRL's included")
    own.add_argument("--config", metavar="RECIPE", help="the recipe, e.g. recipes/testbed.yaml")
    trl = {f.name for f in dataclasses.fields(GRPOConfig)}
    shared = {
        f.name for cls in (CompressionSettings, FormatSettings) for f in dataclasses.fields(cls)
    }
    script = p.add_argument_group("what to train, on which problems (TrainScriptArguments)")
    for f in dataclasses.fields(TrainScriptArguments):
        _add(script, f)
    traac = p.add_argument_group("TRAAC (TRAACConfig; docs/method.md)")
    settings = p.add_argument_group("compression and think format (as on traac eval, generate)")
    changed = p.add_argument_group("GRPO fields whose defaults follow the paper, not TRL")
    own_fields = inspect.get_annotations(TRAACConfig)
    for f in dataclasses.fields(TRAACConfig):
        if f.name in shared:
            _add(settings, f)
        elif f.name not in trl:
            _add(traac, f)
        elif f.name in own_fields:
            _add(changed, f)
    return p


def print_short_help() -> None:
    print(short_parser().format_help())


def print_full_help() -> None:
    from traac.pipelines.train import build_parser

    print(short_parser().format_help())
    print("all fields:")
    print(build_parser().format_help())
