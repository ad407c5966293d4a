"""Laser-D (arXiv:2505.15612, hkust-nlp/Laser): a step reward whose target length adapts per
difficulty band during training.

The authors sample a 500-prompt monitoring set with the policy before training and every 20
steps; traac's monitoring sample is the training rollouts themselves: the first step's, then
every `monitor_steps` steps those of the steps since the last choice (the current one
included). The targets, that sample and the step of the last choice are the method's state,
saved in the checkpoint, so a resumed run rewards as the uninterrupted one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from traac.compression.difficulty import pass_rate
from traac.errors import TraacError
from traac.training.methods.base import (
    Group,
    GroupReward,
    LengthMethod,
    MethodSettings,
    RunContext,
    check_number,
    checked_count,
    checked_group,
)

LASER_BANDS = ("low", "medium", "high")  # Laser-D's accuracy bands, hardest first


def laser_band(pass_rate_: float) -> str:
    """The Laser-D band of a training prompt from its group's pass rate: `high` at 2/3 or more,
    `medium` at 1/3 or more, `low` below (the authors' `compute_length_reward_larse_d`)."""
    if pass_rate_ >= 2 / 3:
        return "high"
    return "medium" if pass_rate_ >= 1 / 3 else "low"


def laser_thresholds(lower: int, upper: int, interval: int) -> list[int]:
    """The candidate target lengths: `lower, lower + interval, ...` up to `upper` (the authors'
    `get_length_threshold` for a lower bound of 1024 or more), and `upper` itself."""
    lower = checked_count("laser lower", lower, minimum=1)
    upper = checked_count("laser upper", upper, minimum=1)
    interval = checked_count("laser interval", interval, minimum=1)
    if lower > upper:
        raise TraacError(f"laser: lower bound {lower} exceeds upper bound {upper}")
    out = list(range(lower, upper + 1, interval))
    return out if out[-1] == upper else [*out, upper]


def laser_target_lengths(
    groups: Sequence[tuple[Sequence[int], Sequence[bool]]],
    thresholds: Sequence[int],
    *,
    expected_correct: int = 1,
) -> dict[str, int]:
    """Laser-D's adaptive target length of each band from a monitoring sample of groups (each
    group: one prompt's rollout lengths and verdicts), as the authors' `_choose_target_length`.

    A group's band is read off its accuracy (above 2/3 `high`, above 1/3 `medium`, else `low`,
    the authors' monitor). A band's coverage at length L is the share of its responses, right
    or wrong, of at most L tokens. Its target is the smallest threshold L with
    `floor(coverage(L) * m) >= expected_correct`, where m is floor(2K/3) for `high`, floor(K/3)
    for `medium` and 1 for `low` (K rollouts per group): about the length by which the
    expected number of right rollouts of a prompt of that band has finished. A band no
    threshold satisfies (or with no groups) gets the largest threshold.
    """
    if not thresholds:
        raise TraacError("laser: no candidate target lengths")
    checked = [checked_group("laser", n, ok) for n, ok in groups]
    if not checked:
        raise TraacError("laser: no groups to choose target lengths from")
    k = len(checked[0][0])
    lengths: dict[str, list[int]] = {band: [] for band in LASER_BANDS}
    for n, ok in checked:
        acc = pass_rate(ok)
        band = "high" if acc > 2 / 3 else "medium" if acc > 1 / 3 else "low"
        lengths[band] += n
    lower_n = {"high": int(k * 2 / 3), "medium": int(k / 3), "low": 1}
    out = {}
    for band in LASER_BANDS:
        out[band] = max(thresholds)
        for threshold in sorted(thresholds):
            covered = sum(n <= threshold for n in lengths[band])
            ratio = covered / len(lengths[band]) if lengths[band] else 0.0
            if int(ratio * lower_n[band]) >= expected_correct:
                out[band] = threshold
                break
    return out


def laser_length_reward(
    lengths: Sequence[int], correct: Sequence[bool], *, target: int, bonus: float = 0.5
) -> list[float]:
    """Laser's step-function length reward: `bonus` for a right rollout of at most `target`
    tokens, 0 otherwise (Liu et al., "Learn to Reason Efficiently with Adaptive Length-based
    Reward Shaping", arXiv:2505.15612; the authors' `length_reward_type: reward`, scalar 0.5).
    Laser-D picks `target` per prompt from its band (`laser_band`, `laser_target_lengths`)."""
    lengths, correct = checked_group("laser", lengths, correct)
    target = checked_count("laser target", target, minimum=1)
    check_number("laser bonus", bonus, positive=False)
    return [bonus if ok and n <= target else 0.0 for n, ok in zip(lengths, correct, strict=True)]


@dataclass(frozen=True)
class LaserDSettings(MethodSettings):
    BLOCK, FLAT_PREFIX = "laser_d", "laser_"
    POSITIVE = ("bonus",)
    COUNTS = (
        "monitor_steps", "expected_correct", "lower", "upper",
        "interval",
    )  # fmt: skip

    bonus: float = field(
        default=0.5, metadata={"help": "laser_d: reward of a right answer within its target."}
    )
    lower: int | None = field(
        default=None,
        metadata={"help": "laser_d: smallest candidate target in tokens (unset: "
                  "max_completion_length / 4, the authors' 4096 of 16384)."},
    )  # fmt: skip
    upper: int | None = field(
        default=None,
        metadata={"help": "laser_d: largest candidate target (unset: max_completion_length)."},
    )
    interval: int | None = field(
        default=None,
        metadata={"help": "laser_d: step between candidate targets (unset: "
                  "max_completion_length / 16, the authors' 1024 of 16384)."},
    )  # fmt: skip
    monitor_steps: int = field(
        default=20, metadata={"help": "laser_d: steps between choices of the targets (authors 20)."}
    )
    expected_correct: int = field(
        default=1,
        metadata={"help": "laser_d: right rollouts a band's target must leave room for "
                  "(authors 1)."},
    )  # fmt: skip

    def resolved(self, run: RunContext) -> LaserDSettings:
        """Unset candidates in the authors' ratios (4096, 16384 and 1024 of their 16384-token
        cap); they must fit in the response budget."""
        cap = run.max_completion_length
        lower = self.lower or max(1, cap // 4)
        upper = self.upper or cap
        interval = self.interval or max(1, cap // 16)
        if not lower <= upper <= cap:
            raise TraacError(
                f"laser_d.upper: candidate targets {lower}..{upper} must satisfy lower <= upper <= "
                f"max_completion_length {cap}; adjust laser_d.lower or laser_d.upper"
            )
        return replace(self, lower=lower, upper=upper, interval=interval)


class LaserTargets:
    """Laser-D's adaptive targets across training, chosen from the monitoring sample."""

    def __init__(self, settings: LaserDSettings) -> None:
        self.settings = settings
        self.thresholds = laser_thresholds(settings.lower, settings.upper, settings.interval)
        self.targets: dict[str, int] | None = None
        self.sample: list[Group] = []
        self.chosen_at: int | None = None  # the global step of the last choice
        self.calls = 0

    def observe(self, groups: list[Group], step: int | None) -> dict[str, int]:
        """Add a step's groups to the sample; re-choose the targets when none exist yet or
        when `step` (TRL's global step; else this object's call count) reaches the schedule."""
        step = self.calls if step is None else step
        self.calls += 1
        self.sample += groups
        due = step % self.settings.monitor_steps == 0 and step != self.chosen_at
        if self.targets is None or due:
            self.targets = laser_target_lengths(
                self.sample, self.thresholds, expected_correct=self.settings.expected_correct
            )
            self.sample, self.chosen_at = [], step
        return dict(self.targets)

    def state_dict(self) -> dict[str, Any]:
        """Targets, monitoring sample and schedule, as JSON-ready values."""
        return {
            "targets": self.targets,
            "sample": [[list(n), list(ok)] for n, ok in self.sample],
            "chosen_at": self.chosen_at,
            "calls": self.calls,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.targets = None if state["targets"] is None else dict(state["targets"])
        self.sample = [(list(n), list(ok)) for n, ok in state["sample"]]
        self.chosen_at = state["chosen_at"]
        self.calls = state["calls"]


class LaserDReward(GroupReward):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.laser = LaserTargets(self.settings)

    def state_dict(self) -> dict[str, Any]:
        return {"laser": self.laser.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "laser" in state:
            self.laser.load_state_dict(state["laser"])

    def laser_d_length_reward(
        self, completions: list[Any], completion_ids: list[Sequence[int]], **kwargs: Any
    ) -> list[float]:
        """The band targets (re-chosen on schedule from the monitoring sample), then the step
        reward of each group at its band's target."""
        groups, offset, count = self.groups(completions, completion_ids, kwargs)
        state = kwargs.get("trainer_state")
        targets = self.laser.observe(groups, None if state is None else state.global_step)
        for band, target in targets.items():
            self.log(kwargs, f"laser/target_{band}", float(target))
        out: list[float] = []
        for lengths, correct in groups:
            target = targets[laser_band(pass_rate(correct))]
            out += laser_length_reward(lengths, correct, target=target, bonus=self.settings.bonus)
        return [self.scale * r for r in out[offset : offset + count]]


METHOD = LengthMethod(
    name="laser_d",
    paper="Laser-D, arXiv:2505.15612 (hkust-nlp/Laser)",
    help="Laser-D step reward, targets adapted per difficulty band during training",
    correctness=1.5,  # +1 right, -0.5 wrong
    reward="laser_d_length_reward",
    settings=LaserDSettings,
    make=LaserDReward,
    values=lambda s, run: (
        f"+{s.bonus:g} for a right answer within its band's target, targets from "
        f"{s.lower}..{s.upper} step {s.interval}, re-chosen every "
        f"{s.monitor_steps} steps (expected right {s.expected_correct})"
    ),
    compare=(("Laser-D", {"mode": "laser_d"}),),  # targets scale with the response cap already
)
