"""DOT, Dynamic Outlier Truncation (Wu et al., "Anti-Length Shift: Dynamic Outlier Truncation
for Training Efficient Reasoning Models", arXiv:2601.03969, ACL 2026; the authors' code,
`apply_length_truncation`, and its runner's defaults).

Only a group whose rollouts are all right is touched. With its lengths L_1..L_G, the cutoff is

    T = floor(mean(L) + alpha * std(L))       (std: the sample standard deviation)

and a rollout with L_i - T >= m is truncated to its first T tokens, whose task reward is
computed again; every other rollout keeps its reward (the authors' alpha 3, m 32 tokens of an
8192-token cap, G 32). traac decodes the first T tokens with the run's tokenizer, verifies them
as the correctness reward verifies a rollout and pays the difference as the length term: -1 (the
paper's reward is 1[correct]) where truncation cut the answer off, 0 where what is left still
answers right.

Where traac departs: the tokens past T stay in the loss (the authors zero their response mask,
so only the first T tokens carry the new advantage), and traac's format term reads the whole
rollout. Within G rollouts no length lies more than (G - 1) / sqrt(G) sample standard deviations
above the mean, so an alpha at or above that never truncates and is refused; unset, alpha is the
authors' 3 at their G = 32 and the same share of that bound at any other G (traac's choice).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from traac.errors import TraacError
from traac.training.methods.base import (
    GroupReward,
    LengthMethod,
    MethodSettings,
    RunContext,
    RunRule,
)
from traac.training.methods.scale import PaperTokens

AUTHORS_ALPHA, AUTHORS_GROUP = 3.0, 32  # the runner's alpha and rollouts per prompt


def largest_z(n: int) -> float:
    """The most sample standard deviations one of `n` values can lie above their mean."""
    return (n - 1) / math.sqrt(n)


@dataclass(frozen=True)
class DOTSettings(MethodSettings):
    BLOCK, FLAT_PREFIX = "dot", "dot_"
    POSITIVE = ("alpha",)
    COUNTS = ("margin",)

    alpha: float | None = field(
        default=None,
        metadata={"help": "dot: alpha of the cutoff floor(mean + alpha x std) of an all-right "
                  "group's lengths (unset: the authors' 3 at their 32 rollouts a group, the "
                  "same share of (G - 1) / sqrt(G) at G = num_generations: 1.35 at 8)."},
    )  # fmt: skip
    margin: int = field(
        default=32,
        metadata={"help": "dot: m, the tokens a rollout must exceed the cutoff by to be "
                  "truncated (the authors' 32)."},
    )  # fmt: skip

    def resolved(self, run: RunContext) -> DOTSettings:
        n, cap = run.num_generations, run.max_completion_length
        alpha = self.alpha
        if alpha is None:  # the authors' alpha as a share of the largest reachable z-score
            alpha = AUTHORS_ALPHA * largest_z(n) / largest_z(AUTHORS_GROUP)
        if alpha >= largest_z(n):
            raise TraacError(
                f"dot.alpha: {alpha:g} never truncates: within num_generations={n} "
                f"rollouts none lies more than {largest_z(n):.3g} standard deviations above the "
                f"mean; lower dot.alpha below {largest_z(n):.3g} or raise num_generations"
            )
        if self.margin >= cap:
            raise TraacError(
                f"dot.margin: {self.margin} tokens is not below max_completion_length {cap}: "
                "nothing could be truncated; lower dot.margin"
            )
        return replace(self, alpha=alpha)


def dot_cutoffs(
    lengths: Sequence[int], correct: Sequence[bool], *, alpha: float, margin: int
) -> list[int | None]:
    """Per rollout of one group, the length DOT truncates it to, or None where it is kept whole:
    only in a group of two or more rollouts, all right, and only those `margin` or more tokens
    over the cutoff floor(mean + alpha * sample std)."""
    if len(lengths) < 2 or not all(correct):
        return [None] * len(lengths)
    cutoff = math.floor(statistics.fmean(lengths) + alpha * statistics.stdev(lengths))
    return [cutoff if n - cutoff >= margin else None for n in lengths]


class DOTReward(GroupReward):
    def dot_length_reward(
        self, completions: list[Any], completion_ids: list[Sequence[int]], **kwargs: Any
    ) -> list[float]:
        """-1 (scaled) for a truncated rollout whose first T tokens no longer answer right, else
        0; the cutoffs come from the whole gathered group."""
        groups, offset, count = self.groups(completions, completion_ids, kwargs)
        s = self.settings
        cuts: list[int | None] = []
        for lengths, correct in groups:
            cuts += dot_cutoffs(lengths, correct, alpha=s.alpha, margin=s.margin)
        mine = cuts[offset : offset + count]
        rows = [i for i, cut in enumerate(mine) if cut is not None]
        out = [0.0] * count
        if rows:
            still = self.truncated_verdicts(completion_ids, mine, rows, kwargs)
            for i, ok in zip(rows, still, strict=True):
                out[i] = 0.0 if ok else -1.0
        self.log(kwargs, "dot/truncated", float(len(rows)))
        self.log(kwargs, "dot/broken", float(sum(r < 0 for r in out)))
        return [self.scale * r for r in out]

    def truncated_verdicts(
        self,
        completion_ids: list[Sequence[int]],
        cuts: list[int | None],
        rows: list[int],
        kwargs: dict[str, Any],
    ) -> list[bool]:
        """Is each truncated rollout's prefix right? Decoded as TRL decodes a completion, and
        verified against its own row's columns (not the trainer's verdicts of the whole)."""
        texts = self.decoded(
            [list(completion_ids[i])[: cuts[i]] for i in rows], "decode the truncated rollouts"
        )
        n = len(completion_ids)
        columns = {
            key: [value[i] for i in rows]
            for key, value in kwargs.items()
            if key != "correct" and isinstance(value, list) and len(value) == n
        }
        return self.verdicts(texts, **columns)


# The authors' m is 32 tokens of an 8192-token cap: 39 at traac's 10k paper scale; alpha unset
# (their 3 at 32 rollouts a group, 1.35 at the recipes' 8).
METHOD = LengthMethod(
    name="dot",
    paper="DOT, arXiv:2601.03969 (Anti-Length Shift)",
    help="DOT: truncate the outlier-long rollouts of all-right groups, re-verify what is left",
    correctness=1.0,  # 1[correct], recomputed on the truncated rollout
    reward="dot_length_reward",
    settings=DOTSettings,
    make=DOTReward,
    values=lambda s, run: (
        f"-1[all right, |y| - T >= m and y[:T] wrong], T = floor(mean + {s.alpha:g} std), "
        f"m {s.margin}"
    ),
    compare=(("DOT", {"mode": "dot", "dot": {"margin": PaperTokens(39)}}),),
    rules=(
        RunRule(
            "dynamic_sampling",
            "it leaves every all-right group out of the loss, and those are the only groups DOT "
            "shapes",
            "set dynamic_sampling none",
            cancels=("drop", "resample"),
        ),
    ),
)
