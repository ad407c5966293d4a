"""Split a reasoning trace into steps at the phrases reasoning models open steps with.

The paper splits before each occurrence of a control phrase ("Wait", "So", ...). The authors'
implementation matched raw substrings, so "So" split "Solve"; here phrases match on word
boundaries, longest first, and the list is configurable.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise

import numpy as np

SPLIT_PHRASES: tuple[str, ...] = (
    "Wait", "Alternatively", "Another angle", "Another approach", "But wait", "Hold on", "Hmm",
    "Maybe", "Looking back", "Okay", "Let me", "First", "Then", "Alright", "Compute", "Correct",
    "Good", "Got it", "I don't see any errors", "I think", "Let me double-check", "Let's see",
    "Now", "Remember", "Seems solid", "Similarly", "So", "Starting", "That's correct",
    "That seems right", "Therefore", "Thus",
)  # fmt: skip


@dataclass(frozen=True)
class Step:
    """A contiguous piece of the text: `text == source[start:end]`."""

    text: str
    start: int
    end: int


@lru_cache(maxsize=32)
def _pattern(phrases: tuple[str, ...]) -> re.Pattern[str]:
    ordered = sorted(set(phrases), key=len, reverse=True)  # longest first
    alternation = "|".join(re.escape(p) for p in ordered)
    return re.compile(rf"(?<!\w)(?:{alternation})(?!\w)")


def split_steps(text: str, phrases: Sequence[str] | None = None) -> list[Step]:
    """Split `text` before every split phrase; the steps partition the text, in order."""
    if not text:
        return []
    phrases = tuple(SPLIT_PHRASES if phrases is None else phrases)
    if any(not p for p in phrases):
        raise ValueError("split phrases must be non-empty strings")
    cuts = [0] if not phrases else [0, *(m.start() for m in _pattern(phrases).finditer(text))]
    bounds = [*sorted(set(cuts)), len(text)]
    return [Step(text[a:b], a, b) for a, b in pairwise(bounds) if b > a]


def token_step_index(steps: Sequence[Step], offsets: np.ndarray) -> np.ndarray:
    """For each token (char offsets `(start, end)`), the index of the step holding its first
    character, or -1 when it lies outside every step (e.g. delimiters around the steps)."""
    offsets = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
    index = np.full(len(offsets), -1, dtype=np.int64)
    if not steps or not len(offsets):
        return index
    starts = np.array([s.start for s in steps], dtype=np.int64)
    ends = np.array([s.end for s in steps], dtype=np.int64)
    k = np.searchsorted(starts, offsets[:, 0], side="right") - 1
    inside = (k >= 0) & (offsets[:, 1] > offsets[:, 0])
    inside &= offsets[:, 0] < ends[np.clip(k, 0, None)]
    index[inside] = k[inside]
    return index


def trim_offsets(text: str, offsets: np.ndarray) -> np.ndarray:
    """Offsets with each token's leading whitespace dropped (a whitespace-only token keeps its
    last character). Byte-level BPE (Qwen3, SmolLM2) joins a space to the next word, and its
    offsets start at the space: " Wait" would then belong to the step before the one "Wait"
    opens. This is what `trim_offsets` does in tokenizers' ByteLevel post-processor."""
    out = np.array(offsets, dtype=np.int64).reshape(-1, 2)
    n = len(text)
    if not n or not len(out):
        return out
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    space = np.isin(codes, _WHITESPACE)
    # The first visible character at or after each position (n where none follows).
    visible = np.minimum.accumulate(np.where(space, n, np.arange(n))[::-1])[::-1]
    start, end = out[:, 0], out[:, 1]
    wide = (end - start >= 2) & (start < n)
    out[wide, 0] = np.minimum(visible[start[wide]], end[wide] - 1)
    return out


_WHITESPACE = np.array([c for c in range(0x3000 + 1) if chr(c).isspace()], dtype=np.uint32)


def steps_to_token_spans(steps: Sequence[Step], offsets: np.ndarray) -> list[tuple[int, int]]:
    """Token span `[first, last + 1)` of each step through a tokenizer's offset mapping.

    A token belongs to the step that holds its first character; a step no token starts in gets
    an empty span at the position where it would be.
    """
    index = token_step_index(steps, offsets)
    spans = []
    for k in range(len(steps)):
        hits = np.flatnonzero(index == k)
        if len(hits):
            spans.append((int(hits[0]), int(hits[-1]) + 1))
        else:
            later = np.flatnonzero(index > k)
            at = int(later[0]) if len(later) else len(index)
            spans.append((at, at))
    return spans
