"""Test-time thinking as an evaluation `Backend`: what `traac eval --think-budget B` and
`--compress-tau TAU` sample with."""

from __future__ import annotations

from collections.abc import Sequence

from traac.evaluation.inference.generation import Sampling, TokenCallback
from traac.evaluation.inference.responses import Generation
from traac.evaluation.inference.testtime import ThinkingGenerator


class ThinkingBackend:
    """The evaluation `Backend` (`generation`) of `traac eval --think-budget B`
    and/or `--compress-tau TAU`. Seeds follow `TransformersBackend` (one random stream per
    request, from its key). Its generations are the generator's `ThinkingSample`s: under a
    budget each says whether the budget interrupted it and how many think tokens the model
    wrote; with compression, its `extra` adds the sample's test-time fields (tokens saved, the
    steps with their scores) to its evaluation record."""

    def __init__(self, generator: ThinkingGenerator) -> None:
        self.generator = generator
        self.tokenizer = generator.tokenizer
        self.max_context = generator.max_positions
        self.batch_all = getattr(generator.engine, "batch_all", False)

    def generate(
        self,
        prompts: Sequence[str],
        sampling: Sampling,
        keys: Sequence[str],
        on_tokens: TokenCallback | None = None,
    ) -> list[Generation]:
        return self.generator.generate(
            prompts,
            max_new_tokens=sampling.max_new_tokens,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            seed=sampling.seed,
            keys=keys,
            on_tokens=on_tokens,
        )
