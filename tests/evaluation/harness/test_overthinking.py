"""The first correct step on hand-labelled traces, checked by the items' own verifiers through
the pool: traces in the testbed's form (written for their layouts), real responses of the
testbed and of smollm2-think (SmolLM2 taught on the testbed's traces) copied from their
evaluations' samples.jsonl, and a math and a choice item; then what follows it, and
underthinking."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from traac.common.items import Item
from traac.evaluation.harness.overthinking import (
    efficiency,
    find_overthinking,
    is_recheck,
    overthink_stats,
    overthinking_by_tier,
    reasoning_of,
    underthinking,
)
from traac.evaluation.harness.results import EvalSummary
from traac.evaluation.harness.runner import SUMMARY_JSON, EvalSettings, run_eval


def chain(item_id: str, expression: str, answer: int) -> Item:
    """A testbed item: reasoning-gym chain_sum, scored by its own scorer."""
    entry = {
        "question": f"{expression} =",
        "answer": str(answer),
        "metadata": {"source_dataset": "chain_sum", "expression": expression},
    }
    return Item(item_id, entry["question"], str(answer), "task", "testbed", "easy", entry)


def answered(think: str, answer: str) -> str:
    """A response as the testbed's models write it: the think block, then the boxed answer."""
    return f"<think>{think}</think>The answer is \\boxed{{{answer}}}."


@dataclass(frozen=True)
class Record:
    id: str
    sample: int
    response: str
    correct: bool = True
    closed: bool = True
    tier: str | None = "easy"


