"""TRAAC's rewards as TRL reward functions: `correctness_reward`, `format_reward` and
`length_reward`, the methods of `TraacRewards` (which of them a mode sums is
`traac.training.methods.registry`).

The formulas are `traac.compression.rewards`; this layer reads TRL's per-sample columns, verifies
the completions (memoised, so the functions verify each once) and bins prompts by the pass rate of
their group when the trainer does not pass the bins itself.
"""

from __future__ import annotations

import copy
import json
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from traac.compression.difficulty import SINGLE_BIN, DifficultySettings
from traac.compression.formats import ChatFormat
from traac.compression.rewards import (
    Gather,
    LengthWindows,
    RewardSettings,
    correctness_reward,
    format_reward,
    length_rewards,
)
from traac.data.training import item_from_row
from traac.errors import TraacError
from traac.training.step.phases import bin_groups
from traac.verification import DEFAULT_TIMEOUT, verify_many

# A column the trainer sets on evaluation batches: their lengths join no window.
EVALUATION_COLUMN = "evaluation"


class TraacRewards:
    """The rewards as TRL reward functions (`traac.training.methods.hooks.MethodHooks` picks
    a method's).

    Dataset columns read (TRL passes them as kwargs): `answer` (gold), `verifier` (math, choice,
    text or task; default math), `entry` (reasoning-gym entry, dict or JSON string, for task),
    `data_source` (default "default"). Optional columns a trainer may add to skip work: `correct`
    (verdicts) and `bin` (the pass-rate bin). Without `bin`, bins come from
    the pass rate of consecutive groups of `num_generations` completions (GRPO's layout, binned
    as the TRAAC step bins them; the local batch must hold whole groups). Verdicts are
    memoised, so the functions verify each completion once.
    Every `length_reward` call is one training step of the windows, except on rows marked
    `evaluation` (`EVALUATION_COLUMN`): those score against a copy, and the windows stay as
    they were.
    """

    def __init__(
        self,
        config: RewardSettings | None = None,
        *,
        difficulty: DifficultySettings | None = None,
        chat_format: ChatFormat | None = None,
        windows: LengthWindows | None = None,
        num_generations: int | None = None,
        gather: Gather | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.config = config or RewardSettings()
        self.difficulty = difficulty or DifficultySettings()
        self.chat_format = chat_format or ChatFormat()
        self.windows = windows or LengthWindows(self.config.window_size)
        self.num_generations = num_generations
        self.gather = gather
        self.timeout = timeout
        self._verdicts: OrderedDict[tuple[str, ...], bool] = OrderedDict()

    def correctness_reward(self, completions: list[Any], **kwargs: Any) -> list[float]:
        return [correctness_reward(ok, self.config) for ok in self.verdicts(completions, **kwargs)]

    def format_reward(self, completions: list[Any], **kwargs: Any) -> list[float]:
        return [format_reward(self.chat_format.parse(_text(c)), self.config) for c in completions]

    def length_reward(
        self,
        completions: list[Any],
        completion_ids: list[Sequence[int]] | None = None,
        **kwargs: Any,
    ) -> list[float]:
        if completion_ids is None:
            raise TraacError("length_reward needs completion_ids (TRL passes them)")
        correct = self.verdicts(completions, **kwargs)
        sources = kwargs.get("data_source") or ["default"] * len(completions)
        keys = [(str(s), b) for s, b in zip(sources, self._bins(correct, kwargs), strict=True)]
        held_out = kwargs.get(EVALUATION_COLUMN)
        return length_rewards(
            copy.deepcopy(self.windows) if held_out and all(held_out) else self.windows,
            correct,
            [len(ids) for ids in completion_ids],
            keys,
            config=self.config,
            difficulty=self.difficulty,
            gather=self.gather,
        )

    def verdicts(self, completions: list[Any], **kwargs: Any) -> list[bool]:
        """Is each completion right? From a `correct` column if given, else verified (memoised)."""
        if kwargs.get("correct") is not None:
            return [bool(c) for c in kwargs["correct"]]
        n = len(completions)
        answers = kwargs.get("answer")
        if answers is None:
            raise TraacError("reward functions need an `answer` column in the training dataset")
        verifiers = kwargs.get("verifier") or ["math"] * n
        entries = kwargs.get("entry") or [None] * n
        texts = [_text(c) for c in completions]
        keys = [
            (
                t,
                str(a),
                str(v),
                e if isinstance(e, str) else json.dumps(e, sort_keys=True, default=str),
            )
            for t, a, v, e in zip(texts, answers, verifiers, entries, strict=True)
        ]
        todo = [i for i, key in enumerate(keys) if key not in self._verdicts]
        if todo:
            items = [
                item_from_row(
                    {
                        "id": str(i),
                        "answer": answers[i],
                        "verifier": verifiers[i],
                        "entry": entries[i],
                    }
                )
                for i in todo
            ]
            found = verify_many(
                items,
                [texts[i] for i in todo],
                think_close=self.chat_format.think_close,
                timeout=self.timeout,
            )
            for i, ok in zip(todo, found, strict=True):
                self._verdicts[keys[i]] = ok
            while len(self._verdicts) > 16384:
                self._verdicts.popitem(last=False)
        return [self._verdicts[key] for key in keys]

    def _bins(self, correct: list[bool], kwargs: dict[str, Any]) -> list[str]:
        if kwargs.get("bin") is not None:
            return [str(b) for b in kwargs["bin"]]
        if not self.difficulty.enabled:
            return [SINGLE_BIN] * len(correct)
        n = self.num_generations
        if n is None:
            raise TraacError("length_reward needs num_generations (or a bin column) to bin prompts")
        _, bins = bin_groups(correct, n, self.difficulty)
        return [bins[i // n] for i in range(len(correct))]


def _text(completion: Any) -> str:
    """A completion's text: TRL passes strings, or message lists for conversational data."""
    if isinstance(completion, str):
        return completion
    return "".join(
        m["content"]
        for m in completion
        if isinstance(m, dict) and isinstance(m.get("content"), str)
    )
