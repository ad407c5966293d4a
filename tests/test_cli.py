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
