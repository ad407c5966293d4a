"""The one problem record every part of traac shares: training prompts, evaluation items,
testbed problems. Each item carries what is needed to verify a response to it
(`traac.verification.verify_item`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from traac.errors import TraacError

VerifierKind = Literal["math", "choice", "task", "text"]


@dataclass(frozen=True)
class Item:
    """A problem with its gold answer and verifier.

    `verifier`: `math` (math-verify against `answer`), `choice` (a letter), `text` (normalised
    string match, e.g. BBEH), or `task` (reasoning-gym's own `score_answer` on `entry`, a
    reasoning-gym entry with `metadata.source_dataset`). `tier` is a labelled difficulty tier
    (testbed, SuperGPQA), if any.
    """

    id: str
    question: str
    answer: str
    verifier: VerifierKind = "math"
    data_source: str = "default"
    tier: str | None = None  # the dataset's labelled difficulty tier
    entry: dict[str, Any] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.verifier not in ("math", "choice", "task", "text"):
            raise TraacError(
                f"item {self.id}: verifier {self.verifier!r} is not math, choice, task or text"
            )
        if self.verifier == "task" and not self.entry:
            raise TraacError(f"item {self.id}: verifier 'task' needs its reasoning-gym entry")
