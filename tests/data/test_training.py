"""Training rows in the layouts TRL's and open-r1's users have (`training_rows`), the file
layouts `traac train --dataset` reads given as a Python dataset, and a recipe's open-r1
dataset fields as spec options (`with_dataset_fields`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from datasets import Dataset

from traac.data.datasets import load_items
from traac.data.training import item_from_row, training_rows, with_dataset_fields
from traac.errors import TraacError

CHAT = [{"role": "user", "content": "What is 2 + 3?"}]


def test_open_r1_rows_get_answer_id_and_verifier() -> None:
    rows = training_rows(Dataset.from_list([{"prompt": CHAT, "solution": "$5$"}] * 2))
    assert rows["answer"] == ["$5$", "$5$"] and rows["solution"] == ["$5$", "$5$"]
    assert rows["id"] == ["0", "1"] and rows["verifier"] == ["math", "math"]
    item = item_from_row(rows[1])
    assert (item.id, item.answer, item.verifier) == ("1", "$5$", "math")


def test_rows_that_have_the_columns_keep_them() -> None:
    given = [{"prompt": "2 + 3 =", "answer": "B", "solution": "long", "id": "q7",
              "verifier": "choice"}]  # fmt: skip
    rows = training_rows(Dataset.from_list(given))
    assert rows.to_list() == given


def test_eval_datasets_may_be_a_dict_and_other_types_pass_through() -> None:
    split = training_rows({"a": Dataset.from_list([{"prompt": "x", "answer": "1"}])}, "eval")
    assert split["a"]["verifier"] == ["math"]
    assert training_rows(None) is None


@pytest.mark.parametrize(
    ("row", "says"),
    [
        ({"text": "2 + 3 =", "label": "5"}, "columns text, label; traac trains on prompt"),
        ({"prompt": "2 + 3 ="}, "and answer or solution"),
        ({"prompt": "x", "answer": "1", "verifier": "regex"}, "verifier 'regex' is not one of"),
    ],
)
def test_a_layout_traac_cannot_read_fails_in_one_line(row: dict, says: str) -> None:
    with pytest.raises(TraacError, match=says) as error:
        training_rows(Dataset.from_list([row]), "train_dataset")
    assert "\n" not in str(error.value)


OPEN_R1 = [
    {"problem": "What is 2 + 3?", "solution": "2 + 3 = 5, so $\\boxed{5}$.", "source": "amc"},
    {"problem": "What is 4 + 4?", "solution": "$\\boxed{8}$", "source": "aime"},
]


def test_a_file_layout_given_in_python_reads_as_the_command_line_reads_the_file(
    tmp_path: Path,
) -> None:
    """open-r1's raw `problem` / `solution` rows: the same items `--dataset FILE` makes, as chat
    prompts (or text, for a model without a chat template), with the rows' own columns kept
    for reward functions."""
    path = tmp_path / "open_r1.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in OPEN_R1))
    from_file = load_items(str(path))
    rows = training_rows(Dataset.from_list(OPEN_R1))
    assert rows["prompt"] == [[{"role": "user", "content": i.question}] for i in from_file]
    assert rows["answer"] == [i.answer for i in from_file] and rows["verifier"] == ["math"] * 2
    assert rows["problem"] == [r["problem"] for r in OPEN_R1] and rows["source"] == ["amc", "aime"]
    text = training_rows(Dataset.from_list(OPEN_R1), conversational=lambda: False)
    assert text["prompt"] == [i.question for i in from_file]
    item = item_from_row(rows[0])
    assert (item.answer, item.verifier) == (from_file[0].answer, "math")


def test_the_prompt_column_and_hub_options_come_from_open_r1_fields(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({"question": "unused", "statement": "1 + 1 =", "answer": "2"}))
    spec = with_dataset_fields(str(path), {"dataset_prompt_column": "statement"})
    assert [i.question for i in load_items(spec)] == ["1 + 1 ="]
    hub = with_dataset_fields("org/set?n=5", {"dataset_train_split": "train",
                                              "dataset_config": "default"})  # fmt: skip
    assert hub == "org/set?n=5&split=train&config=default"
    assert with_dataset_fields("testbed:all", {"dataset_config": None}) == "testbed:all"


@pytest.mark.parametrize(
    ("spec", "fields", "says"),
    [
        ("org/set?split=test", {"dataset_train_split": "train"}, "dataset_train_split: the "),
        ("rows.jsonl", {"dataset_prompt_column": "nope"}, "dataset_prompt_column: rows has no "),
        ("rows.jsonl", {"dataset_config": "main"}, r"a file takes no \?config"),
    ],
)
def test_open_r1_fields_that_cannot_apply_fail_in_one_line(
    spec: str, fields: dict, says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rows.jsonl").write_text(json.dumps({"problem": "1 + 1 =", "answer": "2"}))
    with pytest.raises(TraacError, match=says) as error:
        load_items(with_dataset_fields(spec, fields))
    assert "\n" not in str(error.value)
