"""The `traac` commands: each parses its options, calls the library and prints.

What every command shares lives here: a parser whose errors are one line (exit 2, no usage
dump, "did you mean" for a mistyped option) and whose options are made from the library's
settings dataclasses, so a setting has one name and one validator everywhere: `--probe-layers`
on a command is `probe_layers` in a recipe. Every long option is shown with dashes and read with
dashes or underscores (`--num-samples` or `--num_samples`); a prefix of an option is never taken
for it (`allow_abbrev=False`). This module and the parsers import nothing heavy: a command checks
its options before it imports torch, transformers or TRL, so a mistake is named in a second.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import sys
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from traac.common.model_names import check_model_name
from traac.compression.settings import SCORER_KINDS, check_tau
from traac.errors import TraacError

T = TypeVar("T")


def dashed(arg: str) -> str:
    """`--a_b[=value]` as `--a-b[=value]`; anything else as it is."""
    if not arg.startswith("--") or arg == "--":
        return arg
    flag, sep, value = arg.partition("=")
    return flag.replace("_", "-") + sep + value


def closest(word: str, choices: Sequence[str]) -> str:
    """'; did you mean X?' for the choice `word` begins (if one) or the nearest, else ''."""
    starts = [c for c in choices if c.startswith(word)]
    if len(starts) == 1:
        return f"; did you mean {starts[0]}?"
    names = {c.lstrip("-"): c for c in choices}
    near = difflib.get_close_matches(word.lstrip("-"), list(names), n=1, cutoff=0.6)
    return f"; did you mean {names[near[0]]}?" if near else ""


def _parse_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "yes", "1", "on"):
        return True
    if value in ("false", "no", "0", "off"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not true or false")


def _field_type(hint: Any) -> tuple[Any, bool]:
    """(the element type, whether a list) of a settings field's type hint (`X | None` as X)."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    if typing.get_origin(hint) is list:
        return typing.get_args(hint)[0], True
    return hint, False


class ArgumentParser(argparse.ArgumentParser):
    """argparse with one option per field of each settings dataclass given (its help, choices,
    lists and optionals, each showing its default), before the command's own; a command sets
    its own defaults with `set_defaults`. Errors are one line naming the problem (the CLI exits
    2)."""

    def __init__(self, *settings: type, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", argparse.HelpFormatter)
        kwargs["allow_abbrev"] = False
        super().__init__(**kwargs)
        for cls in settings:
            self._add_settings(cls)

    def _add_settings(self, cls: type) -> None:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            kind, many = _field_type(hints[f.name])
            default = (
                f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
            )  # type: ignore[misc]
            options: dict[str, Any] = {
                "default": default,
                "help": f"{f.metadata.get('help', '')} (default: %(default)s)",
                "type": _parse_bool if kind is bool else kind,
            }
            if "choices" in f.metadata:
                options["choices"] = f.metadata["choices"]
            if many:
                options["nargs"] = "+"
            self.add_argument("--" + f.name.replace("_", "-"), dest=f.name, **options)

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        self._typed = {dashed(a).partition("=")[0]: a.partition("=")[0] for a in argv}
        if "--" in argv:
            at = argv.index("--")
            argv = [dashed(a) for a in argv[:at]] + argv[at:]
        else:
            argv = [dashed(a) for a in argv]
        return super().parse_known_args(argv, namespace)

    def _all_options(self) -> list[str]:
        """The option strings of this parser and of its subcommands' parsers."""
        found = list(self._option_string_actions)
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    found += list(sub._option_string_actions)
        return found

    def error(self, message: str) -> NoReturn:
        prefix = "unrecognized arguments: "
        if message.startswith(prefix):
            unknown = message[len(prefix) :].split()[0]
            flag = unknown.partition("=")[0]
            options = [o for o in self._all_options() if o.startswith("--")]
            if flag.startswith("-"):
                typed = getattr(self, "_typed", {}).get(flag, flag)
                message = f"unknown option {typed}{closest(flag, options)}"
            else:
                message = f"unexpected argument {unknown!r}"
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
    kind = SCORER_KINDS.get(scorer)
    if kind is None or not kind.attention:
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


def check_model(flag: str, name: str | None) -> None:
    """A `--model` checked by its spelling alone (`check_model_name`), before anything loads."""
    if name is not None:
        check_model_name(name, flag)


def check_input(flag: str, path: Path | None) -> None:
    """An input file that must exist, named in one line before any work."""
    if path is None:
        return
    if not path.expanduser().exists():
        raise TraacError(f"{flag} {path}: no such file")
    if path.expanduser().is_dir():
        raise TraacError(f"{flag} {path}: is a directory; pass a file")


def check_placement(device: str | None, device_map: str | None) -> None:
    """`--device` and `--device-map` together, refused before anything loads (the rest of a
    placement is checked by `traac.common.models.resolve_placement`)."""
    if device_map is not None and device not in (None, "", "auto"):
        raise TraacError(
            f"--device {device} and --device-map {device_map}: pass one (the map places the "
            "model itself)"
        )
