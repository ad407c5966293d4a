"""traac's own chain-sum generator draws reasoning-gym's `chain_sum` problems exactly: the same
problems, answers and entries for the same seeds, so the testbed (and the weights trained on it)
is what it was when reasoning-gym generated it. Checked against reasoning-gym on many seeds where
it is installed (the dev extra brings it), and against a frozen sample everywhere."""

from __future__ import annotations

import hashlib
import json
import random

import pytest

from traac.data.chain_sum import ChainSumSpace, chain_sum_entry
from traac.data.testbed_problems import EVAL_SEED, RL_SEED, draw_entries, make_items, sft_entries

# Drawn by reasoning-gym 0.1.19 (traac a401353, before traac drew them itself).
FROZEN_ENTRIES = [
    ((2, 6, 1, 4), 42, 7, "523 - 213", "310", 2, 3),
    ((3, 3, 2, 2), 0, 0, "15 - 43 - 75", "-103", 3, 2),
]
FROZEN_TESTBED = {  # (split, tier): the first two items of make_items(tier, 40, seed, split)
    ("eval", "hard"): [("testbed/hard/15932d94ff", "7 + 3 - 1 + 2 - 8", "3"),
                       ("testbed/hard/53674fb4fd", "0 + 5 + 6 - 8 + 6", "9")],
    ("rl", "medium"): [("testbed/medium/318a0a900e", "6 - 5 + 6", "7"),
                       ("testbed/medium/47d96a2013", "8 - 5 - 6", "-3")],
    ("eval", "easy"): [("testbed/easy/725c4c6896", "9 - 6", "3"),
                       ("testbed/easy/f45eb6d42c", "9 + 0", "9")],
}  # fmt: skip
# sha256 of `_testbed_sample()` as reasoning-gym generated it: 40 items of every tier of the
# evaluation and RL pools, and 300 SFT entries (ids, questions, answers, whole entries).
FROZEN_DIGEST = "26278d8057bde6adc50dc47e119d0ed8f8aca9f068ef978858d0b870c64662ba"
SEEDS = {"eval": EVAL_SEED, "rl": RL_SEED}


def _testbed_sample() -> str:
    sample: dict[str, list] = {}
    for split, seed in SEEDS.items():
        for tier in ("easy", "medium", "hard"):
            items = make_items(tier, 40, seed, split)  # type: ignore[arg-type]
            sample[f"{split}/{tier}"] = [(i.id, i.question, i.answer, i.entry) for i in items]
    sample["sft"] = sft_entries(300, 0, 2, 5, 1)
    return json.dumps(sample, sort_keys=True)


def test_a_frozen_sample_of_entries_is_drawn_again() -> None:
    for (low, high, dlow, dhigh), seed, index, expression, answer, terms, digits in FROZEN_ENTRIES:
        entry = chain_sum_entry(ChainSumSpace(low, high, dlow, dhigh), seed, index)
        assert entry == {
            "question": f"State the final answer to the following arithmetic problem: "
            f"{expression} =",
            "answer": answer,
            "metadata": {
                "source_dataset": "chain_sum", "source_index": index, "num_terms": terms,
                "num_digits": digits, "expression": expression,
                "difficulty": {"num_terms": (low, high), "num_digits": (dlow, dhigh)},
            },
        }  # fmt: skip


def test_the_testbed_draws_its_frozen_problems() -> None:
    for (split, tier), expected in FROZEN_TESTBED.items():
        items = make_items(tier, 40, SEEDS[split], split)  # type: ignore[arg-type]
        got = [(i.id, i.entry["metadata"]["expression"], i.answer) for i in items[:2]]
        assert got == expected
    assert hashlib.sha256(_testbed_sample().encode()).hexdigest() == FROZEN_DIGEST


def test_bad_ranges_are_refused() -> None:
    with pytest.raises(ValueError, match="chain_sum"):
        ChainSumSpace(3, 2, 1, 1)


def test_the_generator_is_reasoning_gyms_on_many_seeds() -> None:
    chain_sum = pytest.importorskip(
        "reasoning_gym.arithmetic.chain_sum", reason="reasoning-gym (the dev extra) not installed"
    )
    rng = random.Random(0)
    for _ in range(300):
        low, dlow = rng.randint(1, 6), rng.randint(1, 4)
        space = ChainSumSpace(low, low + rng.randint(0, 4), dlow, dlow + rng.randint(0, 3))
        seed = rng.randrange(2**32)
        theirs = chain_sum.ChainSumDataset(
            chain_sum.ChainSumConfig(
                min_terms=space.min_terms, max_terms=space.max_terms,
                min_digits=space.min_digits, max_digits=space.max_digits, seed=seed, size=1 << 30,
            )
        )  # fmt: skip
        for index in (0, 1, rng.randrange(1 << 20), rng.randrange(1 << 29)):
            assert chain_sum_entry(space, seed, index) == theirs[index]


def test_the_testbed_streams_are_reasoning_gyms() -> None:
    """The very streams the testbed draws (its seeds, its labels), item for item."""
    chain_sum = pytest.importorskip(
        "reasoning_gym.arithmetic.chain_sum", reason="reasoning-gym (the dev extra) not installed"
    )
    from traac.data.testbed_problems import _stream_seed

    for seed, label, terms in [(EVAL_SEED, "hard", 5), (RL_SEED, "easy", 2), (0, "sft", 2)]:
        high = 5 if label == "sft" else terms
        ours = draw_entries(terms, high, 1, seed, label)
        stream = _stream_seed(seed, label)
        config = chain_sum.ChainSumConfig(
            min_terms=terms, max_terms=high, min_digits=1, max_digits=1, seed=stream, size=5000
        )
        theirs = list(chain_sum.ChainSumDataset(config))
        assert [next(ours) for _ in range(5000)] == theirs
