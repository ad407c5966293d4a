"""Training rows in the layouts TRL's and open-r1's users have (`training_rows`)."""

from __future__ import annotations

import pytest
from datasets import Dataset

from traac.data.training import item_from_row, training_rows
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
        ({"question": "2 + 3 =", "gold": "5"}, "columns question, gold; traac trains on prompt"),
        ({"prompt": "2 + 3 ="}, "and answer or solution"),
        ({"prompt": "x", "answer": "1", "verifier": "regex"}, "verifier 'regex' is not one of"),
    ],
)
def test_a_layout_traac_cannot_read_fails_in_one_line(row: dict, says: str) -> None:
    with pytest.raises(TraacError, match=says) as error:
        training_rows(Dataset.from_list([row]), "train_dataset")
    assert "\n" not in str(error.value)
