"""The peer methods' length terms as TRL reward functions, on TRAACTrainer's rollouts.

Each peer mode (`alp`, `shorterbetter`, `kimi`, `dapo_overlong`, `l1_max`, `dler`,
`dler_difficulty`, `laser_d`) replaces TRAAC's difficulty-aware length reward and compression
with one paper's length term; correctness and format stay traac's, so every method is trained
against the same verifiers. The formulas are `traac.method.length_rewards`
(docs/peer_methods.md pins each with its paper's values).

A paper writes its reward with its own weight on correctness (ALP, Kimi, L1 and DLER give a right
answer 1, ShorterBetter 2, DAPO +1 against -1, Laser +1 against -0.5). traac's right answer is
worth `correctness_reward` (4) in every mode, so the length term is multiplied by
`correctness_reward / paper weight`: each paper's total reward times a constant, plus traac's
format term. GRPO normalises rewards within a group, so that constant changes no advantage; what
differs from the paper is the format term (0 to 1) alone.

The length terms that need the whole group (ALP's solve rate, ShorterBetter's optimal length,
Kimi's min and max, DLER's difficulty-aware limit, Laser-D's band) read GRPO's layout:
consecutive runs of `num_generations` completions are one prompt's group. Rollouts of one group
may sit on several processes, so the lengths and verdicts of every process are gathered and each
process keeps its slice: all of them compute the same groups. Laser-D also keeps state across
steps: the monitoring sample its targets are chosen from (`LaserTargets`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from datasets import Dataset
from trl.rewards import get_soft_overlong_punishment

from traac.errors import TraacError
from traac.method.difficulty import pass_rate
from traac.method.length_rewards import (
    alp_length_reward,
    dapo_cache_length,
    dler_length_reward,
    dler_limit,
    kimi_length_reward,
    l1_max_length_reward,
    l1_max_prompt,
    laser_band,
    laser_length_reward,
    laser_target_lengths,
    laser_thresholds,
    sample_l1_budget,
    shorterbetter_length_reward,
)
from traac.method.rewards import Gather

BUDGET_COLUMN = "length_budget"  # L1-Max: each training row's n_gold


@dataclass(frozen=True)
class PeerSettings:
    """One peer method's length term, resolved from a `TRAACConfig` (`peer_settings()`)."""

    method: str  # a name in PEERS
    correctness_reward: float
    max_completion_length: int
    alp_beta: float
    alp_normalizer: float
    shorterbetter_beta: float
    kimi_weight: float
    dapo_cache_length: int
    l1_alpha: float
    l1_delta: float
    l1_budget_min: int
    l1_budget_max: int
    l1_budget_in_prompt: bool
    dler_length: int
    dler_easy_scale: float
    easy_threshold: float  # dler_difficulty: a group at this pass rate or above is easy
    laser_bonus: float
    laser_lower: int
    laser_upper: int
    laser_interval: int
    laser_monitor_steps: int
    laser_expected_correct: int

    @property
    def peer(self) -> Peer:
        """The method's entry in `PEERS`."""
        return PEERS[self.method]

    @property
    def scale(self) -> float:
        """The factor on the paper's length term: traac's correctness over the paper's."""
        return self.correctness_reward / self.peer.correctness

    def check(self) -> None:
        """DLER's limit and Laser-D's candidate targets must fit in the response budget."""
        cap = self.max_completion_length
        if self.method in ("dler", "dler_difficulty") and self.dler_length > cap:
            raise TraacError(
                f"dler_length: {self.dler_length} exceeds max_completion_length {cap}: the limit "
                "could never bind; lower dler_length or raise max_completion_length"
            )
        lower, upper = self.laser_lower, self.laser_upper
        if self.method == "laser_d" and not lower <= upper <= cap:
            raise TraacError(
                f"laser_upper: candidate targets {lower}..{upper} must satisfy lower <= upper <= "
                f"max_completion_length {cap}; adjust laser_lower or laser_upper"
            )

    def describe(self) -> str:
        """One line for `--dry-run`: the method, its values and the scale."""
        return (
            f"{self.peer.paper}: {self.peer.values(self)}; length term x{self.scale:g} (right "
            f"answer {self.correctness_reward:g} here, {self.peer.correctness:g} in the paper)"
        )


@dataclass(frozen=True)
class Peer:
    """One peer method: everything traac knows of it but its formula and its settings' fields."""

    paper: str
    help: str  # what its length term does, for `mode`'s help
    correctness: float  # what its paper pays a right answer over a wrong one
    reward: str  # the `PeerRewards` method computing its length term (the name TRL logs)
    values: Callable[[PeerSettings], str]  # its values in words, for `--dry-run`
    budgets: bool = False  # each training row carries a length budget (`with_length_budgets`)


