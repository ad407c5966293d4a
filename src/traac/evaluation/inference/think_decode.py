"""Decoding a think block and an answer on the transformers backend: the engine side of test-time
thinking (`testtime` orchestrates; `vllm_thinking` is the same
engine side on vLLM).

A `ThinkEngine` opens one `DecodeSession` per batch of prompts; the session decodes token-id
rows, stopping each at end of sequence, its budget or (thinking) the think closer, and tells
how each row ended (`Decoded`). Rows keep one random stream per request across the think and
answer phases. Thinking with a probe scorer, a prompt-free `ProbeCache` built while decoding
gives each ended think block its closer's attention scores, so the orchestration need not
re-forward the trace.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
from transformers import DynamicCache

from traac.common.models import cache_kwargs, input_device
from traac.compression.compression import TokenScores
from traac.compression.formats import ChatFormat
from traac.compression.probe_cache import DEFAULT_PROBE_CHUNK, ProbeCache
from traac.compression.scoring import AttentionScorer, closer_reads, encode_offsets
from traac.errors import TraacError
from traac.evaluation.inference.generation import RowSampler, TokenCallback, stop_ids

# (input_ids so far, next-token logits) -> logits, as transformers' logits processors.
LogitsProcessor = Callable[["torch.Tensor", "torch.Tensor"], "torch.Tensor"]
Stop = Literal["close", "budget", "eos", "length"]


@dataclass
class Decoded:
    """What one row of a decoding batch produced (the stop token excluded from `tokens`).

    `open_at`: index in `tokens` where the reasoning starts (0 when the prompt opened the think
    block; None when the model never wrote the opener: then all of `tokens` is reasoning).
    """

    tokens: list[int]
    stop: Stop  # budget: interrupted at the think budget
    open_at: int | None = None
    scores: TokenScores | None = None  # the cached probe's token scores (closed rows)
    probe_text: str = ""
    probe_tokens: int = 0
    note: str = ""

    @property
    def preamble(self) -> list[int]:
        """The tokens up to and including the opener."""
        return self.tokens[: self.open_at or 0]

    @property
    def reasoning(self) -> list[int]:
        return self.tokens[self.open_at or 0 :]

    @property
    def ended(self) -> bool:
        """The think block closed, by the model or by the budget: the model answers."""
        return self.stop in ("close", "budget")


class _Sampler:
    """The script of `logits_processor` (if any), then a `RowSampler`: greedy at temperature
    0, else one seeded random stream per request."""

    def __init__(self, rows: RowSampler, processor: LogitsProcessor | None) -> None:
        self.rows = rows
        self.processor = processor

    def __call__(
        self, history: torch.Tensor, logits: torch.Tensor, requests: Sequence[int]
    ) -> torch.Tensor:
        if self.processor is not None:
            logits = self.processor(history, logits)
        return self.rows(history, logits, requests)


@dataclass(frozen=True)
class Draw:
    """How a session samples: request i from a stream seeded by `seeds[i]`, at `temperature`
    and `top_p`, after `logits_processor` (if any) has rewritten the logits."""

    temperature: float
    top_p: float
    seeds: Sequence[int]
    logits_processor: LogitsProcessor | None = None


@dataclass(frozen=True)
class Phase:
    """One `decode` call: each row's prompt ids, budget and request (whose stream it draws),
    the rows with room left (`live`), whether the rows think (and stop at the closer) and
    whether a thinking row at its budget is interrupted."""

    rows: list[list[int]]
    budgets: list[int]
    requests: Sequence[int]
    live: list[int]
    think: bool
    interrupt: bool
    on_tokens: TokenCallback | None


class DecodeSession(ABC):
    """One batch's decoding on an engine: each request keeps its random stream from the think
    phase into the answer. Engines differ only in how they decode the live rows."""

    def __init__(self, engine: ThinkEngine, draw: Draw) -> None:
        self.engine = engine
        self.draw = draw

    def decode(
        self,
        rows: list[list[int]],
        budgets: list[int],
        on_tokens: TokenCallback | None,
        *,
        think: bool = False,
        interrupt: bool = False,
        requests: Sequence[int] | None = None,
    ) -> list[Decoded]:
        """Sample each row (prompt token ids) until it stops: end of sequence, its budget or,
        when thinking, the closer; with `interrupt`, a thinking row at its budget stops as
        `budget`. `requests[i]`: the request (prompt index) of row i, whose stream it draws.
        A row without budget samples nothing (stop `length`)."""
        out = [Decoded([], "length") for _ in rows]
        live = [i for i, b in enumerate(budgets) if b > 0]
        if live:
            requests = range(len(rows)) if requests is None else requests
            phase = Phase(rows, budgets, requests, live, think, interrupt, on_tokens)
            for i, decoded in zip(live, self._decode(phase), strict=True):
                out[i] = decoded
        return out

    @abstractmethod
    def _decode(self, phase: Phase) -> list[Decoded]:
        """What each of `phase.live` decoded, in its order."""


class ThinkEngine(ABC):
    """What test-time thinking decodes with (transformers here, vLLM in vllm_thinking): the
    think tags' and end-of-sequence token ids, and one `DecodeSession` per batch of prompts.

    A tokenizer without think tokens splits the closer (SmolLM2: `</`, `think`, `>`): decoding
    stops once the sampled tokens end with all of its pieces."""

    session_type: type[DecodeSession]
    caches_probe = False  # whether ended think rows come with their probe scores

    def __init__(
        self,
        tokenizer: Any,
        chat_format: ChatFormat,
        stop_ids: set[int],
        max_positions: int | None,
    ) -> None:
        self.tokenizer = tokenizer
        self.chat_format = chat_format
        self.stop_ids = stop_ids
        self.max_positions = max_positions  # prompt + response tokens (None: no limit)
        self.close_ids = tokenizer.encode(chat_format.think_close, add_special_tokens=False)
        self.open_ids = tokenizer.encode(chat_format.think_open, add_special_tokens=False)

    def session(
        self,
        temperature: float,
        top_p: float,
        seeds: Sequence[int],
        logits_processor: LogitsProcessor | None = None,
    ) -> DecodeSession:
        """A session drawing request i from a stream seeded by `seeds[i]`."""
        return self.session_type(self, Draw(temperature, top_p, seeds, logits_processor))


class TorchSession(DecodeSession):
    """One batch's decoding on a `TorchThinkEngine`: rows are left-padded into one batch and
    finished rows leave it (and its cache). Thinking with the cached probe, a `ProbeCache`
    keeps the think blocks' prompt-free keys."""

    engine: TorchThinkEngine

    def __init__(self, engine: TorchThinkEngine, draw: Draw) -> None:
        super().__init__(engine, draw)
        rows = RowSampler(draw.temperature, draw.top_p, draw.seeds)
        self.sampler = _Sampler(rows, draw.logits_processor)

    def _decode(self, phase: Phase) -> list[Decoded]:
        engine, live, think = self.engine, phase.live, phase.think
        device = input_device(engine.model)  # a split model's first device
        done: dict[int, Decoded] = {}
        width = max(len(phase.rows[i]) for i in live)
        ids = torch.full((len(live), width), engine.pad_id, dtype=torch.long)
        mask = torch.zeros((len(live), width), dtype=torch.long)
        for r, i in enumerate(live):
            ids[r, width - len(phase.rows[i]) :] = torch.tensor(phase.rows[i], dtype=torch.long)
            mask[r, width - len(phase.rows[i]) :] = 1
        ids, mask = ids.to(device), mask.to(device)
        positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
        history = step_ids = ids
        cache = DynamicCache(config=engine.model.config)
        tokens: dict[int, list[int]] = {i: [] for i in live}
        opened = 0 if think and engine.chat_format.opener_in_prompt else None
        open_at: dict[int, int | None] = dict.fromkeys(live, opened)
        probe = None
        if think and engine.probe_scorer is not None:
            probe = ProbeCache(engine.model, engine.open_ids, len(live), engine.probe_chunk)
        while live:
            n = len(live)
            hidden = engine.model.base_model(
                input_ids=step_ids,
                attention_mask=mask,
                position_ids=positions,
                **cache_kwargs(engine.model.base_model, cache),
                use_cache=True,
            ).last_hidden_state
            token = self.sampler(
                history, engine.logits(hidden[:, -1]), [phase.requests[i] for i in live]
            )
            if phase.on_tokens is not None:
                phase.on_tokens(n)
            history = torch.cat([history, token[:, None]], dim=1)
            keep = []
            for r, (i, t) in enumerate(zip(live, token.tolist(), strict=True)):
                if think and ends_with([*tokens[i], t], engine.close_ids):
                    before = tokens[i][: len(tokens[i]) + 1 - len(engine.close_ids)]
                    done[i] = self._probe(before, open_at[i], probe, r, "close")
                elif t in engine.stop_ids:
                    done[i] = Decoded(tokens[i], "eos", open_at[i])
                else:
                    tokens[i].append(t)
                    if think and open_at[i] is None and ends_with(tokens[i], engine.open_ids):
                        open_at[i] = len(tokens[i])
                    if len(tokens[i]) < phase.budgets[i]:
                        keep.append(r)
                    elif think and phase.interrupt:
                        done[i] = self._probe(tokens[i], open_at[i], probe, r, "budget")
                    else:
                        done[i] = Decoded(tokens[i], "length", open_at[i])
            if not keep:
                break
            if len(keep) < n:  # a step where no row ends copies no index to the device
                index = torch.tensor(keep, device=device)
                cache.batch_select_indices(index)
                history, token = history[index], token[index]
                positions, mask = positions[index], mask[index]
                if probe is not None:
                    probe.select(index)
            live = [live[r] for r in keep]
            step_ids = token[:, None]
            positions = positions[:, -1:] + 1
            mask = torch.cat([mask, mask.new_ones((len(keep), 1))], dim=1)
            if probe is not None:
                probe.feed([_after(tokens[i], open_at[i]) for i in live])
        return [done[i] for i in phase.live]

    def _probe(
        self,
        tokens: list[int],
        open_at: int | None,
        probe: ProbeCache | None,
        row: int,
        stop: Literal["close", "budget"],
    ) -> Decoded:
        """A row whose think block just ended (closed, or interrupted at the budget); with the
        cached probe, its scores: only the tokens past what the probe cache holds (a tail
        shorter than a chunk, the separator, the auxiliary prompt and the closer) run."""
        engine = self.engine
        decoded = Decoded(tokens, stop, open_at)
        reasoning = engine.text(decoded.reasoning)
        if probe is None or not reasoning.strip():
            return decoded  # scored after decoding, not compressed, or nothing to compress
        text = engine.chat_format.probe_text(reasoning, engine.aux_prompt)
        ids, offsets = engine.encode_probe(text)
        if engine.max_positions is not None and len(ids) > engine.max_positions:
            decoded.note = too_long(len(ids), engine.max_positions)
            return decoded
        layers, gated = engine.probe_scorer.layers, engine.probe_scorer.heads == "gated"
        row_scores, ran = probe.score(row, decoded.reasoning, ids, layers, gated)
        decoded.scores = TokenScores(offsets=offsets, scores=row_scores.double().cpu().numpy())
        decoded.probe_text = text
        decoded.probe_tokens = ran
        return decoded


