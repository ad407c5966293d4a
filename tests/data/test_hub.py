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


@pytest.mark.parametrize(
    ("name", "repo", "configs", "row", "answer"),
    [
        ("aime2025", "opencompass/AIME2025", ["AIME2025-I", "AIME2025-II"],
         {"question": "Find $6 \\cdot 7$.", "answer": "42"}, "42"),
        ("math-500", "HuggingFaceH4/MATH-500", [None],
         {"problem": "Find $x$ if $2x=1$.", "solution": "$x=\\boxed{\\frac12}$", "answer":
          "\\frac{1}{2}", "subject": "Algebra", "level": 1, "unique_id": "test/algebra/1.json"},
         "\\frac{1}{2}"),
        ("gsm8k", "openai/gsm8k", ["main"],
         {"question": "Two boxes of 21?", "answer": "2*21=<<2*21=42>>42\n#### 42"}, "42"),
    ],
)  # fmt: skip
def test_standard_sets_are_named_hub_datasets(monkeypatch, name, repo, configs, row, answer):
    asked = []

    def rows(spec, repo_, config, split):
        asked.append((repo_, config, split))
        return [row]

    monkeypatch.setattr(hub, "_hub_rows", rows)
    for spec in (name, repo):  # the name and the hub id lead to the same adapter
        asked.clear()
        items = load_items(spec)
        assert asked == [(repo, config, "test") for config in configs]
        assert [i.answer for i in items] == [answer] * len(configs)
        assert {i.data_source for i in items} == {name}
