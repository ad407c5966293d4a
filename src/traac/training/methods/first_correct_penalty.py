"""The first-correct-answer penalty (Rakotonirina et al., "Correct, Concise and Complete:
Multi-stage Training For Adaptive Reasoning", arXiv:2601.02972, ACL Findings 2026): a right
rollout loses reward for the reasoning it wrote after its first correct answer.

The sources read here (the paper's abstract and summaries of it) describe the reward ("penalizes
tokens generated after the first correct answer") but not its formula (one note calls it the share
of the trace after the first correct answer), so traac implements that form, per right rollout y:

    r(y) = 1[correct] - lambda * (think tokens after the first correct step) / (think tokens)

(`coef` is lambda; a wrong rollout, and a right one whose think block states the
answer in no step, pays nothing). The first correct step is the overthinking metric's and the
early-exit compression's (`traac.compression.first_correct`): the think block split into traac's
steps (the recipe's `split_phrases`), each step's stated answer offered to the row's verifier,
time-bounded in the verification pool. Token counts are the run's tokenizer's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from traac.common.items import Item
from traac.compression.first_correct import Accepts, ParseAnswer, first_correct, parse_for
from traac.data.training import item_from_row
from traac.errors import TraacError
from traac.training.methods.base import GroupReward, LengthMethod, MethodSettings
from traac.verification import verify_answers


@dataclass(frozen=True)
class FirstCorrectSettings(MethodSettings):
    BLOCK, FLAT_PREFIX = "first_correct", "first_correct_"
    POSITIVE = ("coef",)

    coef: float = field(
        default=0.5,
        metadata={"help": "first_correct: lambda, the reward a right answer loses for a think "
                  "block written entirely after its first correct step (traac's choice; "
                  "below 1, a right answer always beats a wrong one)."},
    )  # fmt: skip


def first_correct_penalty(
    shares: Sequence[float], correct: Sequence[bool], coef: float
) -> list[float]:
    """-coef x (share of the think block after the first correct step) for right rollouts."""
    return [-coef * share if ok else 0.0 for share, ok in zip(shares, correct, strict=True)]


def step_accepts(items: Sequence[Item], think_close: str) -> Accepts:
    """Trace t's stated answer offered to `items[t]`'s verifier as a final answer."""

    def accepts(asks: Sequence[tuple[int, str]]) -> list[bool]:
        return verify_answers(
            [items[t] for t, _ in asks], [answer for _, answer in asks], think_close=think_close
        )

    return accepts


class FirstCorrectReward(GroupReward):
    def first_correct_length_reward(
        self, completions: list[Any], completion_ids: list[Sequence[int]], **kwargs: Any
    ) -> list[float]:
        """The penalty on each right rollout's think tokens after its first correct step."""
        correct = self.verdicts(completions, **kwargs)
        shares = self.shares_after(completion_ids, correct, kwargs)
        right = [share for share, ok in zip(shares, correct, strict=True) if ok]
        if right:
            self.log(kwargs, "first_correct/share_after", sum(right) / len(right))
        coef = self.settings.coef
        return [self.scale * r for r in first_correct_penalty(shares, correct, coef)]

    def shares_after(
        self, completion_ids: list[Sequence[int]], correct: list[bool], kwargs: dict[str, Any]
    ) -> list[float]:
        """Per rollout, the share of its think tokens after its first correct step (0 for a
        wrong one, or where no step states the right answer)."""
        shares = [0.0] * len(correct)
        for i, split in self.after_first_correct(completion_ids, correct, kwargs).items():
            if split is not None and split[1]:
                shares[i] = split[0] / split[1]
        return shares

    def after_first_correct(
        self, completion_ids: list[Sequence[int]], correct: list[bool], kwargs: dict[str, Any]
    ) -> dict[int, tuple[int, int] | None]:
        """Per right rollout, (think tokens after its first correct step, think tokens), or
        None where no step of its think block states the right answer."""
        rows = [i for i, ok in enumerate(correct) if ok]
        out: dict[int, tuple[int, int] | None] = {}
        if not rows:
            return out
        decoded = self.decoded([completion_ids[i] for i in rows], "count think tokens")
        texts = dict(zip(rows, decoded, strict=True))
        items = {i: self.item(i, kwargs) for i in rows}
        by_parse: dict[ParseAnswer, list[int]] = {}
        for i in rows:
            by_parse.setdefault(parse_for(items[i]), []).append(i)
        close = self.chat_format.think_close
        for parse, members in by_parse.items():
            reasonings = [self.chat_format.parse(texts[i]).reasoning for i in members]
            accepts = step_accepts([items[i] for i in members], close)
            found = first_correct(reasonings, accepts, phrases=self.phrases, parse=parse)
            for i, split in zip(members, found, strict=True):
                found_at = split.index is not None
                out[i] = (self.count(split.tail), self.count(split.reasoning)) if found_at else None
        return out

    def count(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"]) if text else 0

    @staticmethod
    def item(i: int, kwargs: dict[str, Any]) -> Item:
        """Row i's item from TRL's per-sample columns, as the correctness reward reads it."""
        answers = kwargs.get("answer")
        if answers is None:
            raise TraacError("mode first_correct: needs an `answer` column in the training data")
        return item_from_row(
            {
                "id": str(i),
                "answer": answers[i],
                "verifier": (kwargs.get("verifier") or ["math"] * len(answers))[i],
                "entry": (kwargs.get("entry") or [None] * len(answers))[i],
            }
        )


METHOD = LengthMethod(
    name="first_correct",
    paper="First-correct-answer penalty, arXiv:2601.02972 (Correct, Concise and Complete)",
    help="penalise the share of the think block after the first correct step",
    correctness=1.0,  # 1[correct] - penalty
    reward="first_correct_length_reward",
    settings=FirstCorrectSettings,
    make=FirstCorrectReward,
    values=lambda s, run: (
        f"-lambda x (think tokens after the first correct step / think tokens) on right "
        f"answers, lambda {s.coef:g}"
    ),
    compare=(("First-correct penalty", {"mode": "first_correct"}),),
)
