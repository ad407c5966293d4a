"""The training modes and the rewards each one sums: one registry, as open-r1's
`REWARD_FUNCS_REGISTRY` is for its rewards.

A mode says whether correct rollouts are compressed, whether prompts are binned by pass rate
(else every prompt falls in the one bin `all`), and which named rewards TRL sums, in order. A
reward's name is its function's, the name TRL logs (`rewards/<name>/mean`): TRAAC's three are
`TraacRewards`' methods, and each peer method (`traac.training.methods.registry.METHODS`, one
module each) brings its own length term, so adding a peer adds no line here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from traac.method.rewards import Gather
from traac.training.methods.base import GroupReward, MethodRun
from traac.training.methods.registry import METHODS
from traac.training.rewards import TraacRewards

RewardFunc = Callable[..., list[float]]
TRAAC_REWARDS = ("correctness_reward", "format_reward", "length_reward")


@dataclass(frozen=True)
class Mode:
    """What a value of `TRAACConfig.mode` trains."""

    name: str
    help: str
    compresses: bool  # right rollouts are compressed and re-answered (docs/method.md#step, 4-6)
    bins: bool  # prompts are binned by pass rate (peers: for telemetry only)
    rewards: tuple[str, ...]  # the reward functions TRL sums, in this order
    peer: bool = False  # a peer method's length term in place of TRAAC's length reward


MODES: dict[str, Mode] = {
    mode.name: mode
    for mode in (
        Mode("traac", "difficulty-aware attentive compression", True, True, TRAAC_REWARDS),
        Mode("cr", "correctness only", False, False, TRAAC_REWARDS[:1]),
        Mode("cr_lr", "+format+length, one bin, no compression", False, False, TRAAC_REWARDS),
        # The control the paper never ran: TRAAC less compression, so that what attentive
        # compression adds over difficulty calibration is one contrast (docs/method.md#modes).
        Mode(
            "traac_no_compression",
            "TRAAC's bins, per-bin length scales and windows; no compression",
            False,
            True,
            TRAAC_REWARDS,
        ),
        Mode(
            "compression_no_difficulty",
            "one bin, difficulty.single_tau",
            True,
            False,
            TRAAC_REWARDS,
        ),
        *(
            Mode(name, peer.help, False, True, (*TRAAC_REWARDS[:2], *own), peer=True)
            for name, peer in METHODS.items()
            for own in ([peer.reward] if peer.reward else [],)
        ),
    )
}


def compressing_modes() -> list[str]:
    """The modes that compress right rollouts, for the messages that name them."""
    return [name for name, mode in MODES.items() if mode.compresses]


def mode_rewards(
    mode: Mode,
    traac: TraacRewards,
    peer: MethodRun | None,
    num_generations: int | None,
    gather: Gather | None,
) -> tuple[GroupReward | None, list[RewardFunc]]:
    """The mode's reward functions, in TRL's order, bound to the objects that keep their
    state: `traac`'s (length windows, memoised verdicts) and, in a peer mode, the method's
    reward object built here from its resolved settings on the same verdicts."""
    registry: dict[str, RewardFunc] = {name: getattr(traac, name) for name in TRAAC_REWARDS}
    rewards = None
    if peer is not None:
        rewards = peer.rewards(traac.verdicts, num_generations, gather)
        if rewards.func is not None:
            registry[rewards.func.__name__] = rewards.func
    return rewards, [registry[name] for name in mode.rewards]
