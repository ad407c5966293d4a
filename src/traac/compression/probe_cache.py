"""The attention probe from a KV cache built while decoding (test-time compression).

The probe of compression.py holds no prompt (docs/method.md#probe), but the reasoning tokens in
a decoding cache attended to the prompt, so their keys (from the second layer on) differ from those
of a prompt-free forward: no cache that holds the prompt can give the probe's scores. So beside
the decoding batch runs a prompt-free *probe cache* (`ProbeCache`): per sequence, the opener at
position 0, then the tokens the model samples after it, fed in one batched forward whenever
`chunk` (32 by default) of them are waiting. When a sequence emits the closer (or reaches the
think budget), only its last few (< 32) reasoning tokens, the separator, the auxiliary prompt and
the closer run against that cache (`cached_probe_row`), and the closer's attention row is the one
`AttentionScorer` computes over the whole probe text. The suffix starts where the probe text's
own tokenization departs from the cached tokens (usually at the unfed tail; a token earlier when
the tokenizer merges across the boundary; earlier still if the model sampled a tokenization the
tokenizer would not produce, or wrote the opener in other tokens), so the scores are exact
whatever was sampled. Building the cache costs about one prefill of the reasoning, spread over
decoding in chunks; what is saved is the re-forward's latency after the closer
(benchmarks/README.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from transformers import DynamicCache

from traac.common.models import cache_kwargs
from traac.compression.probe_capture import LayerSpec, capture_probe_rows

DEFAULT_PROBE_CHUNK = 32  # tokens fed to the probe cache at once: <= 31 left for the closer


class ProbeCache:
    """The prompt-free KV cache of the think blocks being decoded, one row per live sequence:
    the opener (positions from 0), then the tokens sampled after it, fed in one batched forward
    whenever a row has `chunk` of them waiting (rows with fewer get masked columns), so building
    it costs about one prefill of the reasoning and leaves at most `chunk - 1` tokens to run at
    the closer. `chunk = 1` feeds every token as it is sampled."""

    def __init__(self, model: Any, open_ids: list[int], rows: int, chunk: int) -> None:
        self.model = model
        self.open_ids = open_ids
        self.chunk = chunk
        self.fed = [0] * rows  # reasoning tokens held, per row
        device = model.device
        self.cache = DynamicCache(config=model.config)
        self.mask = torch.ones((rows, len(open_ids)), dtype=torch.long, device=device)
        model.base_model(
            input_ids=torch.tensor([open_ids] * rows, device=device),
            position_ids=torch.arange(len(open_ids), device=device).expand(rows, -1),
            **cache_kwargs(model.base_model, self.cache),
            use_cache=True,
        )

    def select(self, index: torch.Tensor) -> None:
        """Keep only these rows (those still decoding)."""
        self.cache.batch_select_indices(index)
        self.mask = self.mask[index]
        self.fed = [self.fed[r] for r in index.tolist()]

    def feed(self, reasonings: list[list[int]]) -> None:
        """Run the waiting tokens of every row once some row has a chunk of them."""
        waiting = [r[fed:] for r, fed in zip(reasonings, self.fed, strict=True)]
        width = max(map(len, waiting))
        if width < self.chunk:
            return
        device = self.model.device
        # Built on the host and moved once: a copy per row would wait on the device per row.
        ids = torch.zeros((len(waiting), width), dtype=torch.long)  # 0: masked
        column = torch.zeros((len(waiting), width), dtype=torch.long)
        for r, w in enumerate(waiting):
            if w:
                ids[r, width - len(w) :] = torch.tensor(w)
                column[r, width - len(w) :] = 1
        ids, column = ids.to(device), column.to(device)
        held = self.mask.sum(dim=1, keepdim=True)
        positions = (held + column.cumsum(dim=1) - 1).clamp(min=0)
        self.mask = torch.cat([self.mask, column], dim=1)
        self.model.base_model(
            input_ids=ids,
            attention_mask=self.mask,
            position_ids=positions,
            **cache_kwargs(self.model.base_model, self.cache),
            use_cache=True,
        )
        self.fed = [fed + len(w) for fed, w in zip(self.fed, waiting, strict=True)]

    def score(
        self,
        row: int,
        reasoning: list[int],
        probe_ids: list[int],
        layers: LayerSpec,
        heads: bool = False,
    ) -> tuple[torch.Tensor, int]:
        """The closer's attention row over `probe_ids` for row `row` (see `cached_probe_row`)."""
        held = [*self.open_ids, *reasoning[: self.fed[row]]]
        columns = self.mask[row].nonzero()[:, 0]
        return cached_probe_row(
            self.model, self.cache, row, columns, held, probe_ids, layers, heads
        )


def cached_probe_row(
    model: Any,
    cache: Any,
    row: int,
    columns: torch.Tensor,
    cached_ids: Sequence[int],
    probe_ids: Sequence[int],
    layers: LayerSpec = "all",
    heads: bool = False,
) -> tuple[torch.Tensor, int]:
    """The attention row of the probe's last token (the closer) over all its tokens, averaged
    over `layers` and heads, from a KV cache: in batch row `row` of `cache`, the cache `columns`
    hold the keys of `cached_ids`, positions from 0 and nothing before them. Only the probe
    tokens past their longest common prefix with `cached_ids` run (the closer always does).
    Returns the row, (len(probe_ids),) float32, or with `heads` one row per head
    (layers * heads, len(probe_ids)), and how many tokens ran.
    """
    k = _common_prefix(cached_ids, probe_ids[:-1])
    kept = columns[:k].to(model.device)
    past = DynamicCache(
        ddp_cache_data=[
            (
                layer.keys[row : row + 1].index_select(2, kept),
                layer.values[row : row + 1].index_select(2, kept),
            )
            for layer in cache.layers
        ],
        config=model.config,
    )
    device = model.device
    with torch.no_grad(), capture_probe_rows(model, layers, heads=heads) as captured:
        model.base_model(
            input_ids=torch.tensor([list(probe_ids[k:])], device=device),
            position_ids=torch.arange(k, len(probe_ids), device=device)[None],
            **cache_kwargs(model.base_model, past if k else None),
            use_cache=bool(k),
        )
    return (captured.per_head() if heads else captured.mean())[0], len(probe_ids) - k


def has_sliding_layers(model: Any) -> bool:
    """Whether some layer keeps a sliding window, whose cache cannot hold a whole reasoning."""
    return any(DynamicCache(config=model.config).is_sliding)


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    return next((k for k in range(n) if a[k] != b[k]), n)
