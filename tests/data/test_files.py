"""Local files: layouts detected from the rows, and files that are not what they claim."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from traac.data.datasets import load_items
from traac.errors import TraacError


def write_json(path: Path, data) -> Path:
    path.write_text(json.dumps(data))
    return path


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


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
    assert (a.id, a.answer, a.verifier, a.tier, a.data_source) == (
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
