"""Dataset specs, file layouts and the hub adapters, each on a small hand-made file."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from traac.data import datasets as ds
from traac.data.datasets import load_items, split_spec
from traac.errors import TraacError


def write_json(path: Path, data) -> Path:
    path.write_text(json.dumps(data))
    return path


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# --------------------------------------------------------------------------------------------
# Specs


def test_split_spec_reads_options():
    assert split_spec("reasoning-gym:ab?size=3&seed=7") == (
        "reasoning-gym:ab",
        {"size": "3", "seed": "7"},
    )
    assert split_spec("aime") == ("aime", {})


def test_unknown_spec_names_the_forms():
    with pytest.raises(TraacError, match="not a known name"):
        load_items("no-such-benchmark")


def test_reasoning_gym_items_carry_their_entry_and_are_reproducible():
    items = load_items("reasoning-gym:leg_counting?size=3&seed=5")
    again = load_items("reasoning-gym:leg_counting?size=3&seed=5")
    assert [i.question for i in items] == [i.question for i in again]
    assert len(items) == 3 and all(i.verifier == "task" for i in items)
    assert items[0].entry["metadata"]["source_dataset"] == "leg_counting"
    assert len({i.id for i in items}) == 3


def test_reasoning_gym_errors_are_one_line():
    with pytest.raises(TraacError, match="no such task"):
        load_items("reasoning-gym:not_a_task")
    with pytest.raises(TraacError, match="size"):
        load_items("reasoning-gym:leg_counting?size=many")


def test_otb_underthink_has_the_eleven_tasks():
    items = load_items("otb-underthink?n=1&seed=3")
    tasks = [i.entry["metadata"]["source_dataset"] for i in items]
    assert tasks == list(ds.OTB_UNDERTHINK_TASKS)
    assert {i.data_source for i in items} == {ds.OTB_UNDERTHINK}
    with pytest.raises(TraacError, match="unknown option"):
        load_items("otb-underthink?size=2")


# --------------------------------------------------------------------------------------------
# Local files: layouts detected from the rows


def test_generic_jsonl_with_choices_and_difficulty(tmp_path):
    path = write_jsonl(
        tmp_path / "mine.jsonl",
        [
            {"id": "a", "question": "1+1?", "answer": 2, "difficulty": "easy"},
            {"question": "Pick the vowel", "choices": ["b", "e", "k"], "answer": "e"},
            {"problem": "Name it", "answer": "Paris", "verifier": "text"},
        ],
    )
    a, b, c = load_items(str(path))
    assert (a.id, a.answer, a.verifier, a.difficulty, a.data_source) == (
        "a",
        "2",
        "math",
        "easy",
        "mine",
    )
    assert b.verifier == "choice" and b.answer == "B"
    assert "(A) b\n(B) e\n(C) k" in b.question
    assert c.id == "mine-2" and c.verifier == "text"


def test_json_list_and_parquet_read_alike(tmp_path):
    rows = [{"question": "2*3?", "answer": "6"}, {"question": "2*4?", "answer": "8"}]
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "set.parquet")
    from_json = load_items(str(write_json(tmp_path / "set.json", rows)))
    from_parquet = load_items(str(tmp_path / "set.parquet"))
    assert [(i.id, i.question, i.answer) for i in from_json] == [
        (i.id, i.question, i.answer) for i in from_parquet
    ]


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([{"question": "q", "answer": "1"}, {"question": "q2"}], "row 1 has no answer field"),
        ([{"question": "q", "answer": "1"}, {"answer": "2"}], "row 1 has no question field"),
        ([{"question": "q", "answer": ""}], "row 0 has no 'answer'"),
        ([{"question": "q", "answer": "z", "choices": ["a", "b"]}], "row 0: answer 'z'"),
        (
            [{"question": "q", "answer": "1"}, {"question": "q", "answer": "2", "id": "x"}] * 2,
            "twice",
        ),
        ([{"question": ["not", "text"], "answer": "1"}], "row 0: field 'question'"),
    ],
)
def test_malformed_rows_name_row_and_field(tmp_path, rows, message):
    with pytest.raises(TraacError, match=message):
        load_items(str(write_jsonl(tmp_path / "bad.jsonl", rows)))


def test_broken_files_are_one_line_errors(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q", "answer": "1"}\n{oops\n')
    with pytest.raises(TraacError, match="line 2 is not JSON"):
        load_items(str(bad))
    with pytest.raises(TraacError, match="no such file"):
        load_items(str(tmp_path / "missing.json"))
    with pytest.raises(TraacError, match="'examples' list"):
        load_items(str(write_json(tmp_path / "obj.json", {"rows": []})))


def test_underthinking_file_layout(tmp_path):
    import reasoning_gym

    entries = list(reasoning_gym.create_dataset("letter_counting", size=2, seed=1))
    rows = [{**e, "puzzle": "letter_counting", "uuid": f"u{k}"} for k, e in enumerate(entries)]
    rows[1]["metadata"] = json.dumps(rows[1]["metadata"])  # metadata may be stored as JSON text
    items = load_items(str(write_json(tmp_path / "otb_under.json", rows)))
    assert [i.id for i in items] == ["u0", "u1"]
    assert all(i.verifier == "task" for i in items)
    assert items[1].entry["metadata"]["source_dataset"] == "letter_counting"
    rows[0]["metadata"] = {"source_dataset": "no_such_task"}
    with pytest.raises(TraacError, match=r"row 0: metadata\.source_dataset 'no_such_task'"):
        load_items(str(write_json(tmp_path / "otb_bad.json", rows)))


def test_bbeh_file_layout(tmp_path):
    data = {
        "canary": "x",
        "examples": [
            {"input": "Q1", "target": "(B)"},
            {"input": "Q2", "target": "418.0"},
            {"input": "Q3", "target": "yes, no"},
        ],
    }
    items = load_items(str(write_json(tmp_path / "bbeh_mini.json", data)))
    assert [i.verifier for i in items] == ["text", "math", "text"]
    assert [i.id for i in items] == ["bbeh_mini-0", "bbeh_mini-1", "bbeh_mini-2"]
    data["examples"].append({"input": "Q4"})
    with pytest.raises(TraacError, match="row 3 has no 'target'"):
        load_items(str(write_json(tmp_path / "bbeh_bad.json", data)))


# --------------------------------------------------------------------------------------------
# Hub adapters, on rows in each hub layout


def test_aime_and_amc_adapters():
    aime = ds.adapt_aime([{"id": 60, "problem": "Find x.", "answer": "204", "url": "u"}])
    amc = ds.adapt_amc([{"id": 1, "problem": "Find y.", "answer": 142.0}])
    assert (aime[0].id, aime[0].answer) == ("aime-60", "204")
    assert (amc[0].id, amc[0].answer, amc[0].verifier) == ("amc-1", "142", "math")
    with pytest.raises(TraacError, match="row 0 has no 'problem'"):
        ds.adapt_aime([{"question": "x", "answer": "1"}])


def gpqa_row(k: int) -> dict:
    return {
        "Record ID": f"rec{k}",
        "Question": f"Which is right ({k})?",
        "Correct Answer": "right",
        "Incorrect Answer 1": "wrong 1",
        "Incorrect Answer 2": "wrong 2",
        "Incorrect Answer 3": "wrong 3",
    }


def test_gpqa_shuffles_choices_stably_and_answers_with_a_letter():
    rows = [gpqa_row(k) for k in range(12)]
    items = ds.adapt_gpqa(rows, seed=0)
    for item in items:
        assert item.verifier == "choice"
        assert f"({item.answer}) right" in item.question
    assert len({i.answer for i in items}) > 1  # the right option moves around
    reversed_items = {i.id: i for i in ds.adapt_gpqa(rows[::-1], seed=0)}
    assert all(reversed_items[i.id].question == i.question for i in items)  # order-independent
    other_seed = ds.adapt_gpqa(rows, seed=1)
    assert [i.answer for i in other_seed] != [i.answer for i in items]


def test_supergpqa_adapter_samples_per_tier():
    rows = [
        {
            "uuid": f"u{k}",
            "question": f"Q{k}",
            "options": ["a", "b", "c", "d"],
            "answer": "c",
            "answer_letter": "C",
            "difficulty": tier,
        }
        for k, tier in enumerate(["easy", "middle", "hard"] * 4)
    ]
    items = ds.adapt_supergpqa(rows)
    assert {i.difficulty for i in items} == {"easy", "medium", "hard"}
    assert all(i.answer == "C" for i in items)
    picked = ds.adapt_supergpqa(rows, per_difficulty=2, seed=0)
    assert sorted(i.difficulty for i in picked) == ["easy"] * 2 + ["hard"] * 2 + ["medium"] * 2


def test_dapo_adapter_reads_both_layouts_and_drops_duplicates(tmp_path):
    wrapped = (
        "Solve the following math problem step by step. The last line of your response should "
        "be of the form Answer: $Answer (without quotes) where $Answer is the answer to the "
        'problem.\n\nWhat is 6*7?\n\nRemember to put your answer on its own line after "Answer:".'
    )
    row = {
        "data_source": "math_dapo",
        "prompt": [{"role": "user", "content": wrapped}],
        "reward_model": {"ground_truth": "42", "style": "rule"},
        "extra_info": {"index": "abc"},
    }
    items = load_items(str(write_jsonl(tmp_path / "dapo.jsonl", [row, row])))
    assert len(items) == 1
    assert (items[0].question, items[0].answer, items[0].id) == ("What is 6*7?", "42", "dapo-abc")
    processed = ds.adapt_dapo([{"prompt": "What is 6*7?", "solution": "42"}])
    assert (processed[0].question, processed[0].answer) == ("What is 6*7?", "42")
    with pytest.raises(TraacError, match=r"row 0 has no 'reward_model\.ground_truth'"):
        ds.adapt_dapo([{**row, "reward_model": {}}])


def test_overthinking_adapter_keeps_numeric_and_four_option_mcq():
    def row(answer, meta):
        return {
            "question": "Q",
            "answer": answer,
            "subset": "overthinkingbench",
            "metadata": json.dumps(meta),
        }

    rows = [
        row("12", {"mode": "numeric"}),
        row("Paris", {"mode": "mcq", "options": ["Rome", "Paris", "Oslo", "Bern"]}),
        row("x", {"mode": "mcq", "options": ["a", "b", "x", "d", "e", "f", "g", "h"]}),  # 8 options
        row("the ozone layer", {"mode": "short"}),  # needs an LLM judge
        {"question": "Hard", "answer": "1", "subset": "underthinkingbench", "metadata": "{}"},
    ]
    items = ds.adapt_otb_hub(rows)
    assert [(i.verifier, i.answer) for i in items] == [("math", "12"), ("choice", "B")]
    assert "(B) Paris" in items[1].question
    assert {i.data_source for i in items} == {ds.OTB_OVERTHINK}


def test_bbh_adapter_keeps_the_task():
    items = ds.adapt_bbh(
        [
            {"input": "True and False is", "target": "False", "task": "boolean_expressions"},
            {"input": "3+4*2", "target": "11", "task": "multistep_arithmetic_two"},
        ]
    )
    assert [i.data_source for i in items] == [
        "bbh/boolean_expressions",
        "bbh/multistep_arithmetic_two",
    ]
    assert [i.verifier for i in items] == ["text", "math"]


def test_unreachable_hub_is_said_at_once(tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(ds, "hub_reachable", lambda timeout=3.0: False)
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
    ("name", "content", "message"),
    [
        ("bad.jsonl", b'{"question": "q\xff", "answer": "1"}\n', "not UTF-8 text (byte 15"),
        ("bad.json", b'[{"question": "q\xff", "answer": "1"}]', "not UTF-8 text (byte 16"),
        ("bad.jsonl", b'{"question": "q\\udc80", "answer": "1"}\n', "line 1: holds a lone"),
        ("bad.json", b'[{"question": "q", "answer": "\\ud800"}]', "holds a lone surrogate"),
    ],
)
def test_files_that_are_not_text_are_one_line_errors(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(TraacError, match=re.escape(message)):
        load_items(str(path))


def test_a_line_separator_inside_a_jsonl_string_does_not_split_the_line(tmp_path):
    path = tmp_path / "sep.jsonl"
    row = {"question": "a\u2028b", "answer": "1"}
    path.write_text(json.dumps(row, ensure_ascii=False) + "\n")  # U+2028 raw, not escaped
    (item,) = load_items(str(path))
    assert item.question == "a\u2028b"


def test_an_empty_spec_is_not_the_current_directory():
    for spec in ("", "  "):
        with pytest.raises(TraacError, match="dataset: empty spec"):
            load_items(spec)