# (item, response, first correct step, steps after it, re-checks among them)
LABELLED = [
    # The testbed: "First, 3 + 1 = 4." already states the answer.
    (
        chain("t1", "3 + 1", 4),
        "<think>First, 3 + 1 = 4.\nSo the answer is 4.\nLet me verify 3 + 1: 4.\n"
        "So the answer is 4.\n</think>The answer is \\boxed{4}.",
        0, 3, 1,
    ),
    # The testbed, medium: the last compute step reaches 11; three re-checks and two
    # conclusions follow.
    (
        chain("t2", "5 + 7 - 3 + 2", 11),
        "<think>First, 5 + 7 = 12.\nThen 12 - 3 = 9.\nThen 9 + 2 = 11.\nSo the answer is 11.\n"
        "Wait, 12 - 3 = 9.\nHmm, 5 + 7 is 12.\nThat's correct.\nSo the answer is 11.\n"
        "</think>The answer is \\boxed{11}.",
        2, 5, 3,
    ),
    # The testbed: an intermediate value equal to the answer counts (as the authors' parse of
    # each chunk counts it).
    (
        chain("t3", "6 - 2 + 3 - 3", 4),
        "<think>First, 6 - 2 = 4.\nThen 4 + 3 = 7.\nThen 7 - 3 = 4.\nSo the answer is 4.\n"
        "</think>The answer is \\boxed{4}.",
        0, 3, 0,
    ),
    # The testbed, interrupted during its re-checks (the probe's layout), answered by summary:
    # the auxiliary prompt is not the model's and not a step.
    (
        chain("t4", "8 + 5 - 4", 9),
        "<think>First, 8 + 5 = 13.\nThen 13 - 4 = 9.\nSo the answer is 9.\nBut wait, 8 + 5 is 13."
        "\nTime is up. I should stop thinking and now write a summary containing all key steps "
        "required to solve the problem.</think>8 + 5 = 13, 13 - 4 = 9. The answer is \\boxed{9}.",
        1, 2, 1,
    ),
    # Real responses, labelled by hand under traac's segmentation: a step starts at each split
    # phrase (SPLIT_PHRASES: here most lines; "Sure, ...", "Ehehe, ..." and "Fantastic." start
    # none and join the step before), and re-checks open with one of RECHECK_OPENERS.
    # The testbed (make demo's base model, held-out sample 0 of testbed/medium/0c4d3f5540):
    # "Then 1 - 2 = -1." is the first to state -1; of the 16 steps after it, 13 re-check
    # (one slips: "Wait, 6 - 9 = -3.") and 3 conclude.
    (
        chain("r1", "6 - 5 - 2", -1),
        answered(
            (
                "First, 6 - 5 = 1.\n"
                "Then 1 - 2 = -1.\n"
                "So the answer is -1.\n"
                "Looking back, 6 - 5 = 1.\n"
                "So the answer is -1.\n"
                "That seems right, it is -1.\n"
                "Wait, 6 - 9 = -3.\n"
                "Let me verify 6 - 5: 1.\n"
                "Good.\n"
                "Looking back, 1 - 2 = -1.\n"
                "Let me double-check 6 - 5 = 1.\n"
                "Let me verify 6 - 5: 1.\n"
                "Good.\n"
                "Hmm, 6 - 5 is 1.\n"
                "Let me double-check 6 - 5 = 1.\n"
                "Looking back, 6 - 5 = -1.\n"
                "Let me double-check 1 - 2 = -1.\n"
                "So the answer is -1.\n"
            ),
                "-1",
        ),
        1, 16, 13,
    ),
    # The testbed (demo base, testbed/medium/0391306d46, sample 0): 18 at step 1; 8 of the 10
    # steps after re-check.
    (
        chain("r2", "0 + 9 + 9", 18),
        answered(
            (
                "First, 0 + 9 = 9.\n"
                "Then 9 + 9 = 18.\n"
                "So the answer is 18.\n"
                "Hmm, 9 + 9 is 18.\n"
                "But wait, 0 + 9 is 9.\n"
                "But wait, 9 + 9 is 18.\n"
                "Wait, 0 + 9 = 9.\n"
                "Seems solid.\n"
                "Let me verify 9 + 9: 18.\n"
                "Hmm, 0 + 9 is 9.\n"
                "Hmm, 0 + 9 is 9.\n"
                "So the answer is 18.\n"
            ),
                "18",
        ),
        1, 10, 8,
    ),
    # The testbed under a 12-token think budget (demo base, testbed/hard/5663b25d97): it gives
    # up, is interrupted, and its summary after the block reaches 8; the block never does.
    (
        chain("r3", "1 - 2 - 6 + 6 + 9", 8),
        "<think>First, 1 - 2 = -1.\nHmm, the rest is long, so I will estimate.\nTime is up."
        " I should stop thinking and now write a summary containing all key steps required"
        " to solve the problem.</think>1 + 9 = 11, 11 - 2 = -1, -1 + 9 = 8. The answer is "
        "\\boxed{8}.",
        None, 0, 0,
    ),
    # smollm2-think (its held-out evaluation in `traac experiment compare --config
    # recipes/smollm2-think.yaml --held-out 40`, base model): testbed/easy/122c7d61fb sample 0.
    # 4 at step 0, then 5 steps: 3 re-checks (the last holds "Sure, 3 + 1 is 4.") and two
    # conclusions.
    (
        chain("s1", "3 + 1", 4),
        answered(
            (
                "First, 3 + 1 = 4.\n"
                "So the answer is 4.\n"
                "Let me verify 3 + 1: 4.\n"
                "Wait, 3 + 1 = 4.\n"
                "Let me verify 3 + 1: 4.\n"
                "Sure, 3 + 1 is 4.\n"
                "So the answer is 4.\n"
            ),
                "4",
        ),
        0, 5, 3,
    ),
    # smollm2-think, testbed/medium/42fe877eef sample 0: step 0 states 0 (beside the problem's
    # 4s), step 1 reaches 4; then 7 steps, 4 of them re-checks.
    (
        chain("s2", "4 - 4 + 4", 4),
        answered(
            (
                "First, 4 - 4 = 0.\n"
                "Then 0 + 4 = 4.\n"
                "So the answer is 4.\n"
                "I think the answer is 4.\n"
                "Wait, 4 - 4 = 0.\n"
                "Let me double-check the rest: 0 + 4 = 4.\n"
                "Wait, 4 - 4 = 0.\n"
                "Looking back, 4 - 4 = 0.\n"
                "So the answer is 4.\n"
            ),
                "4",
        ),
        1, 7, 4,
    ),
    # smollm2-think, testbed/medium/5eb13a37a0 sample 0: a negative answer at step 1.
    (
        chain("s3", "0 - 0 - 4", -4),
        answered(
            (
                "First, 0 - 0 = 0.\n"
                "Then 0 - 4 = -4.\n"
                "So the answer is -4.\n"
                "That seems right, it is -4.\n"
                "Wait, 0 - 0 = 0.\n"
                "So the answer is -4.\n"
            ),
                "-4",
        ),
        1, 4, 2,
    ),
    # smollm2-think, testbed/medium/a0008a2b4f sample 1: a re-check that slips ("8 + 6 = 14")
    # after the answer, then back to 8.
    (
        chain("s4", "0 + 2 + 6", 8),
        answered(
            (
                "First, 0 + 2 = 2.\n"
                "Then 2 + 6 = 8.\n"
                "So the answer is 8.\n"
                "Seems solid.\n"
                "Let me verify the rest: 8 + 6 = 14.\n"
                "Wait, 0 + 2 = 2.\n"
                "Hmm, 0 + 2 is 2.\n"
                "Let me verify 0 + 2: 2.\n"
                "Looking back, 2 + 6 = 8.\n"
                "Hmm, 0 + 2 is 2.\n"
                "So the answer is 8.\n"
            ),
                "8",
        ),
        1, 9, 7,
    ),
    # smollm2-think, testbed/medium/e818a070ec sample 0: 11 steps after the answer, 9 re-checks
    # ("Ehehe, ..." and "Fantastic." inside two of them) and two conclusions.
    (
        chain("s5", "9 - 4 - 2", 3),
        answered(
            (
                "First, 9 - 4 = 5.\n"
                "Then 5 - 2 = 3.\n"
                "So the answer is 3.\n"
                "Hmm, 5 - 2 is 3.\n"
                "Let me verify 5 - 2: 3.\n"
                "That's correct.\n"
                "Wait, 9 - 4 = 5.\n"
                "Wait, 5 - 2 = 3.\n"
                "Ehehe, 5 - 2 is 3.\n"
                "That's correct.\n"
                "Hmm, 5 - 2 is 3.\n"
                "Wait, 9 - 4 = 5.\n"
                "Seems solid.\n"
                "Fantastic.\n"
                "So the answer is 3.\n"
            ),
                "3",
        ),
        1, 11, 9,
    ),
    # smollm2-think, testbed/medium/ed0e712f6e sample 2: the first partial sum is the answer
    # (9 + 9 - 0), then it gives up the rest and concludes.
    (
        chain("s6", "9 + 9 - 0", 18),
        answered(
            (
                "First, 9 + 9 = 18.\n"
                "Hmm, the rest is long, so I will estimate.\n"
                "So the answer is: 18.\n"
            ),
                "18",
        ),
        0, 2, 1,
    ),
    # smollm2-think, testbed/hard/5663b25d97 sample 1: a guess that happens to be right, stated
    # in the block's last step.
    (
        chain("s7", "1 - 2 - 6 + 6 + 9", 8),
        answered(
            (
                "First, 1 - 2 = -1.\n"
                "Hmm, the rest is long, so I will estimate.\n"
                "So the answer is 8.\n"
            ),
                "8",
        ),
        2, 0, 0,
    ),
    # A math item checked by math-verify: a slip (2/8), then 2/4, which equals the gold 1/2.
    (
        Item("m1", "1/4 + 1/4?", "1/2"),
        "<think>First, 1/4 + 1/4 = \\frac{2}{8}.\nWait, \\frac{1}{4} + \\frac{1}{4} = "
        "\\frac{2}{4}.\nSo it is \\frac{1}{2}.\n</think>\\boxed{\\frac{1}{2}}",
        1, 1, 0,
    ),
    # A choice item: a step's whole text goes to the choice verifier.
    (
        Item("c1", "Which?", "C", "choice"),
        "<think>Maybe it is B. Wait, no. So the answer is C. Let me check again.</think>C",
        2, 1, 1,
    ),
]  # fmt: skip