class TorchThinkEngine(ThinkEngine):
    """Think and answer decoding with the model's forward (CPU or GPU, one left-padded batch
    whose finished rows leave it and its cache). `probe_scorer`: the attention scorer whose
    layers and heads the `ProbeCache` reads while thinking (None: no probe during decoding).
    """

    session_type = TorchSession

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        chat_format: ChatFormat,
        *,
        aux_prompt: str,
        probe_scorer: AttentionScorer | None = None,
        probe_chunk: int = DEFAULT_PROBE_CHUNK,
    ) -> None:
        config = model.config.get_text_config()
        positions = getattr(config, "max_position_embeddings", None)
        super().__init__(tokenizer, chat_format, stop_ids(model, tokenizer), positions)
        self.model = model
        self.aux_prompt = aux_prompt
        self.probe_scorer = probe_scorer
        self.probe_chunk = probe_chunk
        self.caches_probe = probe_scorer is not None
        pad = tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else next(iter(self.stop_ids))

    def text(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False) if ids else ""

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = self.model.get_output_embeddings()(hidden).float()
        softcap = getattr(self.model.config.get_text_config(), "final_logit_softcapping", None)
        return torch.tanh(logits / softcap) * softcap if softcap else logits

    def encode_probe(self, text: str) -> tuple[list[int], np.ndarray]:
        ids, offsets = encode_offsets(self.tokenizer, text)
        start, end = (int(x) for x in offsets[-1])
        if not closer_reads(start, end, len(text), len(self.chat_format.think_close)):
            raise TraacError(
                f"the probe text does not end with {self.chat_format.think_close!r} for this "
                f"tokenizer (its last token is {text[start:end]!r}); check the chat format's "
                "think_close"
            )
        return ids, offsets


def _after(tokens: list[int], open_at: int | None) -> list[int]:
    """The tokens sampled after the opener (none before the model wrote it)."""
    return [] if open_at is None else tokens[open_at:]


def ends_with(tokens: Sequence[int], suffix: Sequence[int]) -> bool:
    return len(tokens) >= len(suffix) and list(tokens[len(tokens) - len(suffix) :]) == list(suffix)


def too_long(n: int, limit: int) -> str:
    return f"not compressed: the probe is {n} tokens, more than the model's {limit} positions"
