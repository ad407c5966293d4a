"""`traac eval --responses` scored the benchmarks' own ways, on hand-made files whose every figure
is computed by hand below: AUC_OAA at a t_max of its own, G-Pass@k and mG-Pass@k, and
OptimalThinkingBench's official O, U and F1. A word-level tokenizer makes tokens whitespace
words, so the think lengths are counted by eye."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from traac.cli import main
from traac.common.items import Item
from traac.data.datasets import reasoning_gym_items
from traac.evaluation.harness.otb_official import judge_input, judged, official_answer, task_credit
from traac.evaluation.harness.results import OTB_GENERAL_ONLY, OTBScore
from traac.evaluation.harness.runner import read_summary
from traac.verification import verify_many
from traac.verification.screening import task_answer_allowed


@pytest.fixture(scope="module")
def word_tokenizer(tmp_path_factory) -> Path:
    """A tokenizer whose tokens are whitespace-separated words (no special tokens added)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({"[UNK]": 0, "hmm": 1}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    path = tmp_path_factory.mktemp("words")
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]").save_pretrained(path)
    (path / "config.json").write_text('{"model_type": "gpt2"}')  # `--tokenizer` reads a model dir
    return path


def think(words: int, answer: str, closed: bool = True) -> str:
    """A response whose text before the closer is `words` words ("<think>" is one)."""
    head = "<think> " + "hmm " * (words - 1)
    return head + ("</think> " if closed else "") + f"\\boxed{{{answer}}}"


def write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def write_kept(path: Path, keep: Any) -> list[dict]:
    """Keep the rows of a JSONL file that `keep` accepts; the rows kept."""
    rows = [r for r in map(json.loads, path.read_text().splitlines()) if keep(r)]
    write(path, rows)
    return rows


def evaluate(tmp_path: Path, name: str, dataset: Path, responses: Path, *extra: str) -> int:
    argv = ["eval", "--dataset", str(dataset), "--responses", str(responses)]
    return main([*argv, "--output", str(tmp_path / name), *extra])


# OTB: two overthinking questions, one overthinking-math question, two underthinking ones and
# one underthinking-math question; two samples each: (answer given, think words, closed).
OTB_ROWS = [
    ("o1", "2", "otb-overthink"), ("o2", "3", "otb-overthink"),
    ("m1", "4", "otb-overthink-math"),
    ("u1", "5", "otb-underthink"), ("u2", "6", "otb-underthink"),
    ("n1", "7", "otb-underthink-math"),
]  # fmt: skip
OTB_SAMPLES = {
    "o1": [("2", 100, True), ("2", 300, True)],
    "o2": [("3", 200, True), ("9", 600, True)],
    "m1": [("4", 400, True), ("4", 201, False)],  # never closed: 201 + the box, all thinking
    "u1": [("5", 10, True), ("9", 10, True)],
    "u2": [("6", 10, True), ("6", 10, True)],
    "n1": [("7", 10, True), ("8", 10, True)],
}


@pytest.fixture
def otb_files(tmp_path: Path) -> tuple[Path, Path]:
    dataset = write(
        tmp_path / "otb.jsonl",
        [{"id": i, "question": f"{i}?", "answer": a, "data_source": s} for i, a, s in OTB_ROWS],
    )
    responses = write(
        tmp_path / "otb-responses.jsonl",
        [
            {"id": i, "sample": k, "response": think(words, answer, closed)}
            for i, samples in OTB_SAMPLES.items()
            for k, (answer, words, closed) in enumerate(samples)
        ],
    )
    return dataset, responses


