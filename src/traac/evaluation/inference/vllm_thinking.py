"""Test-time thinking on vLLM: the engine side of `testtime`'s orchestration.

vLLM decodes each think block until its closer (a stop string) or the think budget
(`max_tokens`) and, once traac has appended the interruption or pruned the reasoning, the
answer; every phase hands vLLM the whole batch in one `LLM.generate` call. vLLM keeps no probe
cache, so compression scores the finished trace with one transformers forward (the
orchestration's `reforward` probe). Each request draws its think block and its answer from
two seeds derived from its own (a vLLM request's seed starts a fresh stream), so the answer is
reproducible but not the continuation of the think block's stream that the transformers
engine draws.
"""

from __future__ import annotations

from typing import Any

from transformers import GenerationConfig

from traac.compression.formats import ChatFormat
from traac.evaluation.inference.generation import (
    Sampling,
    VLLMSettings,
    eos_ids,
    load_vllm,
    request_seed,
    vllm_params,
)
from traac.evaluation.inference.think_decode import (
    Decoded,
    DecodeSession,
    Draw,
    Phase,
    Stop,
    ThinkEngine,
    ends_with,
)


class VLLMSession(DecodeSession):
    """One batch's decoding on vLLM (see the module docstring for its seeds): one
    `LLM.generate` call for every row with room left."""

    engine: VLLMThinkEngine

    def __init__(self, engine: VLLMThinkEngine, draw: Draw) -> None:
        if draw.logits_processor is not None:
            raise ValueError("the vLLM engine takes no logits processor")
        super().__init__(engine, draw)

    def _decode(self, phase: Phase) -> list[Decoded]:
        engine, draw = self.engine, self.draw
        name = "think" if phase.think else "answer"
        sampling = Sampling(draw.temperature, draw.top_p, max(phase.budgets[i] for i in phase.live))
        stop = [engine.chat_format.think_close] if phase.think else []
        params = [
            vllm_params(
                sampling,
                request_seed(draw.seeds[phase.requests[i]], name),
                phase.budgets[i],
                stop=stop,
                stop_token_ids=sorted(engine.stop_ids),
            )
            for i in phase.live
        ]
        prompts = [{"prompt_token_ids": phase.rows[i]} for i in phase.live]
        out = []
        for result in engine.llm.generate(prompts, params, use_tqdm=False):
            completion = result.outputs[0]
            out.append(self._decoded(completion, think=phase.think, interrupt=phase.interrupt))
            if phase.on_tokens is not None:
                phase.on_tokens(len(completion.token_ids))
        return out

    def _decoded(self, completion: Any, *, think: bool, interrupt: bool) -> Decoded:
        """How a completion ended, read as the transformers engine would have stopped: at the
        closer's token ids, at an end-of-sequence id, or at its budget."""
        engine = self.engine
        ids = list(completion.token_ids)
        reason: Stop
        if think and ends_with(ids, engine.close_ids):
            ids, reason = ids[: len(ids) - len(engine.close_ids)], "close"
        elif ids and ids[-1] in engine.stop_ids:
            ids, reason = ids[:-1], "eos"
        elif think and completion.stop_reason == engine.chat_format.think_close:
            # The closer ended inside a token (e.g. `>` merged with a newline), where the
            # transformers engine would write on: keep the text before it, as vLLM's does.
            ids = engine.tokenizer.encode(completion.text, add_special_tokens=False)
            reason = "close"
        elif completion.finish_reason == "stop":  # a stop id vLLM left out of token_ids
            reason = "eos"
        elif think and interrupt:
            reason = "budget"
        else:
            reason = "length"
        return Decoded(ids, reason, self._open_at(ids) if think else None)

    def _open_at(self, ids: list[int]) -> int | None:
        """Where the reasoning starts: after the prompt's opener (0) or the model's first."""
        engine = self.engine
        if engine.chat_format.opener_in_prompt:
            return 0
        width = len(engine.open_ids)
        return next(
            (
                k + width
                for k in range(len(ids) - width + 1)
                if ids[k : k + width] == engine.open_ids
            ),
            None,
        )


class VLLMThinkEngine(ThinkEngine):
    """Think and answer decoding with a `vllm.LLM` (or anything with its `generate`); it takes
    whole request lists (`batch_all`), which vLLM schedules itself. `max_positions`:
    --max-model-len (None: vLLM checks its own)."""

    session_type = VLLMSession
    batch_all = True

    def __init__(
        self,
        llm: Any,
        tokenizer: Any,
        chat_format: ChatFormat,
        stop_ids: set[int],
        max_positions: int | None = None,
    ) -> None:
        super().__init__(tokenizer, chat_format, stop_ids, max_positions)
        self.llm = llm


def load_vllm_engine(
    path: str,
    tokenizer: Any,
    chat_format: ChatFormat,
    *,
    seed: int,
    settings: VLLMSettings,
    dtype: str | None,
) -> VLLMThinkEngine:
    """vLLM on the model at `path`, stopping where its generation config and tokenizer say."""
    try:
        configured = GenerationConfig.from_pretrained(path).eos_token_id
    except OSError:  # no generation_config.json: the tokenizer's eos alone
        configured = None
    llm = load_vllm(path, seed, settings, dtype)
    stops = eos_ids(configured, tokenizer)
    return VLLMThinkEngine(llm, tokenizer, chat_format, stops, settings.max_model_len)
