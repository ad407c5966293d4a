"""The `traac` commands: each parses its options, calls the library and prints.

What every command shares lives here: a parser (transformers' `HfArgumentParser`) whose errors
are one line (exit 2, no usage dump) and whose options are made from the library's settings
dataclasses, so a setting has one name and one validator everywhere: `--probe-layers` (or
`--probe_layers`) on a command is `probe_layers` in a recipe.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any, NoReturn, TypeVar

from transformers import HfArgumentParser

from traac.errors import TraacError
from traac.method.settings import check_tau

T = TypeVar("T")


class ArgumentParser(HfArgumentParser):
    """transformers' `HfArgumentParser` (what `traac train` parses with, through TRL's): one
    option per field of each settings dataclass given (`--field_name` and `--field-name`, the
    field's help and choices, lists and optionals), each showing its default, before the
    command's own; a command sets its own defaults with `set_defaults`. Errors are one line
    naming the problem (the CLI exits 2)."""

    def __init__(self, *settings: type, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", argparse.HelpFormatter)
        super().__init__(list(settings), **kwargs)
        names = {f.name for cls in settings for f in dataclasses.fields(cls)}
        for action in self._actions:
            if action.dest in names and action.help:
                action.help += " (default: %(default)s)"

    def error(self, message: str) -> NoReturn:
        raise TraacError(f"{message} (see `{self.prog} --help`)")


MODEL_HELP = (
    "a model name (testbed, testbed-quick, smollm2, smollm2-think), a .gguf file, a model "
    "directory, a LoRA adapter directory (traac train with use_peft) or a hub id (default: "
    "testbed)"
)


def add_device_map(parser: argparse.ArgumentParser) -> None:
    """`--device-map`, the same on every command that loads a model for inference."""
    parser.add_argument(
        "--device-map",
        "--device_map",
        dest="device_map",
        metavar="MAP",
        help="spread the model over the visible GPUs with accelerate, for a model that does not "
        "fit one: auto, balanced, balanced_low_0, sequential, or one device (cpu, cuda:1); "
        "instead of --device (on a CPU-only machine the whole model stays on the CPU)",
    )


SCORING_MODEL_HELP = (
    "the model whose attention scores the steps (default: --model itself; beyond the paper, "
    "any model: steps map to its tokenizer through character offsets)"
)


def add_scoring_model(
    parser: argparse.ArgumentParser, help_text: str = SCORING_MODEL_HELP, **options: Any
) -> None:
    """`--scoring-model`, spelled as a recipe's `scoring_model` on every command that scores."""
    parser.add_argument(
        "--scoring-model",
        "--scoring_model",
        dest="scoring_model",
        metavar="MODEL",
        help=help_text,
        **options,
    )


class _TauAction(argparse.Action):
    """Stores a tau checked as it is parsed (`check_tau`), so a command gets it valid."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        setattr(namespace, self.dest, check_tau("--compress-tau", values))


def add_compress_tau(
    parser: argparse.ArgumentParser, help_text: str, default: float | None = None
) -> None:
    """`--compress-tau`, spelled and checked alike on every command that compresses; each says
    in `help_text` what its tau does there."""
    parser.add_argument(
        "--compress-tau",
        "--compress_tau",
        dest="compress_tau",
        type=float,
        action=_TauAction,
        default=default,
        metavar="TAU",
        help=help_text,
    )


def check_test_time_scorer(scoring_model: str | None, tau: float | None, scorer: str) -> None:
    """A foreign scorer at test time scores what compression prunes with the attention probe:
    without a tau, or with another scorer, it would do nothing."""
    if scoring_model is None:
        return
    if tau is None:
        raise TraacError(
            f"--scoring-model {scoring_model}: scores the steps test-time compression prunes; "
            "add --compress-tau (the paper's test-time tau is 0.4) or drop --scoring-model"
        )
    if scorer != "attention":
        raise TraacError(
            f"--scoring-model {scoring_model}: test-time compression reads the closer's "
            "attention; use --scorer attention or drop --scoring-model"
        )


def settings_from(args: argparse.Namespace, cls: type[T]) -> T:
    """The settings dataclass from parsed options (validated by its own `__post_init__`)."""
    return cls(**{f.name: getattr(args, f.name) for f in dataclasses.fields(cls)})  # type: ignore[call-arg]


def check_count(flag: str, value: int | None) -> None:
    """An option that counts something: unset, or at least 1."""
    if value is not None and value < 1:
        raise TraacError(f"{flag} {value}: must be at least 1")
