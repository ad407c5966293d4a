"""Per-rollout rewards (docs/method.md#rewards): total = correctness + format + length.

- correctness: `config.correct` (4) when the final answer is right, else 0;
- format: `format_count` for exactly one think opener and one closer (the opener is in the
  prompt for `prompt-opens` chat formats, so there the response must hold none), and,
  independently, `format_order` when an opener comes before a closer (an empty think block
  earns both; two blocks only the order half), read off the one parse of the response
  (`ChatFormat.parse`);
- length: only for right rollouts. Per (data source, difficulty bin) a `LengthWindows` keeps the
  lengths (response tokens) of the right rollouts of the last `window_size` training steps; the
  current step joins before rewards are computed. Over the flattened window L:
  `L_norm = clamp((max L - l) / max(max L - min L, eps), 0, 1)`,
  `beta = 1 / (1 + exp((l - median L) / (0.1 median L)))`,
  `r = W * scale_bin * max(L_norm, beta)`; an empty window gives 0.

Presets: `paper` (format 0.5 + 0.5, W = 2) and `authors` (the authors' code: 0.25 + 0.25, W = 1;
`reference`, its old name, still works).

Two layers. A trainer that has verified its rollouts and binned its prompts calls

    config = RewardSettings.preset("paper")
    windows = LengthWindows(config.window_size)          # save windows.state_dict() in checkpoints
    parsed = [fmt.parse(r) for r in responses]
    out = score_rollouts(parsed, correct, lengths, keys, config=config, windows=windows,
                         difficulty=DifficultySettings(), gather=gather_object)
    out.total                                            # one float per rollout

with `keys[i] = (data_source, bin)` and, under `accelerate`, `gather=accelerate.utils.gather_object`
so every process pushes the same merged step into its windows; `length_rewards` is the length
part alone. `traac.training.methods.traac_rewards` wraps the same rewards as TRL reward
functions.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from traac.compression.difficulty import DifficultySettings
from traac.compression.formats import ParsedResponse
from traac.compression.settings import check_positive, preset_name
from traac.errors import TraacError

Key = tuple[str, str]  # (data source, difficulty bin)
Gather = Callable[[list[Any]], list[Any]]


@dataclass(frozen=True)
class RewardSettings:
    """Reward weights. `use_format` / `use_length` off give `score_rollouts` the CR-only
    ablation (the trainer sums the rewards its method names, `traac.training.methods.registry`)."""

    correct: float = 4.0
    format_count: float = 0.5  # exactly one opener and one closer
    format_order: float = 0.5  # ... in order, with the reasoning between them
    length_weight: float = 2.0  # W
    window_size: int = 10  # training steps each length window spans
    eps: float = 1e-6  # floor of max L - min L and of 0.1 * median L
    use_format: bool = True
    use_length: bool = True

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type == "bool":
                if not isinstance(value, bool):
                    raise TraacError(f"rewards.{f.name} must be true or false, got {value!r}")
            else:
                check_positive(f"rewards.{f.name}", value, zero=True)
        check_positive("rewards.window_size", self.window_size, integer=True)
        check_positive("rewards.eps", self.eps)

    @classmethod
    def preset(cls, name: str = "paper", **overrides: Any) -> RewardSettings:
        """`paper` or `authors`, with any field overridden."""
        name = preset_name("rewards.preset", name)
        if name not in REWARD_PRESETS:
            raise TraacError(
                f"rewards.preset: unknown value {name!r}; use one of {', '.join(REWARD_PRESETS)}"
            )
        unknown = sorted(set(overrides) - {f.name for f in fields(cls)})
        if unknown:
            raise TraacError(f"rewards: unknown key(s) {unknown}")
        return replace(REWARD_PRESETS[name], **overrides)


REWARD_PRESETS: dict[str, RewardSettings] = {
    "paper": RewardSettings(),
    "authors": RewardSettings(format_count=0.25, format_order=0.25, length_weight=1.0),
}


def correctness_reward(correct: bool, config: RewardSettings) -> float:
    """`config.correct` for a right answer, else 0."""
    return config.correct if correct else 0.0


def format_reward(parsed: ParsedResponse, config: RewardSettings) -> float:
    """`format_count` for exactly one think block, `format_order` for an opener before a
    closer; the halves are independent (docs/method.md#rewards)."""
    return config.format_count * parsed.one_block + config.format_order * parsed.ordered


def length_reward(
    length: int, window: Sequence[int], *, weight: float, scale: float, eps: float = 1e-6
) -> float:
    """`W * scale * max(L_norm, beta)` of one right rollout against its window (0 if empty)."""
    if not window:
        return 0.0
    low, high, median = min(window), max(window), statistics.median(window)
    l_norm = min(1.0, max(0.0, (high - length) / max(high - low, eps)))
    z = (length - median) / max(0.1 * median, eps)
    beta = math.exp(-z) / (1.0 + math.exp(-z)) if z >= 0 else 1.0 / (1.0 + math.exp(z))
    return weight * scale * max(l_norm, beta)


class LengthWindows:
    """Right-rollout lengths of the last `size` training steps, per (data source, bin).

    Every `push_step` is one training step: keys absent from it age by one step too, and a key
    whose window holds no length any more is dropped.
    """

    def __init__(self, size: int = 10) -> None:
        if not isinstance(size, int) or size < 1:
            raise TraacError(f"length window size must be an integer >= 1, got {size!r}")
        self.size = size
        self._steps: dict[Key, deque[list[int]]] = {}

    def push_step(self, lengths_by_key: Mapping[Key, Iterable[int]]) -> None:
        """Add one training step's right-rollout lengths (merged over processes, if distributed)."""
        step = {_key(k): [int(n) for n in v] for k, v in lengths_by_key.items()}
        for key in sorted(set(self._steps) | set(step)):
            steps = self._steps.setdefault(key, deque(maxlen=self.size))
            steps.append(step.get(key, []))
            if not any(steps):
                del self._steps[key]

    def window(self, key: Key) -> list[int]:
        """The flattened window L of a key (empty if unseen)."""
        return [n for step in self._steps.get(_key(key), ()) for n in step]

    def keys(self) -> list[Key]:
        return sorted(self._steps)

    @staticmethod
    def merge(contributions: Iterable[Mapping[Key, Iterable[int]]]) -> dict[Key, list[int]]:
        """One step's lengths from every process, concatenated in the order given.

        Call with `accelerate.utils.gather_object([local])`: every process receives the same list,
        so every process pushes the same step and holds the same windows.
        """
        merged: dict[Key, list[int]] = {}
        for contribution in contributions:
            for key, lengths in contribution.items():
                merged.setdefault(_key(key), []).extend(int(n) for n in lengths)
        return merged

    def state_dict(self) -> dict[str, Any]:
        """JSON-safe state, for checkpoints."""
        return {
            "size": self.size,
            "windows": [
                {"data_source": key[0], "bin": key[1], "steps": [list(s) for s in self._steps[key]]}
                for key in self.keys()
            ],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore `state_dict()` output (the window size comes with it)."""
        try:
            size = int(state["size"])
            windows = {
                (str(w["data_source"]), str(w["bin"])): [[int(n) for n in s] for s in w["steps"]]
                for w in state["windows"]
            }
        except (KeyError, TypeError, ValueError) as exc:
            raise TraacError(f"length windows: malformed state ({exc})") from None
        if size < 1:
            raise TraacError(f"length windows: malformed state (size {size})")
        self.size = size
        self._steps = {key: deque(steps, maxlen=size) for key, steps in windows.items()}


def _key(key: Sequence[str]) -> Key:
    if len(key) != 2:
        raise TraacError(f"length window key must be (data_source, bin), got {key!r}")
    return (str(key[0]), str(key[1]))


@dataclass(frozen=True)
class RewardBreakdown:
    """The three rewards of every rollout of a step."""

    correctness: list[float]
    format: list[float]
    length: list[float]

    @property
    def total(self) -> list[float]:
        return [
            c + f + n for c, f, n in zip(self.correctness, self.format, self.length, strict=True)
        ]


def step_lengths(
    correct: Sequence[bool], lengths: Sequence[int], keys: Sequence[Key]
) -> dict[Key, list[int]]:
    """This process's contribution to the windows: lengths of the right rollouts by key."""
    out: dict[Key, list[int]] = {}
    for ok, length, key in zip(correct, lengths, keys, strict=True):
        if ok:
            out.setdefault(_key(key), []).append(int(length))
    return out


def length_rewards(
    windows: LengthWindows,
    correct: Sequence[bool],
    lengths: Sequence[int],
    keys: Sequence[Key],
    *,
    config: RewardSettings,
    difficulty: DifficultySettings,
    gather: Gather | None = None,
) -> list[float]:
    """The length rewards of one step's rollouts, after pushing the step into `windows` (see
    `score_rollouts`): 0 for a wrong rollout."""
    contribution = step_lengths(correct, lengths, keys)
    windows.push_step(LengthWindows.merge(gather([contribution]) if gather else [contribution]))
    return [
        length_reward(
            length,
            windows.window(key),
            weight=config.length_weight,
            scale=difficulty.scale_of(key[1]),
            eps=config.eps,
        )
        if ok
        else 0.0
        for ok, length, key in zip(correct, lengths, keys, strict=True)
    ]


def score_rollouts(
    parsed: Sequence[ParsedResponse],
    correct: Sequence[bool],
    lengths: Sequence[int],
    keys: Sequence[Key],
    *,
    config: RewardSettings,
    windows: LengthWindows,
    difficulty: DifficultySettings,
    gather: Gather | None = None,
) -> RewardBreakdown:
    """Rewards of one step's rollouts; pushes the step into `windows` first.

    `keys[i] = (data_source, bin)`, `lengths[i]` in response tokens. With several processes pass
    `gather=accelerate.utils.gather_object`: each process contributes its rollouts' lengths and
    all push the merged step. Call once per training step.
    """
    n = len(parsed)
    if not len(correct) == len(lengths) == len(keys) == n:
        raise TraacError(
            f"score_rollouts: {n} responses, {len(correct)} verdicts, {len(lengths)} lengths, "
            f"{len(keys)} keys; one each per rollout"
        )
    correctness = [correctness_reward(ok, config) for ok in correct]
    fmt = [format_reward(p, config) if config.use_format else 0.0 for p in parsed]
    length = [0.0] * n
    if config.use_length:
        length = length_rewards(
            windows, correct, lengths, keys, config=config, difficulty=difficulty, gather=gather
        )
    return RewardBreakdown(correctness, fmt, length)
