"""The commands' shared parser: options made from the settings dataclasses, read with dashes or
underscores, never by a prefix, with one-line errors."""

from __future__ import annotations

import pytest

from traac.commands import ArgumentParser, add_compress_tau, settings_from
from traac.compression.settings import CompressionSettings, FormatSettings
from traac.errors import TraacError


def parser() -> ArgumentParser:
    p = ArgumentParser(CompressionSettings, FormatSettings, prog="traac x")
    p.set_defaults(chat_format="response-opens")  # a command's own default
    p.add_argument("--model")
    add_compress_tau(p, "tau")
    return p


def test_settings_options_make_the_settings_dataclasses() -> None:
    args = parser().parse_args(
        ["--probe-layers", "0,1", "--split_phrases", "Wait", "So", "--model", "m"]
    )
    settings, think = settings_from(args, CompressionSettings), settings_from(args, FormatSettings)
    assert (settings.probe_layers, settings.split_phrases) == ("0,1", ["Wait", "So"])
    assert (think.chat_format, args.model, args.compress_tau) == ("response-opens", "m", None)
    assert settings_from(parser().parse_args([]), CompressionSettings).probe_layers == "all"


def test_help_shows_each_settings_default_and_the_commands_own() -> None:
    text = " ".join(parser().format_help().split())  # unwrapped
    assert "--uniformity-gate" in text and "(default: 0.8)" in text
    assert "(default: response-opens)" in text


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--scorer", "entropy"], "argument --scorer: invalid choice: 'entropy'"),
        (["--compress-tau", "1.5"], "--compress-tau 1.5: must lie in [0, 1]"),
        (["--compress-tau", "nan"], "--compress-tau nan: must lie in [0, 1]"),
        (["--no-such-option"], "unknown option --no-such-option"),
        (["--probe-layer", "0"], "unknown option --probe-layer; did you mean --probe-layers?"),
        (["--uniformity_gat", "0.5"], "unknown option --uniformity_gat; did you mean"),
        (["--model"], "argument --model: expected one argument"),
    ],
)
def test_errors_are_one_line(argv: list[str], message: str) -> None:
    with pytest.raises(TraacError) as info:
        parser().parse_args(argv)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_prefix_of_an_option_is_not_taken_for_it() -> None:
    """argparse would read `--mod m` as `--model m`; a typo must not pass as another option."""
    with pytest.raises(TraacError, match="unknown option --mod; did you mean --model"):
        parser().parse_args(["--mod", "m"])


def test_underscores_read_as_dashes_and_help_shows_dashes() -> None:
    args = parser().parse_args(["--uniformity_gate", "0.5", "--compress_tau=0.3"])
    assert (args.uniformity_gate, args.compress_tau) == (0.5, 0.3)
    assert "--uniformity_gate" not in parser().format_help()
