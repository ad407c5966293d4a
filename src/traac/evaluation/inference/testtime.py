"""Thinking at test time: a think budget that interrupts, and attentive compression.

`ThinkingGenerator` lets the model think, then answer, with two optional interventions:

- `compress_tau` (the paper's test-time variant, docs/method.md#test-time): once the think
  block closes, compress the reasoning at this fixed tau with compression.py's eviction rule
  (gate and cap included) and let the model write its answer from
  `prompt + chat_format.answer_prefix(compressed)`.
- `think_budget` B: a model that has written B tokens without closing its think block is
  interrupted the paper's way: the auxiliary prompt and the closer are appended (the
  separator first, as in the probe) and the model answers. Serving stacks truncate instead;
  this keeps the response well formed and tells the model to sum up. With `compress_tau` too,
  the interrupted reasoning is first pruned by the attention probe, whose text is exactly what
  the interruption appends (opener + reasoning + auxiliary prompt + closer), so the answer is
  written from the kept steps, the auxiliary prompt and the closer: truncating and compressing
  differ only in the reasoning kept. A think block closed within the budget is answered
  plainly (no `compress_tau`) or after test-time compression (with it). B counts every token
  the model wrote before its closer (the opener included, as docs/method.md#evaluation counts
  think tokens).

A response that never closes its think block (end of sequence, or `max_new_tokens` reached
before the budget) is not compressed: it stands as generated.

The probe reuses a KV cache built while decoding: beside the decoding batch runs a prompt-free
`ProbeCache` (traac.compression.probe_cache), fed every `probe_chunk` (32) sampled tokens, so when a
sequence closes its think block only a short suffix runs to give the closer's attention row
(the tests compare it to `AttentionScorer`'s to 1e-5); the decoding batch itself is left as it
is. `probe="reforward"` keeps no probe cache and runs `AttentionScorer` once decoding is done.
Without `compress_tau` no probe runs at all.

`scoring_model` (beyond the paper) scores the steps with another model than the one that
decodes, through its own tokenizer (steps map to it through character offsets): the probe cache
is built from the decoding model's own forwards, so a foreign scorer re-runs the probe text
after decoding. The token counts of a sample stay the decoding model's.

Prompts are exact model input text (chat template applied, as `traac eval` builds them);
`render_prompt` (traac.evaluation.harness.prompts) makes one from a question or a message list. The
model decodes exactly as without compression up to the closer (nothing is forced), so the
comparison with plain generation isolates compression. The reasoning is what `ChatFormat.parse`
calls it: the text after the first opener the model wrote (after the prompt's, for formats that
open it there). The answer is then written from the prompt + the response up to and including
that opener (normally just the opener: `answer_prefix(compressed)`) + the compressed reasoning +
the closer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch

from traac.compression.compression import CompressionResult, ScoreRequest, TokenScores, count_tokens
from traac.compression.factory import build_compressor
from traac.compression.formats import ChatFormat, resolve_chat_format
from traac.compression.probe_cache import DEFAULT_PROBE_CHUNK, has_sliding_layers
from traac.compression.settings import CompressionSettings, check_tau
from traac.errors import TraacError
from traac.evaluation.inference.engines import PROBE_MODES
from traac.evaluation.inference.generation import TokenCallback, request_seed
from traac.evaluation.inference.responses import ThinkingSample
from traac.evaluation.inference.think_decode import (
    Decoded,
    LogitsProcessor,
    ThinkEngine,
    TorchThinkEngine,
    too_long,
)

DEFAULT_MAX_NEW_TOKENS = 1024
ProbeMode = Literal["cached", "reforward"]


@dataclass(frozen=True)
class _StoredScores:
    """A `Scorer` that answers with the attention scores computed during decoding."""

    tokenizer: Any
    scores: dict[str, TokenScores]
    gated: bool = True

    def score(self, requests: Sequence[ScoreRequest]) -> list[TokenScores]:
        return [self.scores[r.probe] for r in requests]


class ThinkingGenerator:
    """Generates with a think budget and/or test-time compression (see the module docstring).

    `compress_tau`: the fixed target rate of compression (None: no compression, no probe).
    `think_budget`: tokens the model may write before its closer (None: no budget).
    `settings`: the compression settings (the attention scorer only: the closer's attention is
    what the probe cache computes; `aux_prompt` is also what an interruption appends). `probe`:
    `cached` (a prompt-free cache built while decoding, fed every `probe_chunk` tokens; the
    default) or `reforward` (the whole probe text through `AttentionScorer` after decoding);
    both give the same scores. `scoring_model` and `scoring_tokenizer`: another model that
    scores the steps (None: `model` itself); it forces `reforward`, and with an `engine` that
    decodes, `model` may then be None.
    """

    def __init__(
        self,
        model: Any | None,
        tokenizer: Any,
        chat_format: ChatFormat | None = None,
        *,
        compress_tau: float | None = None,
        think_budget: int | None = None,
        settings: CompressionSettings | None = None,
        probe: ProbeMode = "cached",
        probe_chunk: int = DEFAULT_PROBE_CHUNK,
        scorer_batch_size: int = 8,
        engine: ThinkEngine | None = None,
        scoring_model: Any | None = None,
        scoring_tokenizer: Any | None = None,
    ) -> None:
        settings = settings or CompressionSettings()
        if compress_tau is not None:
            compress_tau = check_tau("compress_tau", compress_tau)
        if think_budget is not None and (isinstance(think_budget, bool) or think_budget < 1):
            raise TraacError(f"think_budget: {think_budget} must be at least 1 token")
        if not settings.scorer_kind.attention:
            raise TraacError(
                f"scorer {settings.scorer}: test-time compression reads the closer's attention; "
                "use the attention scorer (traac compress scores with the others)"
            )
        if probe not in PROBE_MODES:
            raise TraacError(f"probe {probe!r}: use one of {', '.join(PROBE_MODES)}")
        if probe_chunk < 1:
            raise TraacError(f"probe_chunk {probe_chunk}: must be at least 1")
        if (scoring_model is None) != (scoring_tokenizer is None):
            raise TraacError("a scoring model needs its tokenizer: pass both or neither")
        if scoring_model is not None or (engine is not None and not engine.caches_probe):
            probe = "reforward"  # no probe cache: one forward over the trace after decoding
        prober = model if scoring_model is None else scoring_model
        if (model is None and engine is None) or (prober is None and compress_tau is not None):
            raise TraacError(
                "test-time compression probes with a transformers model: pass one (and an "
                "engine to decode with another backend)"
            )
        self.model = model
        self.tokenizer = tokenizer
        self.scoring_tokenizer = tokenizer if scoring_tokenizer is None else scoring_tokenizer
        self.chat_format = chat_format or resolve_chat_format("auto", tokenizer=tokenizer)
        self.tau = compress_tau
        self.think_budget = think_budget
        self.aux_prompt = settings.aux_prompt
        self.probe = probe
        fmt = self.chat_format
        self.compressor = (
            None
            if prober is None
            else build_compressor(
                settings, prober, self.scoring_tokenizer, fmt, batch_size=scorer_batch_size
            )
        )
        self.foreign = scoring_model is not None
        if self.caches_probe and has_sliding_layers(model):
            raise TraacError(
                "probe 'cached': the model uses sliding-window attention, whose cache does not "
                "hold the whole reasoning; use probe 'reforward'"
            )
        self.engine: ThinkEngine = engine or TorchThinkEngine(
            model,
            tokenizer,
            fmt,
            aux_prompt=self.aux_prompt,
            probe_scorer=self.compressor.scorer if self.caches_probe else None,  # type: ignore
            probe_chunk=probe_chunk,
        )
        self.max_positions = self.engine.max_positions
        self.probe_positions: int | None = self.max_positions  # what a probe text may fill
        if scoring_model is not None:
            config = scoring_model.config.get_text_config()
            self.probe_positions = getattr(config, "max_position_embeddings", None)
        self.close_ids = tokenizer.encode(fmt.think_close, add_special_tokens=False)

    @property
    def caches_probe(self) -> bool:
        """Whether decoding feeds a prompt-free probe cache (compressing, cached probe)."""
        return self.tau is not None and self.probe == "cached"

    # ----------------------------------------------------------------------------------------

    def generate(
        self,
        prompts: Sequence[str],
        *,
        max_new_tokens: int | None = None,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int = 0,
        keys: Sequence[str] | None = None,
        logits_processor: LogitsProcessor | None = None,
        on_tokens: TokenCallback | None = None,
    ) -> list[ThinkingSample]:
        """Think (within the budget), compress, answer for one batch of prompts (exact model
        input text).

        `max_new_tokens` bounds all sampled tokens of a response, think block and answer
        together, so compression never gives the answer more room than the model would have had
        (an interruption's auxiliary prompt is not sampled and not counted); None: as many as
        fit the model's context, at most 1024. A think budget at or above it never interrupts.
        Each prompt samples from its own stream, seeded by `seed` and its key (`keys`, default
        its index), so a prompt's response does not depend on the batch it is in.
        """
        if not prompts:
            return []
        for k, p in enumerate(prompts):
            if not isinstance(p, str) or not p.strip():
                raise TraacError(f"prompt {k}: empty; give the model some text to answer")
        prompt_ids = [self.tokenizer.encode(p, add_special_tokens=False) for p in prompts]
        longest = max(map(len, prompt_ids))
        room = None if self.max_positions is None else self.max_positions - longest
        if max_new_tokens is None:
            max_new_tokens = (
                DEFAULT_MAX_NEW_TOKENS if room is None else min(room, DEFAULT_MAX_NEW_TOKENS)
            )
        elif room is not None and max_new_tokens > room:
            raise TraacError(
                f"a prompt of {longest} tokens + max_new_tokens {max_new_tokens} exceeds the "
                f"model's {self.max_positions} positions; lower max_new_tokens to at most {room}"
            )
        if max_new_tokens < 1:
            raise TraacError(
                f"max_new_tokens {max_new_tokens}: no room for a response (a prompt of "
                f"{longest} tokens, {self.max_positions} positions)"
            )
        names = keys if keys is not None else [str(k) for k in range(len(prompts))]
        seeds = [request_seed(seed, name) for name in names]
        session = self.engine.session(temperature, top_p, seeds, logits_processor)
        n = len(prompts)
        budget = self.think_budget
        interrupts = budget is not None and budget < max_new_tokens
        think_limit = budget if budget is not None and interrupts else max_new_tokens
        with torch.no_grad():
            think = session.decode(
                prompt_ids, [think_limit] * n, on_tokens, think=True, interrupt=interrupts
            )
            ended = [i for i in range(n) if think[i].ended]
            compressions = self._compress(think, ended) if self.tau is not None else {}
            prefixes = {i: self._answer_prefix(think[i], compressions.get(i)) for i in ended}
            answered = session.decode(
                [prompt_ids[i] + prefixes[i] for i in ended],
                [max_new_tokens - len(think[i].tokens) - 1 for i in ended],  # the closer too
                on_tokens,
                requests=ended,
            )
        answers = dict(zip(ended, answered, strict=True))
        return [
            self._sample(prompts[i], think[i], compressions.get(i), answers.get(i), prefixes.get(i))
            for i in range(n)
        ]

    def _interruption(self, reasoning: str) -> str:
        """What an interruption appends before the closer: separator and auxiliary prompt."""
        return self.chat_format.aux_separator(reasoning) + self.aux_prompt

    def _answer_prefix(self, think: Decoded, comp: CompressionResult | None) -> list[int]:
        """What follows the prompt when the model answers: its tokens up to the opener, the
        compressed reasoning, the auxiliary prompt if interrupted, and the closer; where nothing
        was evicted, its own tokens (then answering a natural close is a plain continuation)."""
        interrupted = think.stop == "budget"
        if comp is not None and comp.text != comp.reasoning:
            tail = self._interruption(comp.text) if interrupted else ""
            rest = self.tokenizer.encode(
                comp.text + tail + self.chat_format.think_close, add_special_tokens=False
            )
            return [*think.preamble, *rest]
        appended: list[int] = []
        if interrupted:
            tail = self._interruption(self._text(think.reasoning))
            appended = self.tokenizer.encode(tail, add_special_tokens=False)
        return [*think.tokens, *appended, *self.close_ids]

    def _sample(
        self,
        prompt: str,
        think: Decoded,
        comp: CompressionResult | None,
        answer: Decoded | None,
        prefix: list[int] | None,
    ) -> ThinkingSample:
        """One prompt's generation. Under a think budget it says whether the budget interrupted
        it (None without one); with compression, its `extra` holds what an evaluation record
        keeps of it (`ThinkingSample.record_fields`)."""
        budget = self.think_budget is not None
        common: dict[str, Any] = {
            "prompt": prompt,
            "reasoning": self._text(think.reasoning),
            "interrupted": think.stop == "budget" if budget else None,
            "budget_think_tokens": len(think.tokens) if budget else None,
            "think_tokens": len(think.tokens),
            "reasoning_tokens": len(think.reasoning),
        }
        if answer is None or prefix is None:  # never closed: as generated
            sample = ThinkingSample(
                text=self._text(think.tokens),
                token_ids=tuple(think.tokens),
                finish_reason="stop" if think.stop == "eos" else "length",
                compression=None,
                answer="",
                closed=False,
                answer_tokens=0,
                probe_tokens=0,
                **common,
            )
        else:
            text = self._text(answer.tokens)
            kept = common["reasoning"] if comp is None else comp.text
            tail = self._interruption(kept) if think.stop == "budget" else ""
            close = self.chat_format.think_close
            sample = ThinkingSample(
                text=f"{self._text(think.preamble)}{kept}{tail}{close}{text}",
                token_ids=(*prefix, *answer.tokens),
                finish_reason="stop" if answer.stop == "eos" else "length",
                compression=comp,
                answer=text,
                closed=True,
                answer_tokens=len(answer.tokens),
                probe_tokens=think.probe_tokens,
                note=think.note,
                **common,
            )
        if self.tau is None:
            return sample
        return dataclasses.replace(sample, extra=sample.record_fields())

    # ----------------------------------------------------------------------------------------

    def _text(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False) if ids else ""

    def _own_counts(self, result: CompressionResult) -> CompressionResult:
        """A foreign scorer's result with its token counts in the decoding model's tokens."""
        before = count_tokens(self.tokenizer, result.reasoning)
        after = (
            before if result.text == result.reasoning else count_tokens(self.tokenizer, result.text)
        )
        return dataclasses.replace(result, tokens_before=before, tokens_after=after)

    def _compress(self, think: list[Decoded], rows: list[int]) -> dict[int, CompressionResult]:
        """Compress the rows whose think block ended, with the stored or re-forward scores."""
        assert self.tau is not None
        reasonings = {i: self._text(think[i].reasoning) for i in rows}
        out: dict[int, CompressionResult] = {}
        if self.probe == "cached":
            stored = {d.probe_text: d.scores for d in think if d.scores is not None}
            compressor = dataclasses.replace(
                self.compressor, scorer=_StoredScores(self.tokenizer, stored)
            )
            unscored = [i for i in rows if think[i].scores is None]
        else:
            compressor = self.compressor
            unscored = []
            for i in rows:
                text = self.chat_format.probe_text(reasonings[i], self.aux_prompt)
                n = count_tokens(self.scoring_tokenizer, text)
                if self.probe_positions is not None and n > self.probe_positions:
                    think[i].note = too_long(n, self.probe_positions)
                    unscored.append(i)
                elif reasonings[i].strip():
                    think[i].probe_tokens = n
        todo = [i for i in rows if i not in unscored]
        for i, result in zip(
            todo, compressor([reasonings[i] for i in todo], [self.tau] * len(todo)), strict=True
        ):
            out[i] = self._own_counts(result) if self.foreign else result
        for i in unscored:  # empty reasoning or a probe too long: nothing evicted
            tokens = count_tokens(self.tokenizer, reasonings[i])
            out[i] = CompressionResult.unchanged(reasonings[i], tokens)
        return out


# --------------------------------------------------------------------------------------------
