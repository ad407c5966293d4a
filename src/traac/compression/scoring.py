"""Per-token scores for attentive compression: attention from the think closer, confidence, random
(step entropy, a policy scorer too, is `traac.compression.step_entropy`).

The attention scorer is the heart of TRAAC (docs/method.md#probe): the importance of reasoning
token j is the attention weight from the probe's closing delimiter to j, averaged over layers and
heads.
The rows come from one forward with the probe's attention function
(`traac.compression.probe_capture`), which computes the closer's attention row per layer beside
SDPA's output.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from traac.compression.compression import ScoreRequest, TokenScores
from traac.compression.probe_capture import (
    LayerSpec,
    capture_probe_rows,
    resolve_layers,
    text_config,
)
from traac.compression.segmentation import split_steps, token_step_index, trim_offsets
from traac.compression.settings import PROBE_HEADS, check_choice
from traac.errors import TraacError

# --------------------------------------------------------------------------------------------
# Scorers: each turns score requests into per-token scores on the probe text (`Scorer`).


def encode_offsets(tokenizer: Any, text: str) -> tuple[list[int], np.ndarray]:
    """Token ids and (T, 2) character offsets of `text` (leading whitespace trimmed, so a token
    belongs to the step its first visible character is in), without special tokens."""
    try:
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    except NotImplementedError as err:
        raise TraacError(
            "tokenizer: offsets are needed to map tokens to steps; load a fast tokenizer"
        ) from err
    ids = list(enc["input_ids"])
    offsets = trim_offsets(text, np.asarray(enc["offset_mapping"], dtype=np.int64))
    if not ids:
        raise TraacError("scoring: a text has no tokens; the reasoning is empty")
    return ids, offsets


class _ModelScorer:
    """Tokenises, checks lengths, batches with right padding and maps scores back to offsets.

    Subclasses say which text of a request they read (`_text`) and how its offsets map onto the
    probe text (`_to_probe`), and compute `token_scores` for a padded batch. `model` is what
    the forwards enter: a PEFT wrapper is taken whole, since a sharded one (FSDP2) is the root
    whose forward gathers the outer weights.
    """

    gated = True

    def __init__(self, model: Any, tokenizer: Any, batch_size: int = 8) -> None:
        if batch_size < 1:
            raise TraacError(f"batch_size: {batch_size} must be at least 1")
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.max_positions = getattr(text_config(model), "max_position_embeddings", None)

    def _check_length(self, n_tokens: int) -> None:
        if self.max_positions is not None and n_tokens > self.max_positions:
            raise TraacError(
                f"scoring: the scored text is {n_tokens} tokens but the model takes at most "
                f"{self.max_positions} positions; shorten the reasoning (nothing is truncated)"
            )

    def _text(self, request: ScoreRequest) -> str:
        return request.probe

    def _to_probe(self, request: ScoreRequest, offsets: np.ndarray) -> np.ndarray:
        return offsets

    def _encode(self, text: str) -> tuple[list[int], np.ndarray]:
        ids, offsets = encode_offsets(self.tokenizer, text)
        self._check_length(len(ids))
        return ids, offsets

    def token_scores(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        raise NotImplementedError

    def score(self, requests: Sequence[ScoreRequest]) -> list[TokenScores]:
        """Score each request; longest first so batches hold similar lengths (less padding)."""
        return [TokenScores(o, s) for o, s in self._batched(requests, self.token_scores)]

    def _batched(
        self,
        requests: Sequence[ScoreRequest],
        compute: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """(probe offsets, scores) per request, `compute` run on right-padded batches; its
        output's last dimension is the token (any leading dimensions are kept)."""
        encoded = [self._encode(self._text(r)) for r in requests]
        order = sorted(range(len(requests)), key=lambda i: -len(encoded[i][0]))
        pad = getattr(self.tokenizer, "pad_token_id", None) or 0
        device = self.model.device
        out: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(requests)
        for at in range(0, len(order), self.batch_size):
            chunk = order[at : at + self.batch_size]
            width = max(len(encoded[i][0]) for i in chunk)
            ids = torch.full((len(chunk), width), pad, dtype=torch.long)
            mask = torch.zeros((len(chunk), width), dtype=torch.long)
            for row, i in enumerate(chunk):
                n = len(encoded[i][0])
                ids[row, :n] = torch.tensor(encoded[i][0])
                mask[row, :n] = 1
            # The mask stays on the host: the scorer reads the layout off it without waiting
            # on the device (`_layout`).
            scores = compute(ids.to(device), mask).double().cpu().numpy()
            for row, i in enumerate(chunk):
                n = len(encoded[i][0])
                offsets = self._to_probe(requests[i], encoded[i][1])
                out[i] = (offsets, scores[..., row, :n])
        return out  # type: ignore[return-value]


