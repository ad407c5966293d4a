"""The `traac experiment compare` variants that change one thing of TRAAC at a time, to find
why it falls behind the length reward on a real model (docs/results.md#smollm2-think-full-length),
and the contrasts the report pairs them by: each against TRAAC as the recipe has it.

Each name is short enough to type: `--variants "TRAAC, answer-only copies"`.
"""

from __future__ import annotations

from typing import Any

ISOLATING: dict[str, dict[str, Any]] = {
    # The copies' re-answers trained on, their think blocks masked (beyond the paper).
    "TRAAC, answer-only copies": {"mode": "traac", "copy_loss": "answer_only"},
}
ISOLATING_CONTRASTS: tuple[tuple[str, str, str], ...] = (
    ("copies' think blocks masked from the loss", "TRAAC", "TRAAC, answer-only copies"),
)
