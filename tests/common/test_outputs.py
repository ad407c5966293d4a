"""Output paths are proven writable by writing, and leave nothing behind when they are."""

from __future__ import annotations

from pathlib import Path

import pytest

from traac.common.outputs import output_dir, output_file, write_text
from traac.errors import TraacError


def test_an_output_directory_is_created_and_left_clean(tmp_path):
    made = output_dir(tmp_path / "a" / "b")
    assert made.is_dir() and list(made.iterdir()) == []


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("file", "is a file, not a directory"),
        ("/proc/traac-out", "cannot write there"),  # root passes permission checks, not this
        ("file/below", "cannot write there"),
    ],
)
def test_an_unwritable_directory_is_one_line(tmp_path, where, message):
    (tmp_path / "file").write_text("kept")
    path = Path(where) if where.startswith("/") else tmp_path / where
    with pytest.raises(TraacError, match=r"^--output .*: " + message):
        output_dir(path)
    assert (tmp_path / "file").read_text() == "kept"


def test_an_output_file_is_probed_without_changing_anything(tmp_path):
    existing = tmp_path / "old.json"
    existing.write_text("kept")
    output_file(existing, "--json")
    output_file(tmp_path / "new.json", "--json")
    assert existing.read_text() == "kept" and not (tmp_path / "new.json").exists()
    with pytest.raises(TraacError, match=r"--json /proc/x\.json: cannot write it"):
        output_file(Path("/proc/x.json"), "--json")
    with pytest.raises(TraacError, match="is a directory"):
        output_file(tmp_path, "--json")


def test_a_failed_write_is_one_line(tmp_path):
    with pytest.raises(TraacError, match=r"--html /proc/x\.html: cannot write it"):
        write_text(Path("/proc/x.html"), "<p>", "--html")
