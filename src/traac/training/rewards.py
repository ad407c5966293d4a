"""TRAAC's rewards as TRL reward functions: `GRPOTrainer(reward_funcs=TraacRewards(...).funcs)`.

The formulas are `traac.method.rewards`; this layer reads TRL's per-sample columns, verifies the
completions (memoised, so the three functions verify each once) and bins prompts by the pass
rate of their group when the trainer does not pass the bins itself.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from traac.common.items import Item
from traac.errors import TraacError
from traac.method.difficulty import SINGLE_BIN, DifficultyConfig, group_pass_rates
from traac.method.formats import ChatFormat
from traac.method.rewards import (
    Gather,
    LengthWindows,
    RewardConfig,
    correctness_reward,
    format_reward,
    score_rollouts,
)
from traac.verification import DEFAULT_TIMEOUT, verify_many


class TraacRewards:
    """The rewards as TRL reward functions: `GRPOTrainer(reward_funcs=TraacRewards(...).funcs)`.

    Dataset columns read (TRL passes them as kwargs): `answer` (gold), `verifier` (math, choice,
    text or task; default math), `entry` (reasoning-gym entry, dict or JSON string, for task),
    `data_source` (default "default"). Optional columns a trainer may add to skip work: `correct`
    (verdicts) and `difficulty_bin`. Without `difficulty_bin`, bins come from the pass rate of
    consecutive groups of `num_generations` completions (GRPO's layout; the local batch must hold
    whole groups). Verdicts are memoised, so the three functions verify each completion once.
    Every `length_reward` call is one training step of the windows: do not call it on
    evaluation batches.
    """

    def __init__(
        self,
        config: RewardConfig | None = None,
        *,
        difficulty: DifficultyConfig | None = None,
        chat_format: ChatFormat | None = None,
        windows: LengthWindows | None = None,
        num_generations: int | None = None,
        gather: Gather | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.config = config or RewardConfig()
        self.difficulty = difficulty or DifficultyConfig()
        self.chat_format = chat_format or ChatFormat()
        self.windows = windows or LengthWindows(self.config.window_size)
        self.num_generations = num_generations
        self.gather = gather
        self.timeout = timeout
        self._verdicts: OrderedDict[tuple[str, ...], bool] = OrderedDict()

    @property
    def funcs(self) -> list[Callable[..., list[float]]]:
        """The enabled reward functions, in the order correctness, format, length."""
        funcs: list[Callable[..., list[float]]] = [self.correctness_reward]
        if self.config.use_format:
            funcs.append(self.format_reward)
        if self.config.use_length:
            funcs.append(self.length_reward)
        return funcs

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
        lengths = [len(ids) for ids in completion_ids]
        out = score_rollouts(
            [self.chat_format.parse(_text(c)) for c in completions],
            correct,
            lengths,
            keys,
            config=replace(self.config, use_format=False),
            windows=self.windows,
            difficulty=self.difficulty,
            gather=self.gather,
        )
        return out.length

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
                Item(
                    id=str(i),
                    question="",
                    answer=str(answers[i]),
                    verifier=verifiers[i],
                    entry=json.loads(entries[i]) if isinstance(entries[i], str) else entries[i],
                )
                for i in todo
            ]
            found = verify_many(items, [texts[i] for i in todo], timeout=self.timeout)
            for i, ok in zip(todo, found, strict=True):
                self._verdicts[keys[i]] = ok
            while len(self._verdicts) > 16384:
                self._verdicts.popitem(last=False)
        return [self._verdicts[key] for key in keys]

    def _bins(self, correct: list[bool], kwargs: dict[str, Any]) -> list[str]:
        if kwargs.get("difficulty_bin") is not None:
            return [str(b) for b in kwargs["difficulty_bin"]]
        if not self.difficulty.enabled:
            return [SINGLE_BIN] * len(correct)
        if self.num_generations is None:
            raise TraacError(
                "length_reward needs num_generations (or a difficulty_bin column) to bin prompts"
            )
        return [self.difficulty.bin_of(p) for p in group_pass_rates(correct, self.num_generations)]


def _text(completion: Any) -> str:
    """A completion's text: TRL passes strings, or message lists for conversational data."""
    if isinstance(completion, str):
        return completion
    return "".join(
        m["content"]
        for m in completion
        if isinstance(m, dict) and isinstance(m.get("content"), str)
    )
