"""The mechanism table: eviction counted against the labels, pruning to a budget, re-answers."""

from __future__ import annotations

import numpy as np
import pytest

from traac.common.items import Item
from traac.common.progress import LogProgress
from traac.compression.compression import ScoredTrace
from traac.compression.segmentation import split_steps
from traac.compression.settings import CompressionSettings
from traac.evaluation.inference.generation import Generation
from traac.evaluation.reports.mechanism import (
    ATTENTION,
    POSITION,
    RANDOM,
    Response,
    _detection,
    mechanism,
    prune_to_budget,
    ratio_interval,
    truncate,
)
from traac.evaluation.reports.probe_report import ScorerSpec

# needed, recheck, needed, restate, conclude
REASONING = (
    "First, 1 + 2 = 3.\nWait, 1 + 2 = 3.\nThen 3 + 4 = 7.\nOkay, so far the total is 7.\n"
    "So the answer is 7.\n"
)
LABELS = ("needed", "recheck", "needed", "restate", "conclude")


def response(k: int = 0, tier: str = "easy") -> Response:
    item = Item(id=f"q{k}", question="1 + 2 + 4 =", answer="7", verifier="math")
    redundant = tuple(label in ("recheck", "restate") for label in LABELS)
    return Response(f"r{k}", "PROMPT ", REASONING, LABELS, redundant, item, tier, 0.6)


def trace(scores: list[float]) -> ScoredTrace:
    steps = split_steps(REASONING)
    assert len(steps) == len(scores) == 5
    return ScoredTrace(REASONING, steps, np.array(scores), 0.5, 40)


class WordTokenizer:
    """One token per character: budgets are then counted in characters."""

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict:
        return {"input_ids": [ord(c) for c in text]}

    def decode(self, ids: list[int]) -> str:
        return "".join(chr(i) for i in ids)


def test_a_response_needs_one_label_per_step() -> None:
    with pytest.raises(Exception, match="4 labels for 5 steps"):
        Response("r", "p", REASONING, LABELS[:4], (False,) * 4, response().item, "easy", 0.6)


def test_precision_and_recall_count_evicted_steps_against_the_labels() -> None:
    r = response()
    # evict the recheck (redundant) and the second needed step: precision 1/2, recall 1/2
    kept = [True, False, False, True, True]
    (row, total) = _detection("s", "paper", [r], [kept], [trace([0.0] * 5)])
    assert (row.tier, total.tier) == ("easy", "all")
    assert (row.evicted, row.redundant) == (2, 2)
    assert row.precision.value == pytest.approx(0.5)
    assert row.recall.value == pytest.approx(0.5)


def test_ratio_interval_resamples_units_and_holds_the_point_estimate() -> None:
    found = ratio_interval([1, 0, 2, 1], [2, 1, 2, 1])
    assert found.value == pytest.approx(4 / 6)
    assert found.low <= found.value <= found.high
    assert found.low >= 0.0 and found.high <= 1.0
    assert ratio_interval([0, 0], [0, 0]).value is None


def test_pruning_to_a_budget_evicts_the_lowest_scores_first_and_keeps_order() -> None:
    tok = WordTokenizer()
    steps = [s.text for s in split_steps(REASONING)]
    # lowest: the restatement (0), then the recheck (1)
    t = trace([5.0, 1.0, 4.0, 0.0, 3.0])
    budget = len(REASONING) - len(steps[3])
    assert prune_to_budget(t, budget, tok) == steps[0] + steps[1] + steps[2] + steps[4]
    assert prune_to_budget(t, budget - 1, tok) == steps[0] + steps[2] + steps[4]
    assert prune_to_budget(t, len(REASONING), tok) == REASONING


def test_truncation_keeps_the_first_budget_tokens() -> None:
    tok = WordTokenizer()
    assert truncate(REASONING, 10, tok) == REASONING[:10]
    assert truncate(REASONING, 10_000, tok) == REASONING


class NeededStepsBackend:
    """Answers 7 when the think it re-answers from still holds both needed steps, else 0."""

    max_context = None

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self.prompts: list[str] = []

    def generate(self, prompts, sampling, keys, on_tokens=None):
        self.prompts += prompts
        out = []
        for p in prompts:
            right = "First, 1 + 2 = 3." in p and "Then 3 + 4 = 7." in p
            text = f"The answer is \\boxed{{{7 if right else 0}}}."
            out.append(Generation(text, (1,), "stop"))
        return out


def test_the_budget_table_re_answers_each_cut_and_pairs_it_with_attention(
    char_tokenizer, tiny_model
) -> None:
    tok = char_tokenizer()
    model = tiny_model(vocab_size=len(tok))
    responses = [response(k, tier) for k, tier in enumerate(["easy", "easy", "hard"])]
    specs = [
        ScorerSpec.attention("all", ATTENTION),
        ScorerSpec(POSITION, CompressionSettings(scorer="random")),
        ScorerSpec(RANDOM, CompressionSettings(scorer="random")),
    ]
    backend = NeededStepsBackend(tok)
    lines: list[str] = []
    found = mechanism(model, tok, responses, backend, specs=specs, budgets=(0.4,),
                      progress=LogProgress(emit=lines.append))  # fmt: skip
    # each phase reported as it starts and ends: hours of a long build's mechanism are not silent
    phases = [line.removesuffix(" ...") for line in lines if line.endswith(" ...")]
    assert phases == [*(f"scoring: {s.name}" for s in specs), "finding the first correct steps",
                      "re-answering at 40% of the think"]  # fmt: skip
    assert len(lines) == 2 * len(phases)
    rows = {(d.scorer, d.rule, d.tier): d for d in found.detection}
    assert set(rows) == {(s.name, rule, tier) for s in specs for rule in ("paper", "equal")
                         for tier in ("easy", "hard", "all")}  # fmt: skip
    # position evicts the latest steps first: at tau 0.6, floor(5 * 0.6) = 3 of the 5 (or 6,
    # with the probe's opener) steps, the last ones: the conclusion, the restatement, ...
    position = rows[(POSITION, "equal", "all")]
    assert position.evicted == 3 * len(responses)
    assert position.redundant == 2 * len(responses)
    budget = {b.method: b for b in found.budgets}
    assert set(budget) == {"attention-pruning", "random pruning", "first-correct early exit",
                           "truncation"}  # fmt: skip
    for row in budget.values():
        assert row.think_kept <= 0.4 + 1e-9
    # 40 of the think's 100 characters, cut from its end, lose the second needed step
    assert budget["truncation"].accuracy.value == 0.0
    # the first correct step ("Then 3 + 4 = 7.") ends at character 51: cut to the budget
    assert budget["first-correct early exit"].accuracy.value == 0.0
    assert budget["attention-pruning"].against_attention is None
    diff = budget["truncation"].against_attention
    assert diff.delta == pytest.approx(-100 * budget["attention-pruning"].accuracy.value)
    assert len(backend.prompts) == 4 * len(responses)
