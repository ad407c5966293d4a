"""One registry resolves every model name, GGUF file and directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from traac.common.gguf import smollm2_file
from traac.errors import TraacError
from traac.pipelines.models import MODELS, resolve_model


def test_names_resolve_to_their_cached_models(quick_testbed, smollm2):
    assert resolve_model("testbed-quick") == str(quick_testbed)
    assert MODELS["testbed-quick"].cached() == quick_testbed
    assert resolve_model("smollm2") == str(smollm2)
    assert MODELS["smollm2"].cached() == smollm2


def test_a_gguf_path_is_keyed_by_content_so_the_same_file_is_one_entry(tmp_path, smollm2):
    link = tmp_path / smollm2_file().name
    link.symlink_to(smollm2_file())
    assert resolve_model(str(link)) == str(smollm2)


def test_directories_pass_through_and_missing_ones_are_named(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    assert resolve_model(str(tmp_path)) == str(tmp_path)
    with pytest.raises(TraacError, match="no such directory"):
        resolve_model(str(tmp_path / "missing" / "dir"))
    assert resolve_model("org/some-model") == "org/some-model"  # a hub id, checked on load


def test_every_name_has_a_description():
    assert set(MODELS) >= {"testbed", "testbed-quick", "smollm2"}
    assert all(m.description for m in MODELS.values())
    assert Path(smollm2_file()).suffix == ".gguf"
