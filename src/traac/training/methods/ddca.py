"""DDCA, Dynamic Decoupled Conditional Advantage (arXiv:2602.02099, alphadl/DDCA,
`dca/advantage.py: advantage_dca_grpo`): correctness and length get separate advantages, the
length one only among a group's right answers and scaled by the group's pass rate.

Per group of G rollouts with n right ones (the set S_c), lengths l_i:

    A_acc_i = (r_i - mean r) / (std r + eps)          r_i = 1[correct], over all G
    z_i     = (l_i - mean_{S_c} l) / (std_{S_c} l + eps),  s_i = sigmoid(clip(z_i, -20, 20))
    A_len_i = -(n / G) (s_i - mean_{S_c} s)  for i in S_c, else 0
    A_i     = A_acc_i + beta A_len_i                  (beta 0.2, eps 1e-8; a std below eps is eps)

traac trains GRPO through TRL, which takes rewards, not advantages. Under `scale_rewards: none`
TRL's advantage is each reward minus its group's mean, so this method's reward is chosen to make
that mean-centred total DDCA's advantage times traac's right answer c: with traac's correctness
reward c r_i, the term c r_i (1 / (std r + eps) - 1) + c beta A_len_i (A_len sums to 0 over the
group; the accuracy part is 0 when all verdicts agree, where DDCA's A_acc is 0 too). The
compare variant sets `scale_rewards: none`; under `group` scaling TRL would divide the total
again by its standard deviation, which DDCA does not (docs/peer_methods.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from traac.training.methods.base import GroupReward, LengthMethod, MethodSettings, RunRule

EPS = 1e-8  # the authors' eps


@dataclass(frozen=True)
class DDCASettings(MethodSettings):
    BLOCK, FLAT_PREFIX = "ddca", "ddca_"
    POSITIVE = ("beta",)

    beta: float = field(
        default=0.2,
        metadata={"help": "ddca: beta, the weight of the length advantage among right answers "
                  "(the authors' 0.2)."},
    )  # fmt: skip


def ddca_length_advantage(lengths: Sequence[int], correct: Sequence[bool]) -> list[float]:
    """DDCA's A_len: minus each right answer's sigmoid length score around the right answers'
    mean score, times the pass rate n/G; 0 for wrong answers and for groups with none right."""
    ok = np.asarray(correct, dtype=bool)
    n = int(ok.sum())
    out = np.zeros(len(ok))
    if n == 0:
        return out.tolist()
    lens = np.asarray(lengths, dtype=np.float64)
    sigma = max(float(np.std(lens[ok])), EPS)
    z = (lens[ok] - np.mean(lens[ok])) / (sigma + EPS)
    s = 1.0 / (1.0 + np.exp(-np.clip(z, -20, 20)))
    out[ok] = -(s - s.mean()) * (n / len(ok))
    return out.tolist()


def ddca_reward(lengths: Sequence[int], correct: Sequence[bool], beta: float) -> list[float]:
    """The term that, added to a correctness reward of 1[correct] and centred on the group's
    mean, gives DDCA's advantage A_acc + beta A_len (at a right answer's weight of 1)."""
    r = np.asarray(correct, dtype=np.float64)
    length = beta * np.asarray(ddca_length_advantage(lengths, correct))
    if r.min() == r.max():  # all right or all wrong: A_acc is 0
        return length.tolist()
    sigma = max(float(np.std(r)), EPS)
    return (r * (1.0 / (sigma + EPS) - 1.0) + length).tolist()


class DDCAReward(GroupReward):
    def ddca_reward(
        self, completions: list[Any], completion_ids: list[Sequence[int]], **kwargs: Any
    ) -> list[float]:
        beta = self.settings.beta
        return self.per_group(
            completions, completion_ids, kwargs, lambda n, ok: ddca_reward(n, ok, beta)
        )


# Its reward is built so that the group-centred total is DDCA's advantage: TRL's `group` or
# `batch` scaling would divide it again (the accuracy part already is).
SCALE_NONE = RunRule(
    "scale_rewards",
    "its reward makes the group-centred total DDCA's advantage, which TRL would divide again",
    "set scale_rewards none (or leave it unset)",
    needs="none",
)

METHOD = LengthMethod(
    name="ddca",
    paper="DDCA, arXiv:2602.02099 (alphadl/DDCA)",
    help="DDCA: a length advantage among right answers only, scaled by the pass rate",
    correctness=1.0,  # r_acc = 1[correct]
    reward="ddca_reward",
    settings=DDCASettings,
    make=DDCAReward,
    values=lambda s, run: (
        f"A_acc + beta (n/G) A_len over right answers (sigmoid z-scores of length), beta {s.beta:g}"
    ),
    compare=(("DDCA", {"mode": "ddca", "scale_rewards": "none"}),),
    rules=(SCALE_NONE,),
)
