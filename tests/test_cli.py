"""The dispatcher: every command it lists imports and answers --help."""

from __future__ import annotations

import pytest

from traac.cli import COMMANDS
from traac.cli import main as cli_main


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_answers_help(command: str, capsys: pytest.CaptureFixture) -> None:
    try:
        code = cli_main([command, "--help"])
    except SystemExit as done:  # argparse's way
        code = done.code
    assert code == 0
    assert f"traac {command}" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["eval", "generate", "compress", "probe-report"])
def test_commands_that_load_a_model_share_device_map(command: str, capsys) -> None:
    """One `--device-map`, one help text, on each command that loads a model for inference;
    with --device as well it is one line, exit 2, before any input is read."""
    with pytest.raises(SystemExit):
        cli_main([command, "--help"])
    out = capsys.readouterr().out
    assert "--device-map MAP" in out and "--device_map" not in out  # read, not shown
    rest = {"eval": ["--model", "owner/model", "--dataset", "x.jsonl", "--output", "unused"]}
    argv = [command, "--device", "cpu", "--device-map", "auto"]
    assert cli_main(argv + rest.get(command, ["--input", "/nonexistent.jsonl"])) == 2
    assert "--device cpu and --device-map auto: pass one" in capsys.readouterr().err
