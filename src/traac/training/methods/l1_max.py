"""L1-Max (arXiv:2503.04697): a budget per prompt, written into it; right answers rewarded for
staying near it."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from datasets import Dataset

from traac.compression.length_rewards import l1_max_length_reward, l1_max_prompt, sample_l1_budget
from traac.errors import TraacError
from traac.training.methods.base import GroupReward, LengthMethod, MethodSettings, RunContext
from traac.training.methods.scale import PaperTokens, PerPaperToken

BUDGET_COLUMN = "length_budget"  # each training row's n_gold


@dataclass(frozen=True)
class L1MaxSettings(MethodSettings):
    BLOCK, FLAT_PREFIX = "l1_max", "l1_"
    POSITIVE = ("alpha",)
    NONNEGATIVE = ("delta",)
    COUNTS = ("budget_min",)

    alpha: float = field(default=0.0003, metadata={"help": "l1_max: slope alpha (paper)."})
    delta: float = field(default=0.5, metadata={"help": "l1_max: offset delta (paper)."})
    budget_min: int = field(
        default=100, metadata={"help": "l1_max: smallest budget n_gold in tokens (paper 100)."}
    )
    budget_max: int = field(
        default=4000, metadata={"help": "l1_max: largest budget n_gold in tokens (paper 4000)."}
    )
    budget_in_prompt: bool = field(
        default=True,
        metadata={"help": "l1_max: append \"Think for maximum n_gold tokens.\" to each prompt "
                  "(L1's protocol); off only for a model that cannot read it."},
    )  # fmt: skip

    def check(self, run: RunContext) -> None:
        super().check(run)
        if self.budget_max < self.budget_min:
            raise TraacError(f"l1_max.budget_max: {self.budget_max} is below l1_max.budget_min "
                             f"{self.budget_min}")  # fmt: skip

    def resolved(self, run: RunContext) -> L1MaxSettings:
        if self.budget_max > run.max_completion_length:
            raise TraacError(
                f"l1_max.budget_max: {self.budget_max} exceeds max_completion_length "
                f"{run.max_completion_length}: no response could use that budget; lower "
                "l1_max.budget_max (and budget_min) or raise max_completion_length"
            )
        return self


class L1MaxReward(GroupReward):
    def l1_max_length_reward(
        self, completions: list[Any], completion_ids: list[Sequence[int]], **kwargs: Any
    ) -> list[float]:
        """Per rollout: its budget, length and verdict (no group needed)."""
        budgets = kwargs.get(BUDGET_COLUMN)
        if budgets is None:
            raise TraacError(
                f"mode l1_max: the training rows need a {BUDGET_COLUMN} column "
                "(TRAACTrainer adds one; see with_length_budgets)"
            )
        s = self.settings
        out = l1_max_length_reward(
            [len(ids) for ids in completion_ids],
            self.verdicts(completions, **kwargs),
            [int(b) for b in budgets],
            alpha=s.alpha,
            delta=s.delta,
        )
        return [self.scale * r for r in out]


def with_length_budgets(dataset: Any, settings: L1MaxSettings, seed: int) -> Any:
    """L1-Max's training rows: a `length_budget` column, n_gold ~ U{min..max} per row (seeded,
    drawn once as the authors' data script does), appended to the prompt as "Think for maximum
    n_gold tokens." unless `budget_in_prompt` is off. A dataset that has the column is
    returned as it is."""
    if not isinstance(dataset, Dataset):
        raise TraacError("mode l1_max: the training set must be a datasets.Dataset")
    if BUDGET_COLUMN in dataset.column_names:
        return dataset
    rng = random.Random(seed)
    budgets = [
        sample_l1_budget(rng, low=settings.budget_min, high=settings.budget_max)
        for _ in range(len(dataset))
    ]
    dataset = dataset.add_column(BUDGET_COLUMN, budgets)
    if not settings.budget_in_prompt:
        return dataset
    return dataset.map(
        lambda row: {"prompt": _with_budget(row["prompt"], row[BUDGET_COLUMN])},
        desc="L1-Max budgets",
    )


def _with_budget(prompt: Any, budget: int) -> Any:
    """A prompt (text, or chat messages whose last user turn gets it) with the L1 instruction."""
    if isinstance(prompt, str):
        return l1_max_prompt(prompt, budget)
    last = max(i for i, m in enumerate(prompt) if m["role"] == "user")
    out = [dict(m) for m in prompt]
    out[last]["content"] = l1_max_prompt(out[last]["content"], budget)
    return out


METHOD = LengthMethod(
    name="l1_max",
    paper="L1-Max, arXiv:2503.04697",
    help="L1-Max budget reward, budgets in the prompt",
    correctness=1.0,  # 1[correct] * clip(...)
    reward="l1_max_length_reward",
    settings=L1MaxSettings,
    make=L1MaxReward,
    values=lambda s, run: (
        f"1[correct] clip(alpha (n_gold - n_y) + delta, 0, 1), alpha {s.alpha:g}, delta "
        f"{s.delta:g}, n_gold ~ U{{{s.budget_min}..{s.budget_max}}} per prompt, "
        + ("written into the prompt" if s.budget_in_prompt else "not in the prompt")
    ),
    prepare=with_length_budgets,
    compare=(
        (
            "L1-Max",
            {
                "mode": "l1_max",
                "l1_max": {
                    "alpha": PerPaperToken(0.0003),
                    "budget_min": PaperTokens(100),
                    "budget_max": PaperTokens(4000),
                },
            },
        ),
    ),
)
