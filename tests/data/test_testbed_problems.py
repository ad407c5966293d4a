"""Testbed problems: tiers, seeds, the three disjoint pools, and dataset specs."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traac.data.testbed_problems import (
    EVAL_SEED,
    RL_SEED,
    Chain,
    TierSettings,
    make_items,
    parse_spec,
    sft_entries,
    split_of,
)
from traac.errors import TraacError
from traac.verification import verify_item


def _terms(item) -> int:
    return item.entry["metadata"]["num_terms"]


def test_tiers_have_their_chain_lengths_and_task_entries():
    items = make_items("all", 5, seed=3)
    assert [i.tier for i in items] == ["easy"] * 5 + ["medium"] * 5 + ["hard"] * 5
    for item in items:
        assert _terms(item) == TierSettings().terms[item.tier]
        assert item.verifier == "task"
        assert item.data_source == "testbed"
        assert item.entry["metadata"]["source_dataset"] == "chain_sum"
        assert item.question == item.entry["question"]
        assert item.question.endswith(f"{item.entry['metadata']['expression']} =")
        assert item.id.startswith(f"testbed/{item.tier}/")
        chain = Chain.parse(item.entry["metadata"]["expression"])
        assert str(chain.partials()[-1]) == item.answer
        assert all(0 <= x <= 9 for x in chain.operands)


def test_same_seed_same_items_other_seed_other_items():
    a, b, c = (make_items("hard", 30, seed=s) for s in (7, 7, 8))
    assert [i.id for i in a] == [i.id for i in b]
    assert [i.question for i in a] == [i.question for i in b]
    assert len({i.id for i in a} & {i.id for i in c}) <= 1  # 1.6M hard problems: no overlap


def test_ids_are_unique_and_stable_per_problem():
    items = make_items("medium", 50, seed=1)
    assert len({i.id for i in items}) == 50
    again = {i.question: i.id for i in make_items("medium", 80, seed=2)}
    for item in items:
        if item.question in again:
            assert again[item.question] == item.id


def test_pools_never_overlap():
    tiers = ("easy", "medium", "hard")
    evaluation = {i.question for t in tiers for i in make_items(t, 200, EVAL_SEED)}
    rl = {i.question for t in tiers for i in make_items(t, 200, RL_SEED, split="rl")}
    sft = {e["question"] for e in sft_entries(3000, 0, 2, 6, 1)}
    assert not evaluation & rl
    assert not evaluation & sft
    assert not rl & sft
    assert all(split_of(e["metadata"]["expression"]) == "sft" for e in sft_entries(50, 5, 2, 6, 1))


def test_easy_pool_is_small_so_large_samples_repeat_with_suffixed_ids():
    items = make_items("easy", 120, seed=EVAL_SEED)
    distinct = {i.question for i in items}
    assert 30 <= len(distinct) < 120  # about a quarter of the 200 two-term problems
    assert len({i.id for i in items}) == 120
    assert any(i.id.endswith("-r2") for i in items)


@settings(max_examples=30, deadline=None)
@given(st.text(min_size=1, max_size=12))
def test_split_is_a_function_of_the_expression(expression):
    assert split_of(expression) == split_of(expression)
    assert split_of(expression) in ("sft", "rl", "eval")


def test_parse_spec_defaults_and_parameters():
    default = parse_spec("testbed:easy")
    assert len(default) == 200
    assert [i.id for i in default] == [i.id for i in make_items("easy", 200, EVAL_SEED)]
    seven = parse_spec("testbed:hard?n=12&seed=7")
    assert [i.id for i in seven] == [i.id for i in make_items("hard", 12, 7)]
    assert len(parse_spec("testbed?n=3")) == 9
    assert len(parse_spec("testbed:all?n=2")) == 6
    rl = parse_spec("testbed:medium?n=10&split=rl")
    assert [i.id for i in rl] == [i.id for i in make_items("medium", 10, RL_SEED, "rl")]
    assert all(split_of(i.entry["metadata"]["expression"]) == "rl" for i in rl)
    assert [i.id for i in parse_spec("testbed:medium?n=10", split="rl")] == [i.id for i in rl]


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("testbed:extreme", "tier 'extreme'"),
        ("testbed:easy?n=0", "n must be positive"),
        ("testbed:easy?n=ten", "integers"),
        ("testbed:easy?size=3", "unknown parameter 'size'"),
        ("testbed:easy?split=sft", "split must be eval or rl"),
        ("testbed:easy?n", "?n=200&seed=7"),
        ("gsm8k:easy", "starts with 'testbed'"),
    ],
)
def test_bad_specs_name_the_problem(spec, needle):
    with pytest.raises(TraacError) as err:
        parse_spec(spec)
    assert needle in str(err.value)
    assert "\n" not in str(err.value)


def test_gold_response_verifies_and_wrong_one_does_not():
    item = make_items("medium", 1, seed=4)[0]
    right = f"<think>First, ...\n</think>The answer is \\boxed{{{item.answer}}}."
    wrong = f"<think>First, ...\n</think>The answer is \\boxed{{{int(item.answer) + 1}}}."
    assert verify_item(item, right)
    assert not verify_item(item, wrong)


def test_an_n_past_any_pool_is_refused_at_once_naming_the_pool(monkeypatch):
    """`testbed:easy?n=100000000` drew for hours: the easy pool has about 50 problems. Refused
    before a single problem is drawn."""
    from traac.data import testbed_problems
    from traac.data.datasets import load_items

    def no_draws(*args, **kwargs):
        raise AssertionError("drew problems before refusing")

    monkeypatch.setattr(testbed_problems, "draw_entries", no_draws)
    message = "n=100000000 is more than 100,000 per tier; its eval pool holds about 50 distinct"
    with pytest.raises(TraacError, match=message):
        load_items("testbed:easy?n=100000000")


def test_an_exhausted_pool_stops_drawing_and_repeats():
    items = make_items("easy", 5_000)
    distinct = {i.id.split("-r")[0] for i in items}
    assert len(items) == 5_000 and 40 <= len(distinct) <= 60  # about 50, each found
    assert distinct == {i.id.split("-r")[0] for i in make_items("easy", 200)}
