"""Test-time thinking as an evaluation `Backend`: what `traac eval --think-budget B` and
`--compress-tau TAU` sample with."""

from __future__ import annotations

from collections.abc import Sequence

from traac.evaluation.generation import Generation, Sampling, TokenCallback
from traac.evaluation.testtime import ThinkingGenerator


class ThinkingBackend:
    """The evaluation `Backend` (traac.evaluation.generation) of `traac eval --think-budget B`
    and/or `--compress-tau TAU`. Seeds follow `TransformersBackend` (one random stream per
    request, from its key). Each generation says whether the budget interrupted it and how many
    think tokens the model wrote; with compression, its `extra` adds the sample's test-time
    fields (tokens saved, the steps with their scores) to its evaluation record."""

    def __init__(self, generator: ThinkingGenerator) -> None:
        self.generator = generator
        self.tokenizer = generator.tokenizer
        self.max_context = generator.max_positions

    def generate(
        self,
        prompts: Sequence[str],
        sampling: Sampling,
        keys: Sequence[str],
        on_tokens: TokenCallback | None = None,
    ) -> list[Generation]:
        samples = self.generator.generate(
            prompts,
            max_new_tokens=sampling.max_new_tokens,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            seed=sampling.seed,
            keys=keys,
            on_tokens=on_tokens,
        )
        budget = self.generator.think_budget is not None
        return [
            Generation(
                text=s.response,
                token_ids=s.token_ids,
                finish_reason=s.finish_reason,
                interrupted=s.interrupted if budget else None,
                budget_think_tokens=s.think_tokens if budget else None,
                extra=s.record_fields() if self.generator.tau is not None else {},
            )
            for s in samples
        ]