def test_auc_oaa_is_at_its_own_t_max_whatever_the_response_budget(
    tmp_path, otb_files, word_tokenizer
):
    dataset, responses = otb_files
    tok = ["--tokenizer", str(word_tokenizer)]
    # The paper's AUC_OAA over otb-overthink's responses (right, think words):
    # o1 (1, 100), (1, 300); o2 (1, 200), (0, 600).
    at_1000 = 100 * (0.9 + 0.7 + 0.8 + 0.0) / 4
    at_10000 = 100 * (0.99 + 0.97 + 0.98 + 0.0) / 4
    assert evaluate(tmp_path, "t1000", dataset, responses, *tok, "--t-max", "1000") == 0
    summary = read_summary(tmp_path / "t1000")
    assert summary.t_max == 1000
    assert summary.by_source["otb-overthink"].auc_oaa == pytest.approx(at_1000)
    under = 100 * 3 / 4  # u1 one of two right, u2 both
    assert summary.otb.scoring == "paper" and summary.otb.underthink == pytest.approx(under)
    assert summary.otb.f1 == pytest.approx(2 * at_1000 * under / (at_1000 + under))
    assert "t_max = 1000 tokens" in (tmp_path / "t1000" / "summary.md").read_text()
    # the default is the paper's 10,000, and the response budget no longer moves it
    for budget in ("50", "5000"):
        assert evaluate(tmp_path, f"b{budget}", dataset, responses, *tok,
                        "--max-new-tokens", budget) == 0  # fmt: skip
    small, large = read_summary(tmp_path / "b50"), read_summary(tmp_path / "b5000")
    assert small.t_max == large.t_max == 10_000
    assert small.overall.auc_oaa == large.overall.auc_oaa
    assert small.by_source["otb-overthink"].auc_oaa == pytest.approx(at_10000)


def test_official_otb_scoring_by_hand(tmp_path, otb_files, word_tokenizer, capsys):
    dataset, responses = otb_files
    extra = ["--tokenizer", str(word_tokenizer), "--otb-scoring", "official"]
    assert evaluate(tmp_path, "official", dataset, responses, *extra) == 0
    assert "footing: official, with math rows" in " ".join(capsys.readouterr().out.split())
    otb = read_summary(tmp_path / "official").otb
    # Per question mean(correct) * max(0, 1000 - mean think words) / 1000:
    o1 = 1.0 * (1000 - 200) / 1000  # right twice, 100 and 300 words
    o2 = 0.5 * (1000 - 400) / 1000  # right once, 200 and 600 words
    m1 = 1.0 * (1000 - 301) / 1000  # the unclosed one is judged whole: right, 202 words
    general = (o1 + o2 + m1) / 3  # every overthinking row, math included
    o = (general + m1) / 2  # averaged with the math rows: m1 counts twice
    # no reasoning-gym task (u1, u2 here; n1, an AIME-like row, which the official code fails
    # on for want of metadata.source_dataset): each sample's verdict; n1 right once of twice
    u = ((0.5 + 1.0 + 0.5) / 3 + 0.5) / 2
    assert (otb.scoring, otb.footing) == ("official", "official, with math rows")
    assert otb.overthink == pytest.approx(100 * o) and otb.underthink == pytest.approx(100 * u)
    assert otb.f1 == pytest.approx(100 * 2 * o * u / (o + u))
    text = (tmp_path / "official" / "summary.md").read_text()
    assert "footing: official, with math rows" in text and "leaderboard" not in text
    assert f"F1 {100 * 2 * o * u / (o + u):.2f}" in text
    saved = json.loads((tmp_path / "official" / "summary.json").read_text())["otb"]
    assert saved["footing"] == "official, with math rows"


@pytest.mark.parametrize(
    ("kept", "footing"),
    [({"otb-overthink", "otb-underthink"}, "official, general rows only"),
     ({"otb-overthink", "otb-overthink-math", "otb-underthink"},
      "official, math rows in one half only")],
)  # fmt: skip
def test_official_otb_names_its_footing_without_the_math_rows(
    tmp_path, otb_files, word_tokenizer, kept, footing
):
    dataset, responses = otb_files
    ids = {r["id"] for r in write_kept(dataset, lambda r: r["data_source"] in kept)}
    write_kept(responses, lambda r: r["id"] in ids)
    extra = ["--tokenizer", str(word_tokenizer), "--otb-scoring", "official"]
    assert evaluate(tmp_path, "official", dataset, responses, *extra) == 0
    otb = read_summary(tmp_path / "official").otb
    assert otb.footing == footing
    if footing.endswith("general rows only"):
        o = ((1.0 * 0.8) + (0.5 * 0.6)) / 2  # o1 and o2 alone, each once
        assert otb.overthink == pytest.approx(100 * o)
        assert otb.underthink == pytest.approx(100 * (0.5 + 1.0) / 2)
    text = (tmp_path / "official" / "summary.md").read_text()
    assert f"footing: {footing}" in text and "not the leaderboard's footing" in text
    assert evaluate(tmp_path, "paper", dataset, responses, "--tokenizer", str(word_tokenizer)) == 0
    assert read_summary(tmp_path / "paper").otb.footing == "paper"
    assert "footing: paper" in (tmp_path / "paper" / "summary.md").read_text()


