"""The decoding settings every command takes, checked before torch is imported."""

from __future__ import annotations

import math

from traac.errors import TraacError


def check_sampling(temperature: float, top_p: float, max_new_tokens: int | None) -> None:
    """The decoding settings every command takes, checked before any model loads (NaN too)."""
    if not (math.isfinite(temperature) and temperature >= 0):
        raise TraacError(f"--temperature {temperature}: must be a finite number >= 0 (0: greedy)")
    if not 0 < top_p <= 1:
        raise TraacError(f"--top-p {top_p}: must lie in (0, 1]")
    if max_new_tokens is not None and (isinstance(max_new_tokens, bool) or max_new_tokens < 1):
        raise TraacError(f"--max-new-tokens {max_new_tokens}: must be at least 1")
