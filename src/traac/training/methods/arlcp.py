"""ARLCP, Adaptive Reflection and Length Coordinated Penalty (Yu et al., "Stop Unnecessary
Reflection", ICLR 2026, ZeweiYu1/ARLCP: `src/rm.py: arlcp_rm`, its group statistics in
`verl/workers/reward_manager/naive.py`): a right answer loses up to 0.2 of its reward, split
between how much it reflects and how long it is, each against the group's right answers.

Per right rollout i, with c_i its reflection keywords (the authors' 13, whole words, any case,
counted in the decoded completion) and l_i its tokens, the means and sample standard deviations
of c and l over the group's right rollouts (a deviation of one rollout is 1):

    r_i = 1 - w1 sigmoid(z(c_i)) - w2 sigmoid(z(l_i)),   z(x_i) = (x_i - mean x) / (std x + 1e-6)
    w1  = 0.05 if c_i <= 40, 0.1 if c_i <= 80, else 0.15;   w2 = 0.2 - w1

and a wrong rollout earns 0. The two thresholds are settings (`reflection_low`,
`reflection_high`), scaled to the recipe's response cap in `experiment compare`; the
authors train it with RLOO, traac with GRPO (docs/peer_methods.md).
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
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

KEYWORDS = ("wait", "alternatively", "hold on", "another thought", "verify", "think again", "but",
            "however", "alternative", "check", "double-check", "oh", "hmm")  # fmt: skip
PATTERN = re.compile(r"\b(" + "|".join(re.escape(k) for k in KEYWORDS) + r")\b", re.IGNORECASE)
WEIGHTS = (0.05, 0.1, 0.15)  # w1 at or below the low threshold, at or below the high, above
TOTAL = 0.2  # w1 + w2
EPS = 1e-6


@dataclass(frozen=True)
class ARLCPSettings(MethodSettings):
    BLOCK, FLAT_PREFIX = "arlcp", "arlcp_"
    COUNTS = ("reflection_low", "reflection_high")

    reflection_low: int = field(
        default=40,
        metadata={"help": "arlcp: up to this many reflection keywords, the reflection weight w1 "
                  "is 0.05 (the authors' 40)."},
    )  # fmt: skip
    reflection_high: int = field(
        default=80,
        metadata={"help": "arlcp: up to this many (and above reflection_low), w1 is 0.1; "
                  "above it 0.15 (the authors' 80)."},
    )  # fmt: skip

    def resolved(self, run: RunContext) -> ARLCPSettings:
        if self.reflection_high < self.reflection_low:
            raise TraacError(
                f"arlcp.reflection_high: {self.reflection_high} is below "
                f"arlcp.reflection_low {self.reflection_low}; raise it to at least that"
            )
        return self


def reflections(text: str) -> int:
    """The authors' reflection count: keyword matches, whole words, any case."""
    return len(PATTERN.findall(text))


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def _mean_std(values: list[int]) -> tuple[float, float]:
    """Mean and sample standard deviation (1 for a single value), as the authors compute them."""
    if not values:
        return 0.0, 1.0
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 1.0


def arlcp_penalty(
    lengths: Sequence[int], correct: Sequence[bool], counts: Sequence[int], low: int, high: int
) -> list[float]:
    """ARLCP's penalty on one group's right rollouts (its reward minus 1[correct])."""
    right = [i for i, ok in enumerate(correct) if ok]
    mean_c, std_c = _mean_std([counts[i] for i in right])
    mean_l, std_l = _mean_std([lengths[i] for i in right])
    out = [0.0] * len(correct)
    for i in right:
        w1 = WEIGHTS[0] if counts[i] <= low else WEIGHTS[1] if counts[i] <= high else WEIGHTS[2]
        reflection = _sigmoid((counts[i] - mean_c) / (std_c + EPS))
        length = _sigmoid((lengths[i] - mean_l) / (std_l + EPS))
        out[i] = -w1 * reflection - (TOTAL - w1) * length
    return out


class ARLCPReward(GroupReward):
    def arlcp_length_reward(
        self, completions: list[Any], completion_ids: list[Sequence[int]], **kwargs: Any
    ) -> list[float]:
        """The penalty on every group of the gathered batch; this process's slice, scaled."""
        texts = self.decoded(completion_ids, "count reflection keywords")
        groups, offset, count = self.groups(completions, completion_ids, kwargs)
        counts, _ = self.gathered([reflections(t) for t in texts])
        n, s = len(groups[0][0]) if groups else 0, self.settings
        out: list[float] = []
        for g, (lengths, correct) in enumerate(groups):
            group_counts = counts[g * n : (g + 1) * n]
            low, high = s.reflection_low, s.reflection_high
            out += arlcp_penalty(lengths, correct, group_counts, low, high)
        return [self.scale * r for r in out[offset : offset + count]]


# RLOO's advantage is the reward less the others' mean (the centred reward times G / (G - 1)), no
# division by a standard deviation: GRPO stands in for it only unscaled.
SCALE_NONE = RunRule(
    "scale_rewards",
    "its advantage (RLOO's) is the centred reward, which TRL would divide by a standard deviation",
    "set scale_rewards none (or leave it unset)",
    needs="none",
)

METHOD = LengthMethod(
    name="arlcp",
    paper="ARLCP, ICLR 2026 (ZeweiYu1/ARLCP)",
    help="ARLCP: reflection and length penalties against the group's right answers",
    correctness=1.0,  # acc = 1, minus the penalties
    reward="arlcp_length_reward",
    settings=ARLCPSettings,
    make=ARLCPReward,
    values=lambda s, run: (
        "-w1 sigmoid(z(reflections)) - (0.2 - w1) sigmoid(z(length)) over right answers, w1 "
        f"0.05 / 0.1 / 0.15 up to {s.reflection_low} / {s.reflection_high} / above"
    ),
    compare=(
        (
            "ARLCP",
            {
                "mode": "arlcp",
                "scale_rewards": "none",
                "arlcp": {"reflection_low": PaperTokens(40), "reflection_high": PaperTokens(80)},
            },
        ),
    ),
    rules=(SCALE_NONE,),
)