def test_t_max_and_official_scoring_need_tokens(tmp_path, otb_files, capsys):
    dataset, responses = otb_files
    assert evaluate(tmp_path, "a", dataset, responses, "--t-max", "1000") == 2
    assert evaluate(tmp_path, "b", dataset, responses, "--otb-scoring", "official") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2
    assert "--t-max 1000" in err[0] and "--tokenizer" in err[0]
    assert "--otb-scoring official" in err[1] and "--tokenizer" in err[1]
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


@pytest.mark.parametrize("scoring", ["official", "paper"])
def test_otb_scoring_on_a_set_without_both_halves_is_refused(
    scoring, tmp_path, otb_files, word_tokenizer, capsys
):
    """It exited 0 and nothing said the option had changed nothing (issue 72, kind 5); the
    paper's scoring, the default, is refused too when asked for by name."""
    dataset, responses = otb_files
    rows = [json.loads(line) for line in dataset.read_text().splitlines()]
    over = [r for r in rows if not r["data_source"].startswith("otb-underthink")]  # math too
    over = write(tmp_path / "over.jsonl", over)
    tok = ["--tokenizer", str(word_tokenizer)]
    assert evaluate(tmp_path, "o", over, responses, *tok, "--otb-scoring", scoring) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--otb-scoring {scoring}: no effect on" in err[0], err
    assert "otb-underthink" in err[0] and "drop it" in err[0]
    assert not (tmp_path / "o" / "run.json").exists()
    # with both halves, after `--limit` kept only the first: the same
    assert evaluate(tmp_path, "l", dataset, responses, *tok, "--otb-scoring", scoring,
                    "--limit", "2") == 2  # fmt: skip
    assert "no effect" in capsys.readouterr().err
    assert evaluate(tmp_path, "w", dataset, responses, *tok, "--otb-scoring", scoring) == 0


def test_g_pass_at_k_through_traac_eval(tmp_path):
    gold = {"a": "1", "b": "2"}
    rows = [{"id": i, "question": f"{i}?", "answer": a} for i, a in gold.items()]
    dataset = write(tmp_path / "set.jsonl", rows)
    right = {"a": [True, False, True, False], "b": [True, True, False, True]}  # c = 2 and 3
    responses = write(
        tmp_path / "r.jsonl",
        [
            {"id": i, "sample": k, "response": think(3, gold[i] if ok else "7")}
            for i, row in right.items()
            for k, ok in enumerate(row)
        ],
    )
    assert evaluate(tmp_path, "run", dataset, responses) == 0
    s = read_summary(tmp_path / "run").sampling
    # k = 4 of n = 4: every draw holds all c right. G-Pass@4_tau = [c >= max(ceil(4 tau), 1)].
    assert s.g_pass_at[4] == pytest.approx({0.0: 100, 0.25: 100, 0.5: 100, 0.75: 50, 1.0: 0})
    # mG-Pass@4 = (2/4) * ([c >= 3] + [c >= 4]): a 0, b 0.5.
    assert s.mg_pass_at[4] == pytest.approx(100 * (0 + 0.5) / 2)
    # k = 2: P(both right) = C(c, 2) / C(4, 2): a 1/6, b 3/6; at least one = pass@2.
    both = (1 / 6 + 3 / 6) / 2
    assert s.g_pass_at[2][0.75] == pytest.approx(100 * both)
    assert s.g_pass_at[2][1.0] == pytest.approx(100 * both)
    assert s.g_pass_at[2][0.5] == pytest.approx(s.pass_at[2])
    assert s.mg_pass_at[2] == pytest.approx(100 * both)  # (2/2) * P(both), i = 2 only
    assert s.mg_pass_at[1] == 0  # lighteval's empty sum
    table = (tmp_path / "run" / "summary.md").read_text()
    assert "G-Pass@k τ=0.75" in table and "mG-Pass@k" in table


