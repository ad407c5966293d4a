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


def test_otb_adds_the_official_math_rows_where_the_cache_has_them(monkeypatch):
    over = {"question": "Q", "answer": "12", "subset": "overthinkingbench",
            "metadata": '{"mode": "numeric", "id": "o1"}'}  # fmt: skip
    under = {**over, "subset": "underthinkingbench"}  # the hub's; otb regenerates its own
    found = {
        "facebook/optimal_thinking_bench": [over, under],
        "math-ai/aime25": [{"problem": "A?", "answer": "70", "id": "0"}],
        "MathArena/hmmt_feb_2025": [{"problem": "H?", "answer": "2", "problem_idx": 1}],
        "HuggingFaceH4/MATH-500": [
            {"problem": f"M{level}?", "answer": "1", "unique_id": f"m{level}", "level": level}
            for level in (1, 2, 3, 5)
        ],
    }
    asked = []

    def rows(spec, repo, config, split):
        asked.append((repo, split))
        if repo not in found:
            raise hub.HubUnavailable(f"dataset {spec!r} needs the network or the hub cache")
        return found[repo]

    monkeypatch.setattr(hub, "_hub_rows", rows)
    items = load_items("otb?n=1")
    math = [(i.data_source, i.question) for i in items if "math" in i.data_source]
    assert math == [
        ("otb-underthink-math", "A?"), ("otb-underthink-math", "H?"),
        ("otb-overthink-math", "M1?"), ("otb-overthink-math", "M2?"),  # levels 1-2 only
    ]  # fmt: skip
    assert ("HuggingFaceH4/MATH-500", "test") in asked and ("math-ai/aime25", "test") in asked
    assert [i.data_source for i in items].count("otb-overthink") == 1
    assert [i.data_source for i in items].count("otb-underthink") == 11  # regenerated, n=1
    del found["MathArena/hmmt_feb_2025"]  # one set missing: the general rows only
    assert not [i for i in load_items("otb?n=1") if "math" in i.data_source]