# The peer methods: adding one is an entry here and its `PeerRewards` method.
PEERS: dict[str, Peer] = {
    "alp": Peer(
        "ALP, arXiv:2506.05256",
        "ALP, solve-rate scaled per-token penalty",
        1.0,  # r = 1[correct] - penalty
        "alp_length_reward",
        lambda s: f"-(beta/N) max(p_solved, 1/K) |y|, beta {s.alp_beta:g}, N {s.alp_normalizer:g}",
    ),
    "shorterbetter": Peer(
        "ShorterBetter, arXiv:2504.21370",
        "distance to the group's shortest right length",
        2.0,  # alpha = 2, the authors' released setting
        "shorterbetter_length_reward",
        lambda s: f"-beta |l - l_SOL|, beta {s.shorterbetter_beta:g}",
    ),
    "kimi": Peer(
        "Kimi k1.5, arXiv:2501.12599 section 2.3.3",
        "Kimi k1.5 min-max length reward",
        1.0,  # binary correctness reward + weighted len_reward
        "kimi_length_reward",
        lambda s: (
            f"weight {s.kimi_weight:g} x (0.5 - (l - min) / (max - min)), "
            "wrong rollouts capped at 0"
        ),
    ),
    "dapo_overlong": Peer(
        "DAPO Eq. 13, arXiv:2503.14476 (TRL's get_soft_overlong_punishment)",
        "DAPO soft overlong punishment, TRL's",
        2.0,  # +1 right, -1 wrong
        "dapo_overlong_length_reward",
        lambda s: (
            f"0 up to {s.max_completion_length - s.dapo_cache_length}, "
            f"linear to -1 at {s.max_completion_length} tokens (L_cache {s.dapo_cache_length})"
        ),
    ),
    "l1_max": Peer(
        "L1-Max, arXiv:2503.04697",
        "L1-Max budget reward, budgets in the prompt",
        1.0,  # 1[correct] * clip(...)
        "l1_max_length_reward",
        lambda s: (
            f"1[correct] clip(alpha (n_gold - n_y) + delta, 0, 1), alpha "
            f"{s.l1_alpha:g}, delta {s.l1_delta:g}, n_gold ~ U{{{s.l1_budget_min}.."
            f"{s.l1_budget_max}}} per prompt, "
            + ("written into the prompt" if s.l1_budget_in_prompt else "not in the prompt")
        ),
        budgets=True,
    ),
    "dler": Peer(
        "DLER, arXiv:2510.15110 (NVlabs/DLER)",
        "DLER truncation penalty: a right answer over the limit earns nothing",
        1.0,  # deepscaler's 1[correct] score
        "dler_length_reward",
        lambda s: f"-1[correct and |y| > L], L {s.dler_length}",
    ),
    "dler_difficulty": Peer(
        "Difficulty-aware DLER, arXiv:2510.15110",
        "DLER with a shorter limit for easy prompts",
        1.0,
        "dler_length_reward",
        lambda s: (
            f"-1[correct and |y| > L(q)], L {s.dler_length}, "
            f"floor(L x {s.dler_easy_scale:g}) when the group's pass rate >= "
            f"{s.easy_threshold:g}"
        ),
    ),
    "laser_d": Peer(
        "Laser-D, arXiv:2505.15612 (hkust-nlp/Laser)",
        "Laser-D step reward, targets adapted per difficulty band during training",
        1.5,  # +1 right, -0.5 wrong
        "laser_d_length_reward",
        lambda s: (
            f"+{s.laser_bonus:g} for a right answer within its band's target, targets from "
            f"{s.laser_lower}..{s.laser_upper} step {s.laser_interval}, re-chosen every "
            f"{s.laser_monitor_steps} steps (expected right {s.laser_expected_correct})"
        ),
    ),
}