@dataclass(frozen=True)
class _Layout:
    """Where a batch's real tokens are, read on the host once (`_layout`): the boolean (b, T)
    mask on the input's device (None: no padding anywhere), each sequence's length and last
    real position, and whether every sequence is a prefix (right padding)."""

    valid: torch.Tensor | None
    lengths: list[int]
    first: list[int]
    last: list[int]
    right_padded: bool

    def query_index(self, device: torch.device) -> torch.Tensor | None:
        """The probe query of each sequence; None where it is every sequence's last column,
        which `probe_row` reads as a view."""
        width = max(self.lengths) if self.valid is None else self.valid.shape[1]
        if all(at == width - 1 for at in self.last):
            return None
        return torch.tensor(self.last, device=device)

    def zero_padding(self, rows: torch.Tensor) -> torch.Tensor:
        return rows if self.valid is None else rows.masked_fill(~self.valid[None], 0.0)


def _layout(input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> _Layout:
    """The batch's `_Layout`, from a mask on the host where it is one (no device read); a
    device mask is read back once, so the scorer waits on the device at most once before its
    forward instead of once per check."""
    b, width = input_ids.shape
    if attention_mask is None:
        return _Layout(None, [width] * b, [0] * b, [width - 1] * b, True)
    if tuple(attention_mask.shape) != tuple(input_ids.shape):
        raise TraacError(
            f"attention_mask shape {tuple(attention_mask.shape)} differs from input_ids "
            f"{tuple(input_ids.shape)}"
        )
    host = attention_mask.detach().cpu().bool()
    lengths = host.sum(dim=1).tolist()
    if min(lengths) == 0:
        raise TraacError("scoring: a sequence in the batch has no tokens")
    prefix = torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]
    first = host.int().argmax(dim=1).tolist()
    last = (width - 1 - host.flip(1).int().argmax(dim=1)).tolist()
    if bool(host.all()):
        return _Layout(None, lengths, first, last, True)
    valid = host.to(input_ids.device, non_blocking=True)
    return _Layout(valid, lengths, first, last, bool((prefix == host).all()))


def _padding_kwargs(layout: _Layout) -> dict[str, Any]:
    """Left (or mixed) padding needs the mask, and positions that skip the pads so a sequence
    scores the same wherever it sits in a batch. With right padding no mask is needed at all:
    causal attention never lets a real token see the pads after it, and SDPA keeps its fast
    mask-free causal kernel."""
    if layout.right_padded or layout.valid is None:
        return {}
    valid = layout.valid.long()
    return {"attention_mask": valid, "position_ids": (valid.cumsum(dim=1) - 1).clamp(min=0)}


def closer_reads(start: int, end: int, text_len: int, closer_len: int) -> bool:
    """Whether the probe's last token, spanning characters [start, end), is the closer's last
    token: the query whose attention the probe reads (docs/method.md#probe). A tokenizer with
    a `</think>` token reads that one token; one that splits it (SmolLM2: `</`, `think`, `>`)
    reads the last piece, which has then seen the whole closer."""
    return end == text_len and start >= text_len - closer_len


def closer_query(tokenizer: Any, think_close: str = "</think>") -> str:
    """Which token's attention the probe reads, in words (shown by `compress` and the probe
    report, so a user sees the rule `closer_reads` applied to their tokenizer)."""
    pieces = tokenizer.convert_ids_to_tokens(
        tokenizer.encode(think_close, add_special_tokens=False)
    )
    if len(pieces) == 1:
        return f"probe query: {think_close!r}, one token"
    return (
        f"probe query: {pieces[-1]!r}, the last of the {len(pieces)} tokens "
        f"{' '.join(map(repr, pieces))} of {think_close!r}"
    )


