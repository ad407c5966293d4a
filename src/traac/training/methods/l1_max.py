"""L1-Max (arXiv:2503.04697): a budget per prompt, written into it; right answers rewarded for
staying near it."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from datasets import Dataset

from traac.errors import TraacError
from traac.training.methods.base import (
    GroupReward,
    LengthMethod,
    MethodSettings,
    RunContext,
    check_number,
    checked_count,
    checked_group,
)
from traac.training.methods.scale import PaperTokens, PerPaperToken

BUDGET_COLUMN = "length_budget"  # each training row's n_gold
L1_MAX_INSTRUCTION = "Think for maximum {budget} tokens."


def l1_max_length_reward(
    lengths: Sequence[int],
    correct: Sequence[bool],
    budgets: Sequence[int],
    *,
    alpha: float = 0.0003,
    delta: float = 0.5,
) -> list[float]:
    """L1-Max's budget reward less its correctness: `r - 1[correct]`, one value per rollout.

    Aggarwal and Welleck, "L1: Controlling How Long A Reasoning Model Thinks With Reinforcement
    Learning", arXiv:2503.04697, section 3 (LCPO-Max):
    `r(y, y_gold, n_gold) = 1[y = y_gold] * clip(alpha * (n_gold - n_y) + delta, 0, 1)`, with
    `n_gold` the budget written into the prompt ("Think for maximum n_gold tokens.") and `n_y`
    the response length. delta = 0.5 makes a right answer slightly over budget still beat a
    wrong one; alpha = 0.0003 is the paper's slope. The authors' code writes the same reward as
    `(clip(alpha * (n_gold - n_y), -1, 1) + 1) / 2` (half the slope); traac follows the paper.

    The reward is multiplicative, so its length part is `r - 1[correct]`: 0 for a wrong rollout,
    `clip(...) - 1` (in [-1, 0]) for a right one. A trainer adding correctness with weight 1 gets
    the paper's `r` exactly. `budgets[i]` is rollout i's `n_gold` (one prompt's rollouts share it).
    """
    lengths, correct = checked_group("l1-max", lengths, correct)
    if len(budgets) != len(lengths):
        raise TraacError(
            f"l1-max: {len(lengths)} lengths but {len(budgets)} budgets; one budget per rollout"
        )
    budgets = [checked_count("l1-max budget", b, minimum=1) for b in budgets]
    check_number("l1-max alpha", alpha, positive=True)
    check_number("l1-max delta", delta, positive=False)
    out: list[float] = []
    for n, ok, n_gold in zip(lengths, correct, budgets, strict=True):
        score = min(1.0, max(0.0, alpha * (n_gold - n) + delta))
        out.append(score - 1.0 if ok else 0.0)
    return out


def sample_l1_budget(rng: random.Random, *, low: int = 100, high: int = 4000) -> int:
    """One prompt's L1 budget `n_gold ~ U(n_min, n_max)`, an integer in [100, 4000] inclusive.

    The paper samples the target length uniformly between n_min = 100 and n_max = 4000 tokens;
    the authors' data script draws integers with both ends included, as here. Pass a seeded
    `random.Random` so the prompts of a run are reproducible.
    """
    low = checked_count("l1 budget low", low, minimum=1)
    high = checked_count("l1 budget high", high, minimum=1)
    if low > high:
        raise TraacError(f"l1 budget low ({low}) must not exceed high ({high})")
    return rng.randint(low, high)


def l1_max_prompt(prompt: str, budget: int) -> str:
    """The prompt with L1-Max's instruction appended after a space, as the authors' data does.

    Their L1-Max training data gives half the prompts the exact form ("Think for n_gold tokens.")
    instead; traac builds the maximum form only, the one L1-Max is evaluated and compared with.
    """
    budget = checked_count("l1-max budget", budget, minimum=1)
    return f"{prompt} {L1_MAX_INSTRUCTION.format(budget=budget)}"


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
