"""The generation rounds of a step after its sampling: re-answers after compressed think
blocks and dynamic sampling's fresh rollouts.

Every process takes part in each round, with whatever number of prompts it holds, some with
none. Some backends need as many prompts from each process of a group: vLLM's server mode
gathers every process's prompts into one request and slices the answers back evenly; a
tensor-parallel vLLM group gathers its members' prompts into one call each generates; sharded
forwards (FSDP, ZeRO-3) are collectives. There the shorter lists are padded with a prompt of the
step closed by an empty think block, which the model answers at once, never with a prompt that
would reason from scratch; colocated vLLM without tensor parallelism, and unsharded
transformers generation, generate each process's prompts alone, unpadded.
"""

from __future__ import annotations

from typing import Any

from traac.compression.formats import ChatFormat
from traac.training.step.host import StepHost


def generation_group(
    num_processes: int, collective: bool, vllm_mode: str | None, tensor_parallel: int = 1
) -> int:
    """How many consecutive processes must hand the generation backend as many prompts each:
    all, for vLLM's server mode (one gathered request, its answers sliced back evenly) and
    sharded forwards (`collective`: each one a collective); a tensor-parallel group for
    colocated vLLM (one gathered call per group); else 1, each process generating on its own.
    `vllm_mode` is None without vLLM."""
    if vllm_mode == "server":
        return num_processes
    if vllm_mode is not None:
        return tensor_parallel
    return num_processes if collective else 1


class GenerationRounds:
    """The rounds of one run, through its host's backend (`StepHost.sample_answers`)."""

    def __init__(
        self, host: StepHost, chat_format: ChatFormat, tokenizer: Any, max_completion_length: int
    ) -> None:
        self.host = host
        self.chat_format = chat_format
        self.tokenizer = tokenizer
        self.max_completion_length = max_completion_length

    def regenerate(
        self, prompts: list[list[int]], prefix_lengths: list[int], filler: list[int]
    ) -> list[tuple[list[int], list[float] | None]]:
        """Answers sampled by the generation backend after each compressed think block (`filler`:
        a prompt of the step, for `generate_padded`).

        The token budget keeps every compressed rollout within `max_completion_length`.
        """
        shortest = self.host.gather([min(prefix_lengths)] if prefix_lengths else [])
        if not shortest:
            return []
        sampled = self.generate_padded(prompts, self.max_completion_length - min(shortest), filler)
        out = []
        for (ids, lps), prefix_length in zip(sampled, prefix_lengths, strict=True):
            limit = self.max_completion_length - prefix_length
            out.append((list(ids[:limit]), None if lps is None else list(lps[:limit])))
        return out

    def generate_padded(
        self, prompts: list[list[int]], budget: int, filler: list[int]
    ) -> list[tuple[list[int], list[float] | None]]:
        """One completion per prompt, up to `budget` tokens, as (ids, sampling log-probs or
        None). Every process calls it. Where the backend needs as many prompts from each process
        of a group (`StepHost.generation_group`), a shorter list is padded with the prompt
        `filler` and an empty think block, which the model answers at once, and those
        completions dropped."""
        counts = self.host.gather([len(prompts)])
        size = self.host.generation_group
        first = self.host.rank // size * size
        target = max(counts[first : first + size])
        if target == 0:
            return []
        closed = self.chat_format.answer_prefix("")  # an empty think block
        empty_think = self.tokenizer(closed, add_special_tokens=False)["input_ids"]
        batch = list(prompts) + [filler + empty_think] * (target - len(prompts))
        ids, logprobs = self.host.sample_answers(batch, budget)
        return [
            (list(ids[k]), None if logprobs is None else list(logprobs[k]))
            for k in range(len(prompts))
        ]
