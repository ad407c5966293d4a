"""The hub adapters, on rows in each hub layout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from traac.data import adapters
from traac.data.datasets import load_items, reasoning_gym_items
from traac.errors import TraacError
from traac.verification import verify_item


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_aime_and_amc_adapters():
    aime = adapters.adapt_aime([{"id": 60, "problem": "Find x.", "answer": "204", "url": "u"}])
    amc = adapters.adapt_amc([{"id": 1, "problem": "Find y.", "answer": 142.0}])
    assert (aime[0].id, aime[0].answer) == ("aime-60", "204")
    assert (amc[0].id, amc[0].answer, amc[0].verifier) == ("amc-1", "142", "math")
    with pytest.raises(TraacError, match="row 0 has no 'problem'"):
        adapters.adapt_aime([{"question": "x", "answer": "1"}])


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
    items = adapters.adapt_gpqa(rows, seed=0)
    for item in items:
        assert item.verifier == "choice"
        assert f"({item.answer}) right" in item.question
    assert len({i.answer for i in items}) > 1  # the right option moves around
    reversed_items = {i.id: i for i in adapters.adapt_gpqa(rows[::-1], seed=0)}
    assert all(reversed_items[i.id].question == i.question for i in items)  # order-independent
    other_seed = adapters.adapt_gpqa(rows, seed=1)
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
    items = adapters.adapt_supergpqa(rows)
    assert {i.tier for i in items} == {"easy", "medium", "hard"}
    assert all(i.answer == "C" for i in items)
    picked = adapters.adapt_supergpqa(rows, per_difficulty=2, seed=0)
    assert sorted(i.tier for i in picked) == ["easy"] * 2 + ["hard"] * 2 + ["medium"] * 2


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
    processed = adapters.adapt_dapo([{"prompt": "What is 6*7?", "solution": "42"}])
    assert (processed[0].question, processed[0].answer) == ("What is 6*7?", "42")
    with pytest.raises(TraacError, match=r"row 0 has no 'reward_model\.ground_truth'"):
        adapters.adapt_dapo([{**row, "reward_model": {}}])


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
        {"question": "Odd", "answer": "1", "subset": "other", "metadata": "{}"},  # no half
    ]
    items = adapters.adapt_otb_hub(rows)
    assert [(i.verifier, i.answer) for i in items] == [("math", "12"), ("choice", "B")]
    assert "(B) Paris" in items[1].question
    assert {i.data_source for i in items} == {adapters.OTB_OVERTHINK}


def test_official_prepared_otb_file_keeps_every_half_and_its_math_rows(tmp_path):
    # the layout of the official prepare.py's otb_full, saved as a file
    [entry] = [i.entry for i in reasoning_gym_items("letter_counting", size=1, seed=0)]
    rows = [
        {"question": "Q", "answer": "12", "subset": "overthinkingbench",
         "metadata": json.dumps({"mode": "numeric", "id": "o1"})},
        {"question": entry["question"], "answer": entry["answer"], "subset": "underthinkingbench",
         "metadata": json.dumps(entry["metadata"])},
        {"question": "1+1?", "answer": "\\frac{4}{2}", "subset": "overthinking-math",
         "metadata": json.dumps({"source": "math-500", "id": "test/algebra/1.json"})},
        {"question": "AIME 1", "answer": "70", "subset": "underthinking-math",
         "metadata": json.dumps({"source": "aime", "id": 0})},
        {"question": "HMMT 1", "answer": "\\sqrt{2}", "subset": "underthinking-math",
         "metadata": json.dumps({"source": "hmmt", "id": 1, "problem_type": ["Algebra"]})},
    ]  # fmt: skip
    items = load_items(str(write_jsonl(tmp_path / "otb_full.jsonl", rows)))
    got = {(i.data_source, i.id, i.verifier, i.answer) for i in items}
    assert got == {
        ("otb-overthink", "o1", "math", "12"),
        ("otb-underthink", "otb-underthink-letter_counting-0", "task", entry["answer"]),
        ("otb-overthink-math", "otb-overthink-math-math-500-test/algebra/1.json", "math",
         "\\frac{4}{2}"),
        ("otb-underthink-math", "otb-underthink-math-aime-0", "math", "70"),
        ("otb-underthink-math", "otb-underthink-math-hmmt-1", "math", "\\sqrt{2}"),
    }  # fmt: skip
    with pytest.raises(TraacError, match="otb-underthink-math: row 0 has no 'answer'"):
        adapters.adapt_otb_hub([{**rows[3], "answer": ""}])


def test_bbh_adapter_keeps_the_task():
    items = adapters.adapt_bbh(
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


# The standard sets beside the paper's, in each hub's row layout (rows written here).
AIME2025_ROWS = [
    {"question": "Find the remainder when $2^{10}$ is divided by $1000$.", "answer": "24"},
    {"question": "How many positive divisors does $360$ have?", "answer": "24"},
]
MATH500_ROW = {
    "problem": "Compute $\\frac{7}{3} + \\frac{7}{3}$.",
    "solution": "Adding, $\\frac{7}{3} + \\frac{7}{3} = \\boxed{\\frac{14}{3}}$.",
    "answer": "\\frac{14}{3}",
    "subject": "Prealgebra",
    "level": 2,
    "unique_id": "test/prealgebra/17.json",
}
GSM8K_ROW = {
    "question": "A farm sells 1,200 eggs on Monday and 300 more on Tuesday. How many in all?",
    "answer": "Tuesday: 1200+300=<<1200+300=1500>>1500.\nIn all: 1200+1500=<<1200+1500=2700>>2700."
    "\n#### 2,700",
}


def test_aime2025_adapter_names_the_exam_and_checks_with_math_verify():
    rows = [{**r, "task": exam} for exam in ("AIME2025-I", "AIME2025-II") for r in AIME2025_ROWS]
    items = adapters.adapt_aime2025(rows)
    assert [i.id for i in items] == [
        "aime2025-I-1", "aime2025-I-2", "aime2025-II-1", "aime2025-II-2",
    ]  # fmt: skip
    assert verify_item(items[0], "<think>1024</think> The answer is $\\boxed{24}$.")
    assert not verify_item(items[0], "<think>1024</think> $\\boxed{1024}$")
    with pytest.raises(TraacError, match="row 0 has no 'question'"):
        adapters.adapt_aime2025([{"problem": "x", "answer": "1"}])


def test_math500_adapter_takes_the_short_answer_not_the_solution():
    (item,) = adapters.adapt_math500([MATH500_ROW])
    assert (item.id, item.answer, item.verifier) == (
        "test/prealgebra/17.json",
        "\\frac{14}{3}",
        "math",
    )
    assert verify_item(item, "<think>7/3 twice</think> $\\boxed{\\dfrac{14}{3}}$")
    assert not verify_item(item, "<think>7/3 twice</think> $\\boxed{\\frac{7}{3}}$")


def test_gsm8k_adapter_reads_the_answer_after_the_marks():
    (item,) = adapters.adapt_gsm8k([GSM8K_ROW])
    assert (item.id, item.answer) == ("gsm8k-0", "2700")
    assert verify_item(item, "<think>1200+1500</think> The answer is $\\boxed{2700}$.")
    assert not verify_item(item, "<think>1200+300</think> $\\boxed{1500}$")
    with pytest.raises(TraacError, match="row 0: field 'answer' has no final '#### N' line"):
        adapters.adapt_gsm8k([{"question": "q", "answer": "2700"}])


def test_standard_sets_saved_to_disk_are_detected(tmp_path):
    (math500,) = load_items(str(write_jsonl(tmp_path / "math500.jsonl", [MATH500_ROW])))
    (gsm8k,) = load_items(str(write_jsonl(tmp_path / "gsm8k.jsonl", [GSM8K_ROW])))
    assert (math500.id, math500.answer) == ("test/prealgebra/17.json", "\\frac{14}{3}")
    assert (gsm8k.id, gsm8k.answer) == ("gsm8k-0", "2700")