class AttentionScorer(_ModelScorer):
    """Score each token by the attention the probe's closer pays it (docs/method.md#compression).

    `layers`: `all` (paper), `first_half` (authors' implementation) or explicit indices; the
    score is the mean over those layers and all query heads, or with `heads="gated"` one row
    per head, which the compressor gates (`gate_heads`). Every probe text must end with
    `think_close`; the query whose attention is read is the closer's last token
    (`closer_reads`), the closer itself when the tokenizer has it as one token.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        layers: LayerSpec = "all",
        batch_size: int = 8,
        think_close: str = "</think>",
        heads: str = "all",
    ) -> None:
        super().__init__(model, tokenizer, batch_size)
        check_choice("probe_heads", heads, PROBE_HEADS)
        self.layers = resolve_layers(layers, text_config(model).num_hidden_layers)
        self.think_close = think_close
        self.heads = heads

    def _encode(self, text: str) -> tuple[list[int], np.ndarray]:
        ids, offsets = super()._encode(text)
        start, end = (int(x) for x in offsets[-1])
        if not text.endswith(self.think_close) or not closer_reads(
            start, end, len(text), len(self.think_close)
        ):
            raise TraacError(
                f"scoring: the probe must end with {self.think_close!r}, but its last token is "
                f"{text[start:end]!r}; check the chat format's think_close and the tokenizer"
            )
        return ids, offsets

    def token_scores(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """(b, T) attention of each sequence's last real position to every position, averaged
        over the chosen layers and heads, or (layers * heads, b, T) one row per head with heads
        `gated`; zeros on padding (left or right)."""
        if self.heads == "gated":
            return self._rows(input_ids, attention_mask, heads=True)
        return self.layer_scores(input_ids, attention_mask).mean(dim=0)

    def layer_scores(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """(layers, b, T): the same rows per chosen layer, before the mean over layers."""
        return self._rows(input_ids, attention_mask, heads=False)

    def _rows(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, heads: bool
    ) -> torch.Tensor:
        layout = _layout(input_ids, attention_mask)
        self._check_length(max(layout.lengths))
        kwargs = _padding_kwargs(layout)
        query_index = layout.query_index(input_ids.device)
        capture = capture_probe_rows(self.model, self.layers, query_index, heads=heads)
        with torch.no_grad(), capture as captured:
            _root_forward(self.model, input_ids, kwargs)
        if heads:
            rows = captured.per_head().transpose(0, 1)
        else:
            rows = torch.stack([captured.rows[k] for k in self.layers])
        return layout.zero_padding(rows)

    def score_layers(self, requests: Sequence[ScoreRequest]) -> list[tuple[np.ndarray, np.ndarray]]:
        """(probe offsets, (layers, T) scores) per request: every chosen layer's scores from one
        forward, for reports that compare layer sets."""
        return self._batched(requests, self.layer_scores)


class PolicyScorer(_ModelScorer):
    """Scores each reasoning token by a value of the next-token distribution that predicted it
    (`token_value`), read WITH the question in context (the request's `context`: prompt +
    opener, exactly as the policy saw them). Not gated: the lowest-scored steps are evicted at
    e = tau. Logits are computed a few hundred positions at a time, never (T, vocab)."""

    gated = False
    name = "policy"

    def __init__(
        self, model: Any, tokenizer: Any, batch_size: int = 8, think_open: str = ""
    ) -> None:
        super().__init__(model, tokenizer, batch_size)
        self.opener_length = len(think_open)

    def token_value(self, logits: torch.Tensor) -> torch.Tensor:
        """(n,) score of each position from its (n, vocab) logits."""
        raise NotImplementedError

    def _text(self, request: ScoreRequest) -> str:
        if request.context is None:
            raise TraacError(
                f"{self.name} scorer: it reads the policy's own distribution with the question "
                "in context; give each trace its prompt"
            )
        return request.context + request.reasoning

    def _to_probe(self, request: ScoreRequest, offsets: np.ndarray) -> np.ndarray:
        """Offsets in the probe text, where the reasoning starts after the opener; prompt tokens
        fall before it (negative) and count in no step."""
        assert request.context is not None
        return offsets - len(request.context) + self.opener_length

    def token_scores(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """(b, T) score of each token from the distribution at the position before it; the
        first position (nothing predicts it) gets 0."""
        layout = _layout(input_ids, attention_mask)
        self._check_length(max(layout.lengths))
        kwargs = _padding_kwargs(layout)
        conf = torch.zeros(input_ids.shape, dtype=torch.float32, device=input_ids.device)

        def read(module: Any, args: Any, output: Any) -> None:
            # Inside the model's own forward, where a sharded head's weight is gathered.
            self._confidences(output[0], conf)

        handle = _body(self.model).register_forward_hook(read)
        try:
            with torch.no_grad():
                _root_forward(self.model, input_ids, kwargs)
        finally:
            handle.remove()
        conf = layout.zero_padding(conf[None])[0]
        conf[range(len(layout.first)), layout.first] = 0.0  # nothing predicts a first token
        return conf

    def _confidences(self, hidden: torch.Tensor, conf: torch.Tensor) -> None:
        """Fill `conf[:, 1:]` from the hidden states, computing logits a few hundred positions
        at a time."""
        head = self.model.get_output_embeddings()
        softcap = getattr(text_config(self.model), "final_logit_softcapping", None)
        chunk = max(1, (1 << 26) // vocabulary_size(self.model))  # ~64M logits at a time
        last = hidden.shape[1] - 1  # the final position predicts nothing in the text
        for row in range(hidden.shape[0]):
            for at in range(0, last, chunk):
                logits = head(hidden[row, at : min(at + chunk, last)]).float()
                if softcap:
                    logits = torch.tanh(logits / softcap) * softcap
                conf[row, at + 1 : at + 1 + len(logits)] = self.token_value(logits)


class ConfidenceScorer(PolicyScorer):
    """The policy's confidence when it sampled each token (paper appendix,
    docs/method.md#compression): 1 - H / log k, with H the entropy of the renormalised top-k of
    the next-token distribution that predicted the token."""

    name = "confidence"

    def __init__(
        self, model: Any, tokenizer: Any, k: int = 20, batch_size: int = 8, think_open: str = ""
    ) -> None:
        super().__init__(model, tokenizer, batch_size, think_open)
        vocab = vocabulary_size(model)
        if not 2 <= k <= vocab:
            raise TraacError(f"confidence_top_k: {k} must lie in [2, {vocab}] (the vocabulary)")
        self.k = k

    def token_value(self, logits: torch.Tensor) -> torch.Tensor:
        return topk_confidence(logits, self.k)


def _body(model: Any) -> Any:
    """The transformer body under the head (its output is the hidden states), inside a PEFT
    wrapper if there is one."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    return inner.base_model


