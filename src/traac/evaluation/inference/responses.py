"""What an inference backend returns: a `Generation` per sampled response, a `ThinkingSample`
with test-time thinking (its think block, what compression did to it, the answer). The
evaluation records keep their fields (`traac.evaluation.harness.results`), and
`recorded_compression` reads a record's test-time fields back for the step viewer."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from traac.compression.compression import CompressionResult
from traac.compression.segmentation import Step

FinishReason = Literal["stop", "length"]


@dataclass(frozen=True)
class Generation:
    """One sampled response: its text (special think tags kept, end-of-sequence dropped) and
    the generated token ids behind it. Under a think budget, `interrupted` says whether the
    budget closed the think block and `budget_think_tokens` how many tokens the model wrote
    before its closer or the interruption (None: no budget)."""

    text: str
    token_ids: tuple[int, ...]
    finish_reason: FinishReason
    interrupted: bool | None = None
    budget_think_tokens: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # more fields for the sample's record


@dataclass(frozen=True, kw_only=True)
class ThinkingSample(Generation):
    """A generation of test-time thinking (`testtime`): its think block, what
    compression did to it, and the answer; `text` is the whole response.

    `compression` is None when nothing was compressed (no `compress_tau`, or the think block
    never closed). `closed`: the think block closed, by the model or by the budget
    (`interrupted`: then the auxiliary prompt and the closer were appended); a block that never
    closed leaves `answer` empty and `text` as generated. `token_ids` are the response's
    tokens after the prompt, as the model read them when it answered: up to the opener, the
    (compressed) reasoning, the auxiliary prompt if interrupted, the closer, the answer.
    `think_tokens`: tokens the model wrote before its closer or the interruption (what the
    budget bounds); `reasoning_tokens` those after the opener; `probe_tokens` how many tokens
    the probe forward ran (0: no probe).
    """

    prompt: str
    reasoning: str
    compression: CompressionResult | None
    answer: str
    closed: bool
    think_tokens: int
    reasoning_tokens: int
    answer_tokens: int
    probe_tokens: int
    note: str = ""

    @property
    def compressed_reasoning(self) -> str:
        return self.reasoning if self.compression is None else self.compression.text

    @property
    def tokens_before(self) -> int:
        """Reasoning tokens before compression."""
        return self.reasoning_tokens if self.compression is None else self.compression.tokens_before

    @property
    def tokens_after(self) -> int:
        """Reasoning tokens the answer was written from."""
        return self.reasoning_tokens if self.compression is None else self.compression.tokens_after

    @property
    def tokens_saved(self) -> int:
        return self.tokens_before - self.tokens_after

    def to_dict(self) -> dict[str, Any]:
        """The whole sample as `traac generate --json` writes it (steps with their text, score
        and whether each was kept)."""
        comp = self.compression
        steps = (
            []
            if comp is None
            else [
                {"text": s.text, "score": float(score), "kept": bool(kept)}
                for s, score, kept in zip(comp.steps, comp.scores, comp.kept, strict=True)
            ]
        )
        return {
            "prompt": self.prompt,
            "reasoning": self.reasoning,
            "compressed_reasoning": self.compressed_reasoning,
            "answer": self.answer,
            "response": self.text,
            "closed": self.closed,
            "interrupted": bool(self.interrupted),
            "finish_reason": self.finish_reason,
            "think_tokens": self.think_tokens,
            "reasoning_tokens_before": self.tokens_before,
            "reasoning_tokens_after": self.tokens_after,
            "tokens_saved": self.tokens_saved,
            "answer_tokens": self.answer_tokens,
            "response_tokens": len(self.token_ids),
            "uniformity": None if comp is None else comp.uniformity,
            "eviction_fraction": None if comp is None else comp.eviction_fraction,
            "steps_evicted": 0 if comp is None else comp.n_evicted,
            "steps": steps,
            "note": self.note,
        }

    def record_fields(self) -> dict[str, Any]:
        """What an evaluation record keeps of a compressed sample, beside its own fields (so
        prefixed `ttc_`): tokens saved, and the steps (where each ends in the original reasoning,
        its score, kept or not) that `recorded_compression` reads back for the step viewer."""
        comp = self.compression
        return {
            "ttc_closed": self.closed,
            "ttc_reasoning_tokens_before": self.tokens_before,
            "ttc_reasoning_tokens_after": self.tokens_after,
            "ttc_tokens_saved": self.tokens_saved,
            "ttc_generated_tokens": self.reasoning_tokens + self.answer_tokens,
            "ttc_steps": 0 if comp is None else len(comp.kept),
            "ttc_steps_evicted": 0 if comp is None else comp.n_evicted,
            "ttc_uniformity": None if comp is None else comp.uniformity,
            "ttc_eviction_fraction": None if comp is None else comp.eviction_fraction,
            "ttc_original_reasoning": self.reasoning,
            "ttc_step_ends": [] if comp is None else [s.end for s in comp.steps],
            "ttc_step_scores": [] if comp is None else [float(v) for v in comp.scores],
            "ttc_step_kept": [] if comp is None else [bool(k) for k in comp.kept],
        }


def recorded_compression(fields: Mapping[str, Any]) -> CompressionResult | None:
    """The compression an evaluation record's test-time fields describe
    (`ThinkingSample.record_fields`), for the step viewer; None where the record holds no scored
    steps."""
    kept = fields.get("ttc_step_kept")
    if not kept:
        return None
    reasoning = fields["ttc_original_reasoning"]
    ends = list(fields["ttc_step_ends"])
    steps = [Step(reasoning[a:b], a, b) for a, b in zip([0, *ends[:-1]], ends, strict=True)]
    return CompressionResult(
        reasoning=reasoning,
        steps=steps,
        scores=np.asarray(fields["ttc_step_scores"], dtype=np.float64),
        kept=[bool(k) for k in kept],
        uniformity=fields["ttc_uniformity"],
        eviction_fraction=fields["ttc_eviction_fraction"],
        text="".join(s.text for s, k in zip(steps, kept, strict=True) if k),
        tokens_before=fields["ttc_reasoning_tokens_before"],
        tokens_after=fields["ttc_reasoning_tokens_after"],
    )