def words(texts: list[str]) -> list[int]:
    return [len(t.split()) for t in texts]


def test_first_correct_step_on_labelled_traces() -> None:
    items = {item.id: item for item, *_ in LABELLED}
    records = [Record(item.id, 0, response) for item, response, *_ in LABELLED]
    found = find_overthinking(records, items, words)
    for o, (item, _, first, after, rechecks) in zip(found, LABELLED, strict=True):
        assert (o.id, o.first_correct, o.steps_after, o.rechecks_after) == (
            item.id, first, after, rechecks,
        )  # fmt: skip


def test_tokens_after_and_the_stats() -> None:
    item, response, *_ = LABELLED[0]
    [o] = find_overthinking([Record(item.id, 0, response)], {item.id: item}, words)
    # After "First, 3 + 1 = 4.": "So the answer is 4." (5) "Let me verify 3 + 1: 4." (7) and
    # "So the answer is 4." (5) words, of 6 + 17 in the block.
    assert (o.think_tokens, o.tokens_after) == (23, 17)
    silent = next(label for label in LABELLED if label[0].id == "r3")  # states no answer
    both = find_overthinking(
        [Record(item.id, 0, response), Record(silent[0].id, 0, silent[1])],
        {item.id: item, silent[0].id: silent[0]},
        words,
    )
    stats = overthink_stats(both, 0, 0)
    assert (stats.right, stats.found) == (2, 1)  # the silent trace is not in the means
    assert stats.tokens_after == 17 and stats.share_after == pytest.approx(100 * 17 / 23)
    assert stats.first_step == 1 and stats.rechecks_after == 1 and stats.other_after == 2
    assert stats.underthinking is None


def test_token_efficiency_and_reasoning_switches() -> None:
    item, response, *_ = LABELLED[0]
    silent = next(label for label in LABELLED if label[0].id == "r3")  # states no answer
    wrong = (
        "<think>Alternatively, 3 + 1 = 5. But wait, another way: ALTERNATIVELY 5.</think>\\boxed{5}"
    )
    records = [
        Record(item.id, 0, response),  # first correct step "First, 3 + 1 = 4." of 23 words
        Record(item.id, 1, wrong, correct=False),  # wrong: 0, whatever it says
        Record(silent[0].id, 0, silent[1]),  # right, no step states it: 0, as EvalScope scores it
    ]
    items = {item.id: item, silent[0].id: silent[0]}
    found = find_overthinking(records, items, words)
    eff, switches = efficiency(records, found)
    assert eff == pytest.approx((6 / 23 + 0 + 0) / 3)
    # alternatively (twice, case-folded), but wait, another way: 4 in the wrong response
    assert switches == pytest.approx((0 + 4 + 0) / 3)
    overall, _ = overthinking_by_tier(records, items, words)
    assert (overall.token_efficiency, overall.switches) == (eff, switches)