def vocabulary_size(model: Any) -> int:
    """Rows of the model's output head, read where sharding leaves them: a linear head's
    `out_features`, else DeepSpeed's `ds_shape` (ZeRO-3 empties `weight.shape` on every
    process) or the weight's own shape (a DTensor's is the global one)."""
    head = model.get_output_embeddings()
    if isinstance(getattr(head, "out_features", None), int):
        return head.out_features
    weight = head.weight
    return int(getattr(weight, "ds_shape", weight.shape)[0])


def _root_forward(model: Any, input_ids: torch.Tensor, kwargs: dict[str, Any]) -> None:
    """A forward through the model's own entry point, which a sharded model (FSDP, ZeRO-3)
    needs to gather its outer weights; logits only for the last position, which nobody reads."""
    model(input_ids=input_ids, use_cache=False, logits_to_keep=1, **kwargs)


def topk_confidence(logits: torch.Tensor, k: int) -> torch.Tensor:
    """1 - H/log k of the renormalised top-k distribution of each row of `logits` (.., vocab)."""
    top = torch.topk(torch.log_softmax(logits.float(), dim=-1), k, dim=-1).values
    p = torch.softmax(top, dim=-1)  # exp then renormalise over the k kept tokens
    entropy = -(p * torch.log(p + 1e-12)).sum(dim=-1)
    return (1.0 - entropy / math.log(k)).clamp(min=0.0)


class RandomScorer:
    """Random step scores for the ablation: every step of the probe text gets one uniform
    score shared by its tokens, so the lowest e = tau of the steps are a random choice.

    Seeded per text, from `seed` and the text itself, so a trace gets the same scores however it
    is batched or ordered. Steps are found with the same split phrases the compressor uses.
    """

    gated = False

    def __init__(self, tokenizer: Any, seed: int = 0, phrases: Sequence[str] | None = None) -> None:
        self.tokenizer = tokenizer
        self.seed = seed
        self.phrases = None if phrases is None else tuple(phrases)

    def score(self, requests: Sequence[ScoreRequest]) -> list[TokenScores]:
        out = []
        for request in requests:
            text = request.probe
            _, offsets = encode_offsets(self.tokenizer, text)
            digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
            rng = np.random.default_rng([self.seed, int.from_bytes(digest, "little")])
            steps = split_steps(text, self.phrases)
            step_values = rng.random(len(steps))
            index = token_step_index(steps, offsets)
            # Tokens outside every step (zero-width offsets) take the mean.
            values = np.where(index >= 0, step_values[np.clip(index, 0, None)], step_values.mean())
            out.append(TokenScores(offsets=offsets, scores=values))
        return out
