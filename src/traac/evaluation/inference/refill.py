"""`traac eval --batching refill`: decoding that keeps the batch full (`decode_refilled`).

How it decodes is `traac.common.decoding`'s to say (`decode_rows`: refilled on a CPU, padded
batches of `slots` rows on the static cache on a GPU); this backend hands it `slots` rows a call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from traac.common.decoding import decode_rows
from traac.compression.probe_cache import has_sliding_layers
from traac.errors import TraacError
from traac.evaluation.inference.generation import (
    Generation,
    Sampling,
    TokenCallback,
    TransformersBackend,
)


class RefillBackend(TransformersBackend):
    """`TransformersBackend` whose `slots` rows are refilled as responses end (`--batching
    refill`). It takes `batches_per_call` batches' worth of requests per call, so only the
    last few rows of each call idle, and hands each response on as it ends
    (`on_generation`), so a run saves its samples without waiting for the call's last row."""

    batches_per_call = 16
    streams = True  # `generate` takes `on_generation`

    def __init__(self, model: Any, tokenizer: Any, slots: int, static: bool | None = None) -> None:
        if has_sliding_layers(model):
            raise TraacError(
                "--batching refill: the model uses sliding-window attention, whose cache rows "
                "cannot be joined; use --batching padded"
            )
        super().__init__(model, tokenizer, static)
        self.slots = slots

    def generate(
        self,
        prompts: Sequence[str],
        sampling: Sampling,
        keys: Sequence[str],
        on_tokens: TokenCallback | None = None,
        on_generation: Callable[[int, Generation], None] | None = None,
    ) -> list[Generation]:
        """`TransformersBackend.generate`, and `on_generation(i, generation)` as response i
        ends."""
        ids, sampler = self.prepare(prompts, sampling, keys)
        limit = sampling.max_new_tokens
        decoded = decode_rows(
            self.model,
            ids,
            sampler,
            max_new_tokens=limit,
            stop_ids=self.stop_ids,
            pad_id=self.tokenizer.pad_token_id,
            slots=self.slots,
            on_tokens=on_tokens,
            static=self.static,
            on_done=None
            if on_generation is None
            else lambda i, tokens, stopped: on_generation(i, self.finish(tokens, stopped, limit)),
        )
        return [self.finish(tokens, stopped, limit) for tokens, stopped in decoded]