def test_official_underthinking_credit_is_partial_and_reads_the_first_box():
    [item] = reasoning_gym_items("letter_counting", size=1, seed=0)
    gold = item.answer
    # reasoning-gym's default scorer: an answer holding the oracle scores len(gold) / len(it)
    assert task_credit(f"<think>ok</think> \\boxed{{{gold * 2}}}", item) == pytest.approx(0.5)
    assert task_credit(f"<think>\\boxed{{x{gold}}}</think> \\boxed{{{gold}}}", item) == (
        pytest.approx(len(gold) / (len(gold) + 1))  # the first box, inside the think block
    )
    assert task_credit(f"no box {gold}", item) == pytest.approx(len(gold) / len(f"no box {gold}"))
    assert official_answer("\\boxed{a}b} \\boxed{c}", "x") == "a"
    assert official_answer("\\boxed{A # B x}", "ab") == "A # B "  # others blanked, runs halved


def test_official_underthinking_answers_are_unescaped_twice():
    [item] = reasoning_gym_items("tsumego", size=1, seed=0)
    response = f"\\boxed{{{item.answer}\\\\ }}"  # the box holds the move, two backslashes, a blank
    assert official_answer(response, "tsumego") == f"{item.answer} "
    assert task_credit(response, item) == 1.0  # once unescaped it kept a backslash: 0.75


def test_refused_underthinking_answers_score_the_scorers_floor_unrun():
    [item] = reasoning_gym_items("puzzle24", size=1, seed=0, min_value=8, max_value=10)
    equation, text = "(10-8)*8+8=24", "I cannot find one."
    meta = item.entry["metadata"]
    assert not task_answer_allowed("puzzle24", equation, meta)  # never reaches sympy
    assert not task_answer_allowed("puzzle24", text, meta)
    # reasoning-gym's puzzle24 scorer gives 0.01 to what it cannot read (traac once gave 0)
    assert task_credit(f"<think>ok</think> \\boxed{{{equation}}}", item) == pytest.approx(0.01)
    assert task_credit(text, item) == pytest.approx(0.01)  # no box: the whole response
    assert task_credit(f"\\boxed{{{item.answer}}}", item) == 1.0


def test_the_official_judge_is_shown_one_box_of_the_tail():
    item = Item(id="q", question="Pick (A)-(D)", answer="B", verifier="choice")
    hedge = "<think>hmm</think> \\boxed{B}, or maybe \\boxed{C}"
    assert judge_input(hedge, "</think>") == ("B", True)
    assert judged([item], [hedge], "</think>") == [True]
    assert verify_many([item], [hedge]) == [False]  # traac's own scoring reads both boxes
    # the first box of the last 2,000 characters after the first closer, up to the next closer
    early = "<think>x</think> \\boxed{B} " + "y" * 2000 + " \\boxed{C}"
    second = "<think>x</think> \\boxed{C}</think> \\boxed{B}"
    unclosed = "<think> " + "z" * 3000 + " \\boxed{B}"
    assert [judge_input(r, "</think>")[0] for r in (early, second, unclosed)] == ["C", "C", "B"]
    assert judged([item] * 3, [early, second, unclosed], "</think>") == [False, False, True]
    assert judge_input("<think>x</think> The answer is B.", "</think>") == (
        " The answer is B.",
        False,
    )


def test_summaries_written_before_the_footing_say_what_is_known():
    old = {"overthink": 50.0, "underthink": 40.0, "f1": 44.44}
    assert OTBScore.from_json(old).footing == "paper"
    official = OTBScore.from_json({**old, "scoring": "official"})
    assert official.footing == "official, rows unrecorded"
    assert "leaderboard" not in official.sentence(1000, "tokens")  # not known to be off it
    assert "not the leaderboard's" in replace(official, footing=OTB_GENERAL_ONLY).sentence(1, "t")
