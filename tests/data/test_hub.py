"""The hub: unreachable or offline without its cache, said at once in one line."""

from __future__ import annotations

import pytest

from traac.data import hub
from traac.data.datasets import load_items
from traac.errors import TraacError


def test_unreachable_hub_is_said_at_once(tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hub, "hub_reachable", lambda timeout=3.0: False)
    for spec in ("aime", "BBEH/bbeh", "otb"):
        with pytest.raises(TraacError, match="the hub is unreachable") as err:
            load_items(spec)
        assert "HF_HUB_OFFLINE=1" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(TraacError, match="unknown option"):
        load_items("aime?per_difficulty=3")


def test_offline_hub_without_the_cache_is_a_clear_error(tmp_path, monkeypatch):
    import datasets.config
    from huggingface_hub import constants

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "datasets")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # the cache only
    for spec in ("aime", "BBEH/bbeh", "otb"):
        with pytest.raises(TraacError, match="needs the network or the hub cache") as err:
            load_items(spec)
        assert "\n" not in str(err.value)