def laser_bounds(
    cap: int, lower: int | None, upper: int | None, interval: int | None
) -> tuple[int, int, int]:
    """Laser-D's candidate targets (lower, upper, interval) for a response cap, unset ones in
    the authors' ratios (4096, 16384 and 1024 of their 16384-token cap)."""
    return lower or max(1, cap // 4), upper or cap, interval or max(1, cap // 16)


def dapo_overlong_punishment(
    max_completion_length: int, cache_length: int | None = None
) -> Callable[..., list[float]]:
    """DAPO's soft overlong punishment (Eq. 13) for a run: TRL's own
    `trl.rewards.get_soft_overlong_punishment`, composed rather than copied, with L_max the run's
    `max_completion_length` and L_cache `traac.method.length_rewards.dapo_cache_length` (a fifth
    of L_max unless given). The result is TRL's callable, a `GRPOTrainer` reward function that
    reads `completion_ids`; GRPO stops generating at L_max, so a truncated completion gets -1."""
    cache = dapo_cache_length(max_completion_length, cache_length)
    return get_soft_overlong_punishment(
        max_completion_len=max_completion_length, soft_punish_cache=cache
    )


class PeerRewards:
    """One peer method's length term as a TRL reward function: `PeerRewards(...).func`.

    `verdicts(completions, **kwargs)` says which completions are right (TraacRewards.verdicts:
    the trainer's `correct` column, else the verifiers). `gather` merges a list over processes
    (`accelerate.utils.gather_object`) and `rank` is this process's index, for the methods
    that need whole groups. L1-Max reads each row's budget from the `length_budget` column.
    """

    def __init__(
        self,
        settings: PeerSettings,
        *,
        verdicts: Callable[..., list[bool]],
        num_generations: int | None,
        gather: Gather | None = None,
        rank: int = 0,
    ) -> None:
        if settings.method not in PEERS:
            raise TraacError(f"mode: {settings.method!r} is not a peer method ({tuple(PEERS)})")
        self.settings = settings
        self.verdicts = verdicts
        self.num_generations = num_generations
        self.gather = gather
        self.rank = rank
        self._punish = dapo_overlong_punishment(
            settings.max_completion_length, settings.dapo_cache_length
        )
        self.laser = LaserTargets(settings) if settings.method == "laser_d" else None

    def state_dict(self) -> dict[str, Any]:
        """What the method keeps across steps (Laser-D's targets and monitoring sample), for
        the trainer's checkpoint: a resumed run rewards as the uninterrupted one."""
        return {} if self.laser is None else {"laser": self.laser.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.laser is not None and "laser" in state:
            self.laser.load_state_dict(state["laser"])

    @property
    def func(self) -> Callable[..., list[float]]:
        """The method's reward function (its name is the one TRL logs)."""
        return getattr(self, self.settings.peer.reward)

    def alp_length_reward(
        self, completions: list[Any], completion_ids: list[Sequence[int]], **kwargs: Any
    ) -> list[float]:
        s = self.settings
        return self._per_group(
            completions,
            completion_ids,
            kwargs,
            lambda n, ok: alp_length_reward(n, ok, beta=s.alp_beta, normalizer=s.alp_normalizer),
        )

    def shorterbetter_length_reward(
        self, completions: list[Any], completion_ids: list[Sequence[int]], **kwargs: Any
    ) -> list[float]:
        beta = self.settings.shorterbetter_beta
        return self._per_group(
            completions,
            completion_ids,
            kwargs,
            lambda n, ok: shorterbetter_length_reward(n, ok, beta=beta),
        )

    def kimi_length_reward(
        self, completions: list[Any], completion_ids: list[Sequence[int]], **kwargs: Any
    ) -> list[float]:
        weight = self.settings.kimi_weight
        return self._per_group(
            completions,
            completion_ids,
            kwargs,
            lambda n, ok: kimi_length_reward(n, ok, weight=weight),
        )

    def dapo_overlong_length_reward(
        self, completion_ids: list[Sequence[int]], **kwargs: Any
    ) -> list[float]:
        """TRL's soft overlong punishment, scaled; it reads each completion's length only."""
        return [self.settings.scale * r for r in self._punish(completion_ids)]

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
            alpha=s.l1_alpha,
            delta=s.l1_delta,
        )
        return [s.scale * r for r in out]

    def dler_length_reward(
        self, completions: list[Any], completion_ids: list[Sequence[int]], **kwargs: Any
    ) -> list[float]:
        """The truncation penalty at `dler_length`, or (`dler_difficulty`) at each group's
        limit from its pass rate."""
        s = self.settings
        if s.method == "dler":
            return self._per_group(
                completions,
                completion_ids,
                kwargs,
                lambda n, ok: dler_length_reward(n, ok, limit=s.dler_length),
            )

        def formula(n: list[int], ok: list[bool]) -> list[float]:
            limit = dler_limit(
                ok, limit=s.dler_length, easy_threshold=s.easy_threshold,
                easy_scale=s.dler_easy_scale,
            )  # fmt: skip
            return dler_length_reward(n, ok, limit=limit)

        return self._per_group(completions, completion_ids, kwargs, formula)

    def laser_d_length_reward(
        self, completions: list[Any], completion_ids: list[Sequence[int]], **kwargs: Any
    ) -> list[float]:
        """Laser-D: the band targets (re-chosen on schedule from the monitoring sample), then
        the step reward of each group at its band's target."""
        groups, offset, count = self._groups(completions, completion_ids, kwargs)
        laser = self.laser
        if laser is None:
            raise TraacError(f"mode {self.settings.method}: not Laser-D")
        state = kwargs.get("trainer_state")
        targets = laser.observe(groups, None if state is None else state.global_step)
        log = kwargs.get("log_metric")
        if log is not None:
            for band, target in targets.items():
                log(f"laser/target_{band}", float(target))
        out: list[float] = []
        for lengths, correct in groups:
            target = targets[laser_band(pass_rate(correct))]
            out += laser_length_reward(
                lengths, correct, target=target, bonus=self.settings.laser_bonus
            )
        return [self.settings.scale * r for r in out[offset : offset + count]]

    def _per_group(
        self,
        completions: list[Any],
        completion_ids: list[Sequence[int]],
        kwargs: dict[str, Any],
        formula: Callable[[list[int], list[bool]], list[float]],
    ) -> list[float]:
        """`formula` on every group of the gathered batch; this process's slice, scaled."""
        groups, offset, count = self._groups(completions, completion_ids, kwargs)
        out: list[float] = []
        for lengths, correct in groups:
            out += formula(lengths, correct)
        return [self.settings.scale * r for r in out[offset : offset + count]]

    def _groups(
        self, completions: list[Any], completion_ids: list[Sequence[int]], kwargs: dict[str, Any]
    ) -> tuple[list[tuple[list[int], list[bool]]], int, int]:
        """Every group of the gathered batch as (lengths, verdicts), the offset of this
        process's first rollout in it and its count."""
        n = self.num_generations
        if n is None:
            raise TraacError(f"mode {self.settings.method}: needs num_generations to find groups")
        local = list(
            zip(
                [len(ids) for ids in completion_ids],
                self.verdicts(completions, **kwargs),
                strict=True,
            )
        )
        parts: list[list[tuple[int, bool]]] = self.gather([local]) if self.gather else [local]
        every = [x for part in parts for x in part]
        if len(every) % n:
            raise TraacError(
                f"mode {self.settings.method}: {len(every)} completions are not whole groups of "
                f"num_generations={n}"
            )
        groups = []
        for start in range(0, len(every), n):
            lengths, correct = zip(*every[start : start + n], strict=True)
            groups.append((list(lengths), list(correct)))
        offset = sum(len(part) for part in parts[: self.rank])
        return groups, offset, len(local)


class LaserTargets:
    """Laser-D's adaptive targets across training. The authors sample a 500-prompt monitoring
    set with the policy before training and every 20 steps; traac's monitoring sample is the
    training rollouts themselves: the first step's, then every `laser_monitor_steps` steps
    those of the steps since the last choice (the current one included)."""

    def __init__(self, settings: PeerSettings) -> None:
        self.settings = settings
        self.thresholds = laser_thresholds(
            settings.laser_lower, settings.laser_upper, settings.laser_interval
        )
        self.targets: dict[str, int] | None = None
        self.sample: list[tuple[list[int], list[bool]]] = []
        self.chosen_at: int | None = None  # the global step of the last choice
        self.calls = 0

    def observe(self, groups: list[tuple[list[int], list[bool]]], step: int | None) -> dict:
        """Add a step's groups to the sample; re-choose the targets when none exist yet or
        when `step` (TRL's global step; else this object's call count) reaches the schedule."""
        step = self.calls if step is None else step
        self.calls += 1
        self.sample += groups
        due = step % self.settings.laser_monitor_steps == 0 and step != self.chosen_at
        if self.targets is None or due:
            self.targets = laser_target_lengths(
                self.sample, self.thresholds, expected_correct=self.settings.laser_expected_correct
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


def with_length_budgets(dataset: Any, settings: PeerSettings, seed: int) -> Any:
    """L1-Max's training rows: a `length_budget` column, n_gold ~ U{min..max} per row (seeded,
    drawn once as the authors' data script does), appended to the prompt as "Think for maximum
    n_gold tokens." unless `l1_budget_in_prompt` is off. A dataset that has the column is
    returned as it is."""
    if not isinstance(dataset, Dataset):
        raise TraacError("mode l1_max: the training set must be a datasets.Dataset")
    if BUDGET_COLUMN in dataset.column_names:
        return dataset
    rng = random.Random(seed)
    budgets = [
        sample_l1_budget(rng, low=settings.l1_budget_min, high=settings.l1_budget_max)
        for _ in range(len(dataset))
    ]
    dataset = dataset.add_column(BUDGET_COLUMN, budgets)
    if not settings.l1_budget_in_prompt:
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