def test_underthinking_counts_early_stops_against_the_problems_right_median() -> None:
    six = "<think>" + "Then 1 + 1 = 2.\n" * 6 + "</think>2"
    four = "<think>" + "Then 1 + 1 = 2.\n" * 4 + "</think>2"
    two = "<think>First, 1 + 1 = 3.\nSo the answer is 3.\n</think>3"
    seven = "<think>" + "Then 1 + 1 = 3.\n" * 7 + "</think>3"
    records = [
        Record("p", 0, six), Record("p", 1, four),  # right: median 5 steps
        Record("p", 2, two, correct=False),  # 2 < 5: stopped early
        Record("p", 3, seven, correct=False),  # 7 steps: not early
        Record("p", 4, "<think>Then 1 + 1", correct=False, closed=False),  # never closed
        Record("q", 0, two, correct=False),  # no right response to q: not counted
    ]  # fmt: skip
    assert underthinking(records) == (3, 1)


def test_recheck_openers_and_the_think_block() -> None:
    assert is_recheck("Wait, 3 + 1 = 4.") and is_recheck("  Let me verify 3 + 1: 4.")
    assert not is_recheck("So the answer is 4.") and not is_recheck("Goodness")
    assert reasoning_of("<think>a</think>b") == "a"
    assert reasoning_of("a</think>b") == "a"  # the prompt opened the block
    assert reasoning_of("a</think>b</think>c") == "a"


def test_by_tier_and_a_timed_out_check_counts_as_not_found(monkeypatch) -> None:
    items = {item.id: item for item, *_ in LABELLED[:2]}
    records = [Record(item.id, 0, r, tier=tier) for (item, r, *_), tier in
               zip(LABELLED[:2], ["easy", "medium"], strict=True)]  # fmt: skip
    overall, tiers = overthinking_by_tier(records, items, words)
    assert list(tiers) == ["easy", "medium"] and overall.found == 2
    assert tiers["medium"].first_step == 3
    # A verifier that never answers in time: every check is wrong, nothing is found.
    monkeypatch.setattr(
        "traac.evaluation.harness.overthinking.verify_answers",
        lambda items, texts, **_: [False] * len(items),
    )
    assert overthinking_by_tier(records, items, words)[0].found == 0


def test_traac_eval_writes_and_reads_back_the_new_numbers(tmp_path: Path) -> None:
    dataset = tmp_path / "set.jsonl"
    rows = [{"id": f"p{k}", "question": f"{k}+{k}?", "answer": str(2 * k)} for k in range(3)]
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows))
    answers = {"p0": ["0", "0"], "p1": ["2", "5"], "p2": ["7", "7"]}
    responses = tmp_path / "responses.jsonl"
    responses.write_text(
        "".join(
            json.dumps(
                {"id": pid, "response": f"<think>So it is {a}. Wait, {a}.</think>\\boxed{{{a}}}"}
            )
            + "\n"
            for pid, row in answers.items()
            for a in row
        )
    )
    settings = EvalSettings(dataset=str(dataset), responses=str(responses))
    result = run_eval(settings, tmp_path / "run")
    s = result.summary
    assert s.sampling is not None and s.sampling.pass_at[2] == pytest.approx(200 / 3)
    assert s.sampling.maj_at[2] == pytest.approx(200 / 3)  # p1 ties 2/5: 2, given first, right
    assert s.overthinking is not None and (s.overthinking.right, s.overthinking.found) == (3, 3)
    assert s.overthinking.rechecks_after == 1 and s.overthinking.eligible_wrong == 1
    again = EvalSummary.from_json(json.loads((tmp_path / "run" / SUMMARY_JSON).read_text()))
    assert again == s
    # A summary written before these numbers existed still reads (without them).
    old = {k: v for k, v in s.to_json().items() if "sampling" not in k and "overthink" not in k}
    assert EvalSummary.from_json(old).sampling is None
    # nor those written before G-Pass@k, token efficiency and switches
    data = s.to_json()
    for key in ("g_pass_at", "mg_pass_at"):
        del data["sampling"][key]
    for key in ("token_efficiency", "switches"):
        del data["overthinking"][key]
    older = EvalSummary.from_json(data)
    assert older.sampling.mg_pass_at == {} and older.overthinking.switches is None
