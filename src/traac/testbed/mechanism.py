"""The mechanism table of a long build (`traac.evaluation.reports.mechanism`) on its own right
responses: fresh evaluation problems of the long tiers, one sample each at temperature 1, the
right and well-formed responses kept, each step labelled by the teacher's grammar."""

from __future__ import annotations

from typing import Any

import torch

from traac.common.progress import Progress
from traac.compression.first_correct import step_answer
from traac.compression.formats import ChatFormat
from traac.data.testbed_long import CARRIED, LONG_SOURCE, REDUNDANT
from traac.data.testbed_problems import EVAL_SEED, make_items
from traac.evaluation.inference.generation import TransformersBackend
from traac.evaluation.reports.mechanism import Mechanism, Response, mechanism
from traac.testbed.config import TestbedSettings
from traac.testbed.long_traces import reasoning_kinds
from traac.testbed.measure import TAUS, SavedDraws, generate
from traac.testbed.tokenizer import render_prompts
from traac.verification import verify_many


def long_responses(
    model: Any,
    tokenizer: Any,
    config: TestbedSettings,
    per_tier: int,
    seed: int = 0,
    progress: Progress | None = None,
    saved: SavedDraws | None = None,
) -> tuple[list[Response], int]:
    """The right, well-formed responses to `per_tier` evaluation problems a tier (the card's
    problems first), labelled; and how many were drawn (resumed from and kept in `saved`)."""
    m = config.measure
    items = make_items("all", per_tier, EVAL_SEED, "eval", config.tiers, LONG_SOURCE)
    torch.manual_seed(seed)
    drawn = generate(
        model, tokenizer, items, 1, 1.0, m.max_new_tokens, m.batch_size, progress, saved
    )
    verdicts = verify_many([s.item for s in drawn], [s.text for s in drawn])
    prompts = render_prompts(tokenizer, [s.item.question for s in drawn])
    chat_format, out = ChatFormat(), []
    for k, (sample, ok, prompt) in enumerate(zip(drawn, verdicts, prompts, strict=True)):
        parsed = chat_format.parse(sample.text)
        if not (ok and parsed.well_formed and parsed.reasoning.strip()):
            continue
        labels = tuple(reasoning_kinds(parsed.reasoning))
        tier = sample.item.tier or "all"
        out.append(Response(
            f"{sample.item.id}#{k}", prompt, parsed.reasoning, labels,
            tuple(label in REDUNDANT for label in labels), sample.item, tier, TAUS[tier],
        ))  # fmt: skip
    return out, len(drawn)


def long_mechanism(
    model: Any,
    tokenizer: Any,
    config: TestbedSettings,
    per_tier: int,
    seed: int = 0,
    progress: Progress | None = None,
    saved: SavedDraws | None = None,
) -> tuple[Mechanism, list[Response], int]:
    """Both tables on the build's own right responses (sampled resumably with `saved`)."""
    responses, drawn = long_responses(model, tokenizer, config, per_tier, seed, progress, saved)
    backend = TransformersBackend(model, tokenizer)
    found = mechanism(
        model, tokenizer, responses, backend, seed=seed, progress=progress,
        parse_answer=stated_result,
    )  # fmt: skip
    return found, responses, drawn


def stated_result(text: str) -> str | None:
    """The answer a long-grammar step states: its result, not the chain's rest that a carried
    needed step writes after it (`Then 4 + 5 = 9, leaving 9 - 8.` states 9)."""
    return step_answer(text.split(CARRIED, 1)[0])
