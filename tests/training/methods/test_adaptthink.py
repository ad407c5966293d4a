"""AdaptThink: its prefill (the empty think block of the NoThinking branch) and its bonus."""

from __future__ import annotations

import pytest
from char_tokenizer import CharTokenizer, char_ids

from traac.compression.formats import ChatFormat
from traac.errors import TraacError
from traac.training.methods.base import Prefill, RunContext, prefill_of
from traac.training.methods.registry import METHODS, parse_settings


def test_half_of_each_group_is_generated_and_trained_after_an_empty_think_block(peer) -> None:
    rewards = peer("adaptthink")
    rewards.bind(CharTokenizer(), ChatFormat())
    prefill = prefill_of(rewards, CharTokenizer())
    assert prefill == Prefill(tuple(char_ids("<think></think>")), 0.5)
    assert prefill.rows(8, 4) == [True, True, False, False] * 2
    prompts = [[1], [1], [1], [1], [2], [2], [2], [2]]
    made = prefill.prompts(prompts, 4)
    assert made[0] == [1, *char_ids("<think></think>")] and made[2] == [1] and made[5][0] == 2
    assert prompts[0] == [1]  # the caller's lists are left as they were
    out, lps = prefill.completions([[7]] * 8, [[-0.5]] * 8, 4)
    assert out[0] == [*char_ids("<think></think>"), 7] and out[3] == [7]
    assert lps[1] == [0.0] * 15 + [-0.5] and lps[2] == [-0.5]
    # A share of 0.25 of 8 prefills the first two; other methods prefill nothing.
    assert Prefill((9,), 0.25).rows(8, 8) == [True, True] + [False] * 6
    assert prefill_of(peer("alp"), CharTokenizer()) is None


def test_a_rollout_with_an_empty_think_block_earns_delta(peer, call_texts) -> None:
    """delta 0.05 x 4 (a right answer is worth 4 here) = 0.2, whether it was prefilled or the
    policy closed the block at once; a rollout that thinks, right or wrong, earns nothing."""
    texts = [
        "<think></think>\\boxed{4}",
        " <think></think>\\boxed{5}",
        "<think>So 4.</think>\\boxed{4}",
        "<think> </think>\\boxed{4}",
    ]
    rewards = peer("adaptthink", bonus=0.05)
    assert rewards.func.__name__ == "adaptthink_reward" and rewards.scale == 4.0
    out = call_texts(rewards, texts, [True, False, True, True])
    assert out == pytest.approx([0.2, 0.2, 0.0, 0.0])
    # With the opener in the prompt, the empty block is the closer alone.
    opener_in_prompt = ChatFormat(opener_in_prompt=True)
    out = call_texts(rewards, ["</think>4", "So 4.</think>4"], [True, True], opener_in_prompt)
    assert out == pytest.approx([0.2, 0.0])


def test_a_share_out_of_range_is_one_line_naming_the_field() -> None:
    run = RunContext(correctness_reward=1.0, max_completion_length=160, easy_threshold=0.8)
    for bad, why in ((1.0, "must be below 1"), (0.0, "must be a finite number > 0")):
        values = {"bonus": 0.05, "share": bad}
        with pytest.raises(TraacError, match=rf"^adaptthink\.share: .*{why}"):
            METHODS["adaptthink"].run_of(parse_settings("adaptthink", values, run), run)


def test_the_share_of_empty_think_blocks_goes_to_trl_and_to_the_steps_line(
    peer, call_texts
) -> None:
    """TRL averages what `log_metric` gets into its logs; the step's own line of
    `metrics.jsonl` takes the same value (`take_logged`), once: the next step starts empty."""
    rewards = peer("adaptthink")
    to_trl: dict[str, float] = {}
    texts = ["<think></think>\\boxed{4}", "<think>So 4.</think>\\boxed{4}"] * 2
    call_texts(rewards, texts, [True] * 4, log_metric=to_trl.__setitem__)
    call_texts(rewards, texts[:1] * 4, [True] * 4)  # a second call of the step, no TRL logger
    assert to_trl == {"adaptthink/no_think_share": 0.5}
    assert rewards.take_logged() == {"adaptthink/no_think_share": 0.75}  # (0.5 + 1) / 2
    assert rewards.take_logged() == {}
