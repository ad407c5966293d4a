"""`traac eval --batching refill`: decoding that keeps the batch full (`decode_refilled`).

How it decodes is `traac.common.decoding`'s to say (`decode_rows`: refilled on a CPU, padded
batches of `slots` rows on the static cache on a GPU); this backend hands it `slots` rows a call.
"""

from __future__ import annotations

from typing import Any

from traac.common.decoding import DoneCallback, decode_rows
from traac.compression.probe_cache import has_sliding_layers
from traac.errors import TraacError
from traac.evaluation.inference.generation import RowSampler, TokenCallback, TransformersBackend


class RefillBackend(TransformersBackend):
    """`TransformersBackend` whose `slots` rows are refilled as responses end (`--batching
    refill`). It takes `batches_per_call` batches' worth of requests per call, so only the
    last few rows of each call idle; each response is handed on as it ends, so a run saves its
    samples without waiting for the call's last row."""

    batches_per_call = 16

    def __init__(self, model: Any, tokenizer: Any, slots: int, static: bool | None = None) -> None:
        if has_sliding_layers(model):
            raise TraacError(
                "--batching refill: the model uses sliding-window attention, whose cache rows "
                "cannot be joined; use --batching padded"
            )
        super().__init__(model, tokenizer, static)
        self.slots = slots

    def decode(
        self,
        prompts: list[list[int]],
        sampler: RowSampler,
        max_new_tokens: int,
        on_tokens: TokenCallback | None,
        on_done: DoneCallback | None = None,
    ) -> list[tuple[list[int], bool]]:
        return decode_rows(
            self.model,
            prompts,
            sampler,
            max_new_tokens=max_new_tokens,
            stop_ids=self.stop_ids,
            pad_id=self.tokenizer.pad_token_id,
            slots=self.slots,
            on_tokens=on_tokens,
            static=self.static,
            on_done=on_done,
        )
