"""The probe's capture: one attention row per layer from the think closer, inside a forward.

Asking the model for `output_attentions=True` would build a T x T map per layer (gigabytes at
10k tokens); instead the forward runs with an attention function registered through
transformers' `AttentionInterface` that lets SDPA compute the layer output as usual and
additionally computes the single attention row of the probe query, so the cost over a plain
forward is one query's worth of attention per layer. `traac.compression.scoring` turns the rows
into token scores.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from traac.errors import TraacError

LayerSpec = Literal["all", "first_half"] | Sequence[int] | str
PROBE_ATTENTION = "traac_probe"  # the name our attention function is registered under


def resolve_layers(layers: LayerSpec, num_layers: int) -> list[int]:
    """Layer indices for `all`, `first_half` (the authors' implementation), a list or "0,2,5"."""
    if isinstance(layers, str):
        if layers == "all":
            return list(range(num_layers))
        if layers == "first_half":
            return list(range(max(1, num_layers // 2)))
        try:
            layers = [int(x) for x in layers.split(",") if x.strip()]
        except ValueError:
            raise TraacError(
                f"probe_layers: {layers!r} is not all, first_half or comma-separated indices"
            ) from None
    chosen = sorted({int(i) for i in layers})
    if not chosen or chosen[0] < 0 or chosen[-1] >= num_layers:
        raise TraacError(
            f"probe_layers: {list(layers)} must be a non-empty set of indices in [0, {num_layers})"
        )
    return chosen


# --------------------------------------------------------------------------------------------
# The probe attention function and its capture.


@dataclass
class ProbeRows:
    """Attention rows of one query per sequence, captured during a forward pass.

    `query_index` (batch,) says which query position of the current forward is the probe in
    each sequence; `None` means the last one (what a decode step against a KV cache needs).
    `rows[layer]` is that query's attention over all keys (cache + current input), averaged
    over the query heads: (batch, keys), float32; with `heads`, one row per query head:
    (batch, heads, keys). A later forward overwrites the rows.
    """

    layers: frozenset[int]
    query_index: torch.Tensor | None = None
    heads: bool = False
    rows: dict[int, torch.Tensor] = field(default_factory=dict)

    def _stacked(self) -> torch.Tensor:
        missing = sorted(self.layers - self.rows.keys())
        if missing:
            raise TraacError(f"probe: no attention captured for layers {missing}; run a forward")
        return torch.stack([self.rows[i] for i in sorted(self.layers)])

    def mean(self) -> torch.Tensor:
        """The rows averaged over the captured layers and heads: (batch, keys)."""
        rows = self._stacked()
        return rows.mean(dim=(0, 2)) if self.heads else rows.mean(0)

    def per_head(self) -> torch.Tensor:
        """Every captured head's row, layer by layer: (batch, layers * heads, keys)."""
        if not self.heads:
            raise TraacError("probe: per-head rows need a capture with heads=True")
        return self._stacked().transpose(0, 1).flatten(1, 2)


# Captures in progress, keyed by the id of the (text) config their model's attention modules
# share; a fresh dict on every change, so the ContextVar's value is never mutated in place.
_CAPTURES: ContextVar[dict[int, ProbeRows] | None] = ContextVar(
    "traac_probe_captures", default=None
)


def _probe_attention(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """SDPA for the layer output, plus the probe query's attention row for the capture."""
    output, _ = sdpa_attention_forward(
        module, query, key, value, attention_mask, scaling=scaling, **kwargs
    )
    holder = (_CAPTURES.get() or {}).get(id(module.config))
    layer = getattr(module, "layer_idx", None)
    if holder is not None and layer in holder.layers:
        is_causal = kwargs.get("is_causal")
        is_causal = getattr(module, "is_causal", True) if is_causal is None else is_causal
        scale = query.shape[-1] ** -0.5 if scaling is None else scaling
        holder.rows[layer] = probe_row(
            query, key, attention_mask, scale, is_causal, holder.query_index, holder.heads
        )
    return output, None


def probe_row(
    query: torch.Tensor,
    key: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    is_causal: bool,
    query_index: torch.Tensor | None,
    keep_heads: bool = False,
) -> torch.Tensor:
    """softmax(q_probe . K^T * scaling + mask_row), averaged over heads: (batch, keys) float32;
    with `keep_heads`, one row per query head: (batch, heads, keys).

    `query` (b, heads, q, d), `key` (b, kv_heads, k, d): grouped-query heads are matched to
    their key head by reshaping the query, never by copying K. The mask is what transformers
    built for SDPA: boolean (True = attend) or additive float, shape (b|1, 1|heads, q, k), or
    None when SDPA relies on `is_causal` (upper-left aligned, so query i sees keys j <= i) or
    on no mask at all (a single query sees every key).
    """
    b, heads, q_len, dim = query.shape
    kv_heads, k_len = key.shape[1], key.shape[2]
    # The last query (the probe of an unpadded or evenly padded batch) is a view: no index
    # kernels, and under `is_causal` it sees every key, so no mask either. These small per-layer
    # launches are most of the probe's fixed cost on a GPU at short lengths.
    last = query_index is None
    if last:
        probe = query[:, :, q_len - 1].contiguous()  # as the gather lays it out: the same bits
    else:
        batch = torch.arange(b, device=query.device)
        index = query_index.to(query.device)
        probe = query[batch, :, index]
    probe = probe.reshape(b, kv_heads, heads // kv_heads, dim)
    # In float32, as SDPA and flash kernels keep their scores: a bf16 product rounds each logit
    # to 8 bits of mantissa, which moves the row by percents (tests/compression/test_scoring.py).
    logits = torch.matmul(probe.float(), key.float().transpose(-1, -2)) * scaling
    logits = logits.reshape(b, heads, k_len)  # (b, kv_heads, group, k) -> (b, heads, k)
    if attention_mask is None:
        # SDPA's is_causal is aligned upper left: query i sees keys j <= i.
        if is_causal and q_len > 1 and not (last and k_len <= q_len):
            at = torch.full((b,), q_len - 1, device=query.device) if last else index
            future = torch.arange(k_len, device=query.device)[None, :] > at[:, None]
            logits = logits.masked_fill(future[:, None, :], float("-inf"))
    else:
        mask = attention_mask.expand(b, -1, q_len, -1)
        mask = mask[:, :, q_len - 1] if last else mask[batch, :, index]  # (b, 1|heads, k)
        if mask.dtype == torch.bool:
            logits = logits.masked_fill(~mask, float("-inf"))
        else:
            logits = logits + mask.float()
    rows = torch.softmax(logits, dim=-1)
    return rows if keep_heads else rows.mean(dim=1)


def _register() -> None:
    """Register the probe attention, and SDPA's mask builder for it (without a registered mask
    builder transformers would pass no mask at all, silently dropping padding)."""
    AttentionInterface.register(PROBE_ATTENTION, _probe_attention)
    AttentionMaskInterface.register(PROBE_ATTENTION, sdpa_mask)


def text_config(model: Any) -> Any:
    return model.config.get_text_config()


@contextmanager
def capture_probe_rows(
    model: Any,
    layers: LayerSpec = "all",
    query_index: torch.Tensor | None = None,
    heads: bool = False,
) -> Iterator[ProbeRows]:
    """Within the block, every forward of `model` runs SDPA and records the probe rows (each
    head's with `heads`).

    Works for a full sequence and for a suffix run against a KV cache (`past_key_values`): the
    row then spans cache + suffix keys. The model's attention implementation is restored on
    exit, so training and generation see it unchanged.
    """
    _register()
    config = text_config(model)
    chosen = frozenset(resolve_layers(layers, config.num_hidden_layers))
    holder = ProbeRows(chosen, query_index, heads)
    captures = _CAPTURES.get() or {}
    if id(config) in captures:
        raise TraacError("probe: this model is already inside capture_probe_rows")
    switched = _switch_to_probe(model)
    token = _CAPTURES.set({**captures, id(config): holder})
    try:
        yield holder
    finally:
        for cfg, original, _ in switched:
            cfg._attn_implementation_internal = original
        _CAPTURES.reset(token)


# Per model, the configs `set_attn_implementation` changed for the probe: (config, its own
# implementation, the probe's), so that later captures flip them without its walk over every
# module, which costs about as much as the probe's rows on a short sequence.
_SWITCHES: weakref.WeakKeyDictionary[Any, list[tuple[Any, Any, Any]]] = weakref.WeakKeyDictionary()


def _configs(model: Any) -> list[Any]:
    """The model's config and those of its sub-models, each once."""
    found = {id(model.config): model.config}
    for module in model.modules():
        config = getattr(module, "config", None)
        if config is not None and hasattr(config, "_attn_implementation_internal"):
            found.setdefault(id(config), config)
    return list(found.values())


def _switch_to_probe(model: Any) -> list[tuple[Any, Any, Any]]:
    """Put the model on the probe attention; what to set back on exit. The first time (or
    when the model's implementation changed since) through `set_attn_implementation`, which
    checks the model supports it; then by setting the same configs directly."""
    known = _SWITCHES.get(model)
    if known and all(cfg._attn_implementation_internal == own for cfg, own, _ in known):
        for cfg, _, probe in known:
            cfg._attn_implementation_internal = probe
        return known
    configs = _configs(model)
    before = [cfg._attn_implementation_internal for cfg in configs]
    model.set_attn_implementation(PROBE_ATTENTION)
    switched = [
        (cfg, own, cfg._attn_implementation_internal)
        for cfg, own in zip(configs, before, strict=True)
        if cfg._attn_implementation_internal != own
    ]
    _SWITCHES[model] = switched
    return switched
