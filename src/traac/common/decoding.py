"""Sampling and refilled decoding that evaluation and training share.

`RowSampler` draws each request's tokens from its own seeded stream; `decode_refilled` keeps a
decoding batch full: a finished row's slot goes to the next waiting prompt, and a finished row
leaves the batch, so a batch of uneven responses costs the tokens it samples, not its longest
response times its rows. `traac eval --batching refill` (`traac.evaluation.refill`) and the
training rollouts of `rollout_batching: refill` (`traac.training.trl_adapter.rollouts`) decode with
them.

A padded `generate` batch decodes until its longest response ends, so on responses of uneven
length most rows idle. Here `slots` rows decode together; when rows stop, prefilled prompts take
their places: their caches are joined to the running one, padded on the left to a common length
(the attention mask hides the padding, positions are each row's own), and leading columns no
row uses any more are cut. Prompts are prefilled `slots` at a time (one left-padded forward)
and wait, their first token drawn, until slots free: one prefill forward per `slots` requests
rather than one per refill, which on a small model costs as much as a decoding step. Each
request draws from its own seeded stream (`RowSampler`), so it samples the same tokens whichever
rows it shares the batch with, up to the floating-point effects of batch shape that any batched
decoding has.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import (
    DynamicCache,
    LogitsProcessor,
    LogitsProcessorList,
    TemperatureLogitsWarper,
    TopPLogitsWarper,
)

from traac.common.models import cache_kwargs, input_device
from traac.common.sampling import check_sampling

# Called after each decoding step with the number of tokens generated in it (progress bars).
TokenCallback = Callable[[int], None]
# A response ended: its request, its tokens and whether a stop token ended it (`decode_refilled`).
DoneCallback = Callable[[int, list[int], bool], None]


class RowSampler:
    """Temperature and nucleus sampling (transformers' warpers) with one seeded generator per
    request, so a request draws the same tokens whichever batch it lands in: a resumed run,
    which re-forms its batches after the samples it kept, repeats an uninterrupted one. Each
    token takes one uniform from the request's stream (inverse CDF)."""

    def __init__(self, temperature: float, top_p: float, seeds: Sequence[int]) -> None:
        check_sampling(temperature, top_p, None)
        self.greedy = temperature == 0
        self.warpers: list[Any] = []
        if temperature not in (0, 1):
            self.warpers.append(TemperatureLogitsWarper(temperature))
        if top_p < 1:
            self.warpers.append(TopPLogitsWarper(top_p))
        # The streams live on the CPU whatever the model's device: a row's uniform is one CPU
        # draw, and a step moves one small tensor to the device instead of launching a kernel
        # per row there (on a CPU model this is the stream it always drew from).
        self.generators = [torch.Generator().manual_seed(s) for s in seeds]

    def __call__(
        self, history: torch.Tensor, logits: torch.Tensor, rows: Sequence[int] | None = None
    ) -> torch.Tensor:
        """The next token of each row; `rows[r]` is the request of row r (default: r)."""
        if self.greedy:
            return logits.argmax(dim=-1)
        for warper in self.warpers:
            logits = warper(history, logits)
        # Inverse-CDF sampling, one uniform a row from its request's generator: exact for the
        # distribution, and a CPU draws one number instead of multinomial's noise over the whole
        # vocabulary: 2.4x faster for 8 rows of 49k tokens on 2 cores (benchmarks/sampler.py).
        logits = logits.float()
        cdf = (logits - logits.amax(dim=-1, keepdim=True)).exp_().double().cumsum(dim=-1)
        total = cdf[:, -1]  # NaN anywhere in a row reaches its total
        if total.isnan().any():
            raise RuntimeError("RowSampler: NaN logits, no distribution to draw from")
        requests = range(len(cdf)) if rows is None else rows
        u = torch.cat([torch.rand(1, generator=self.generators[i]) for i in requests])
        u = u.to(cdf.device, non_blocking=True)
        # side="right": the first token whose cumulative mass exceeds u, never a zero-mass one
        token = torch.searchsorted(cdf, (u.double() * total)[:, None], side="right")[:, 0]
        return token.clamp_(max=cdf.shape[-1] - 1)


def fast_decoding(model: Any) -> bool:
    """Whether `model` decodes on the static-cache path (`decode_padded(static=True)`): on a CUDA
    device, where transformers' `generate` compiles the decoding step into CUDA graphs, which
    a launch-bound decode (a small model, or any model at a few rows) needs. A CPU runs the
    dynamic cache as fast (no launches to save) and keeps its tokens, and its refilled batches."""
    return input_device(model).type == "cuda"


class ForcedDraw(LogitsProcessor):
    """Hands `model.generate` (run greedily) the token a `RowSampler` drew for each row;
    `requests[r]` is row r's request (default: r)."""

    def __init__(self, sampler: RowSampler, requests: Sequence[int] | None = None) -> None:
        self.sampler = sampler
        self.requests = requests

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        token = self.sampler(input_ids, scores, self.requests)
        forced = torch.full_like(scores, -math.inf)
        return forced.scatter_(1, token[:, None], 0.0)


class StepCounter:
    """A generate streamer that reports tokens per decoding step (the first put is the prompt)."""

    def __init__(self, on_tokens: TokenCallback) -> None:
        self.on_tokens = on_tokens
        self.seen_prompt = False

    def put(self, value: Any) -> None:
        if not self.seen_prompt:
            self.seen_prompt = True
            return
        self.on_tokens(int(value.numel()))

    def end(self) -> None:
        pass


def decode_padded(
    model: Any,
    prompts: Sequence[Sequence[int]],
    sampler: RowSampler,
    *,
    max_new_tokens: int,
    stop_ids: set[int],
    pad_id: int,
    static: bool = False,
    requests: Sequence[int] | None = None,
    on_tokens: TokenCallback | None = None,
    keep_stop: bool = False,
    on_done: DoneCallback | None = None,
) -> list[tuple[list[int], bool]]:
    """`decode_refilled`'s answer from one left-padded `model.generate` batch, which decodes
    until its longest response ends; `requests[r]` is prompt r's request in `sampler` (and
    what `on_done` hears of, for every row, once the batch ends).

    `static`: transformers' static KV cache (`cache_implementation="static"`), whose fixed
    shapes let `generate` compile the decoding step (CUDA graphs) on a GPU; elsewhere it runs
    eagerly and samples the same tokens as the dynamic cache."""
    width = max(map(len, prompts))
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for r, p in enumerate(prompts):
        ids[r, width - len(p) :] = torch.tensor(list(p), dtype=torch.long)
        mask[r, width - len(p) :] = 1
    device = input_device(model)
    # Greedy decoding of the tokens the sampler drew: one random stream per request.
    options: dict[str, Any] = {"do_sample": False, "temperature": None, "top_p": None}
    options["top_k"] = None
    if not sampler.greedy:
        options["logits_processor"] = LogitsProcessorList([ForcedDraw(sampler, requests)])
    if static:
        options["cache_implementation"] = "static"
    with torch.no_grad():  # not inference mode: see decode_refilled
        out = model.generate(
            input_ids=ids.to(device),
            attention_mask=mask.to(device),
            max_new_tokens=max_new_tokens,
            pad_token_id=pad_id,
            eos_token_id=sorted(stop_ids),
            streamer=StepCounter(on_tokens) if on_tokens else None,
            **options,
        )
    decoded = []
    for row in out[:, width:].tolist():  # what follows a stop: padding
        stop = next((k for k, t in enumerate(row) if t in stop_ids), None)
        if stop is None:
            decoded.append((row, False))
        else:
            decoded.append((row[: stop + 1] if keep_stop else row[:stop], True))
    if on_done is not None:
        for r, (tokens, stopped) in enumerate(decoded):
            on_done(r if requests is None else requests[r], tokens, stopped)
    return decoded


def decode_rows(
    model: Any,
    prompts: Sequence[Sequence[int]],
    sampler: RowSampler,
    *,
    max_new_tokens: int,
    stop_ids: set[int],
    pad_id: int,
    slots: int,
    on_tokens: TokenCallback | None = None,
    keep_stop: bool = False,
    static: bool | None = None,
    on_done: DoneCallback | None = None,
) -> list[tuple[list[int], bool]]:
    """`slots` rows at a time: refilled on a CPU (`decode_refilled`), and on a GPU in padded
    batches of `slots` on the static cache (`decode_padded`), whose compiled step costs about
    the same for a full batch as for a few rows, so idle rows cost little and a graph beats
    refilling's changing shapes. `static` overrides the device's choice (`fast_decoding`).
    Both sample each request's own stream, so both give the same tokens. `on_done` hears of
    each response as it ends (refilled), or as its batch does (padded)."""
    if not (fast_decoding(model) if static is None else static):
        return decode_refilled(
            model, prompts, sampler, max_new_tokens=max_new_tokens, stop_ids=stop_ids,
            pad_id=pad_id, slots=slots, on_tokens=on_tokens, keep_stop=keep_stop,
            on_done=on_done,
        )  # fmt: skip
    out: list[tuple[list[int], bool]] = []
    for at in range(0, len(prompts), slots):
        rows = range(at, min(at + slots, len(prompts)))
        out += decode_padded(
            model, [prompts[i] for i in rows], sampler, max_new_tokens=max_new_tokens,
            stop_ids=stop_ids, pad_id=pad_id, static=True, requests=list(rows),
            on_tokens=on_tokens, keep_stop=keep_stop, on_done=on_done,
        )  # fmt: skip
    return out


@dataclass
class _Rows:
    """The running batch: its cache, mask (cache columns + the next input) and per row the
    request, next position and last sampled token."""

    cache: DynamicCache
    mask: torch.Tensor
    requests: list[int]
    positions: torch.Tensor
    last: torch.Tensor


def decode_refilled(
    model: Any,
    prompts: Sequence[Sequence[int]],
    sampler: RowSampler,
    *,
    max_new_tokens: int,
    stop_ids: set[int],
    pad_id: int,
    slots: int,
    on_tokens: TokenCallback | None = None,
    keep_stop: bool = False,
    on_done: DoneCallback | None = None,
) -> list[tuple[list[int], bool]]:
    """Each prompt's sampled tokens (the stop token included only with `keep_stop`, as TRL's
    completions have it) and whether a stop token ended them; request i of `sampler` is
    prompt i. `on_done(i, tokens, stopped)` as each response ends, so a caller can save it
    before the slowest row of the call is done."""
    out: list[list[int]] = [[] for _ in prompts]
    stopped = [False] * len(prompts)
    waiting = list(range(len(prompts)))[::-1]
    rows: _Rows | None = None

    def advance(batch: _Rows, token: torch.Tensor) -> _Rows | None:
        """Record each row's new token; the rows that go on."""
        if on_tokens is not None:
            on_tokens(len(batch.requests))
        keep = []
        for r, (i, t) in enumerate(zip(batch.requests, token.tolist(), strict=True)):
            if t in stop_ids:
                stopped[i] = True
                if keep_stop:
                    out[i].append(t)
            else:
                out[i].append(t)
                if len(out[i]) < max_new_tokens:
                    keep.append(r)
                    continue
            if on_done is not None:
                on_done(i, out[i], stopped[i])
        batch.last = token
        return _select(batch, keep)

    ready: _Rows | None = None  # prefilled rows waiting for a slot
    # No grad, not inference mode: under ZeRO-3 the forward gathers parameters, and the small
    # ones stay gathered (`stage3_param_persistence_threshold`) as tensors made here; made in
    # inference mode they could never again be saved for a backward (the next training
    # forward fails). The same tokens, and no cost seen: testbed-quick, 32 rows, 5 alternating
    # runs on a shared 2-core Zen 4, median time under no_grad 0.98x inference mode's.
    with torch.no_grad():
        while waiting or ready is not None or rows is not None:
            if rows is not None:
                logits = _step(model, rows)
                rows = advance(rows, sampler(rows.last[:, None], logits, rows.requests))
            free = slots - (0 if rows is None else len(rows.requests))
            while free > 0 and (waiting or ready is not None):
                if ready is None:
                    new = [waiting.pop() for _ in range(min(slots, len(waiting)))]
                    ready, logits = _prefill(model, [prompts[i] for i in new], new, pad_id)
                    ready = advance(ready, sampler(ready.last[:, None], logits, new))
                    continue
                joined, ready = _split(ready, free, model.config)
                rows = joined if rows is None else _join(rows, joined)
                free -= len(joined.requests)
    return list(zip(out, stopped, strict=True))


def _prefill(
    model: Any, prompts: list[Sequence[int]], requests: list[int], pad: int
) -> tuple[_Rows, torch.Tensor]:
    """The prompts' rows (caches left-padded together) and their next-token logits."""
    width = max(map(len, prompts))
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for r, p in enumerate(prompts):
        ids[r, width - len(p) :] = torch.tensor(p, dtype=torch.long)
        mask[r, width - len(p) :] = 1
    device = input_device(model)
    ids, mask = ids.to(device), mask.to(device)
    positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
    cache = DynamicCache(config=model.config)
    logits = model(
        input_ids=ids,
        attention_mask=mask,
        position_ids=positions,
        **cache_kwargs(model, cache),
        use_cache=True,
        logits_to_keep=1,
    ).logits[:, -1]
    rows = _Rows(cache, mask, list(requests), positions[:, -1] + 1, ids[:, -1])
    return rows, logits.float()


def _step(model: Any, rows: _Rows) -> torch.Tensor:
    """Feed every row its last token; their next-token logits."""
    rows.mask = torch.cat([rows.mask, rows.mask.new_ones((len(rows.requests), 1))], dim=1)
    logits = model(
        input_ids=rows.last[:, None],
        attention_mask=rows.mask,
        position_ids=rows.positions[:, None],
        **cache_kwargs(model, rows.cache),
        use_cache=True,
    ).logits[:, -1]
    rows.positions = rows.positions + 1
    return logits.float()


def _join(rows: _Rows, new: _Rows) -> _Rows:
    """The running rows and new ones in one batch. Both have cached all but their last token,
    so both masks count cached columns only (the step appends the input's column)."""
    width = max(rows.mask.shape[1], new.mask.shape[1])
    for old_layer, new_layer in zip(rows.cache.layers, new.cache.layers, strict=True):
        old_layer.keys = _cat(old_layer.keys, new_layer.keys, width)
        old_layer.values = _cat(old_layer.values, new_layer.values, width)
    mask = _cat(rows.mask, new.mask, width)
    return _Rows(
        rows.cache,
        mask,
        rows.requests + new.requests,
        torch.cat([rows.positions, new.positions]),
        torch.cat([rows.last, new.last]),
    )


def _cat(a: torch.Tensor, b: torch.Tensor, width: int) -> torch.Tensor:
    """`a` and `b` along the batch, each left-padded with zeros to `width` along the sequence
    (dim 1 of a mask, dim 2 of a cache's keys and values)."""
    dim = 1 if a.dim() == 2 else 2

    def pad(t: torch.Tensor) -> torch.Tensor:
        missing = width - t.shape[dim]
        if missing == 0:
            return t
        shape = list(t.shape)
        shape[dim] = missing
        return torch.cat([t.new_zeros(shape), t], dim=dim)

    return torch.cat([pad(a), pad(b)], dim=0)


def _select(rows: _Rows, keep: list[int]) -> _Rows | None:
    """The kept rows, with the leading columns none of them attends to cut off."""
    if not keep:
        return None
    if len(keep) < len(rows.requests):
        index = torch.tensor(keep, device=rows.mask.device)
        rows.cache.batch_select_indices(index)
        rows.mask = rows.mask[index]
        rows.requests = [rows.requests[r] for r in keep]
        rows.positions = rows.positions[index]
        rows.last = rows.last[index]
        _trim(rows)
    return rows


def _split(rows: _Rows, k: int, config: Any) -> tuple[_Rows, _Rows | None]:
    """The first `k` rows (in `rows`' own cache) and the others (in a new one), or all rows
    and None."""
    if k >= len(rows.requests):
        return rows, None
    rest = _Rows(
        DynamicCache([(layer.keys[k:], layer.values[k:]) for layer in rows.cache.layers], config),
        rows.mask[k:],
        rows.requests[k:],
        rows.positions[k:],
        rows.last[k:],
    )
    for layer in rows.cache.layers:
        layer.keys, layer.values = layer.keys[:k], layer.values[:k]
    rows.mask, rows.requests = rows.mask[:k], rows.requests[:k]
    rows.positions, rows.last = rows.positions[:k], rows.last[:k]
    _trim(rows)
    _trim(rest)
    return rows, rest


def _trim(rows: _Rows) -> None:
    """Cut the leading columns none of the rows attends to."""
    used = rows.mask.any(dim=0).nonzero()
    start = int(used[0]) if len(used) else 0
    if start:
        rows.mask = rows.mask[:, start:]
        for layer in rows.cache.layers:
            layer.keys = layer.keys[:, :, start:]
            layer.values = layer.values[:, :, start:]
