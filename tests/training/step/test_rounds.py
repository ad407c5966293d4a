"""Which processes a generation round pads together, and the re-answer budget, against a
minimal host (no model); two processes padding each other are in
tests/training/step/test_driver.py."""

from __future__ import annotations

from typing import Any

import pytest

from traac.compression.formats import ChatFormat
from traac.training.step.rounds import GenerationRounds, generation_group


@pytest.mark.parametrize(
    ("collective", "vllm_mode", "tensor_parallel", "expected"),
    [
        (False, None, 1, 1),  # transformers, unsharded: each process alone
        (True, None, 1, 4),  # sharded forwards are collectives: all four
        (False, "server", 1, 4),  # one gathered request, answers sliced back evenly
        (True, "server", 2, 4),
        (False, "colocate", 1, 1),  # colocated vLLM: each process its own engine
        (True, "colocate", 2, 2),  # a tensor-parallel group gathers its members' prompts
    ],
)
def test_the_generation_group_follows_the_backend(
    collective: bool, vllm_mode: str | None, tensor_parallel: int, expected: int
) -> None:
    assert generation_group(4, collective, vllm_mode, tensor_parallel) == expected


class Host:
    """One process; its backend answers each prompt with `answer` and records the calls."""

    rank = 0
    generation_group = 1

    def __init__(self, answer: list[int]) -> None:
        self.answer = answer
        self.calls: list[tuple[list[list[int]], int]] = []

    def gather(self, values: list[Any]) -> list[Any]:
        return list(values)

    def sample_answers(self, prompts: list[list[int]], budget: int) -> tuple[list, None]:
        self.calls.append((prompts, budget))
        return [self.answer[:budget] for _ in prompts], None


def tokenizer(text: str, add_special_tokens: bool = False) -> dict[str, list[int]]:
    return {"input_ids": [ord(c) for c in text]}


def test_reanswers_share_the_shortest_blocks_budget_and_each_is_cut_to_its_own() -> None:
    host = Host(list(range(100)))
    rounds = GenerationRounds(host, ChatFormat(), tokenizer, max_completion_length=50)  # type: ignore[arg-type]
    answers = rounds.regenerate([[1], [2]], [10, 30], filler=[9])
    assert host.calls == [([[1], [2]], 40)]  # one call, budget 50 - 10
    assert [ids for ids, _ in answers] == [list(range(40)), list(range(20))]
    assert all(lps is None for _, lps in answers)


def test_a_round_no_process_needs_calls_no_backend() -> None:
    host = Host([1])
    rounds = GenerationRounds(host, ChatFormat(), tokenizer, max_completion_length=50)  # type: ignore[arg-type]
    assert rounds.regenerate([], [], filler=[9]) == []
    assert rounds.generate_padded([], 50, filler=[9]) == []
    assert host.calls == []
