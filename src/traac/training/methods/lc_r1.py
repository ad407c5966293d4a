"""LC-R1 (Cheng et al., "Optimizing Length Compression in Large Reasoning Models",
arXiv:2506.14755, zxiangx/LC-R1: `trl/trainer/grpo_trainer.py` of its TRL fork, lines
1307-1412, with `scripts/train.py`'s settings): a length reward against the group's longest
right answer, and a compress reward on the think block written after the answer was found.

The authors' two terms, per group (coefficients 1 and 1, `len_penalty_coef` and `add_adv`):

- length: every rollout of a group with a right answer earns 1 - L_i / (max_{right j} L_j +
  1e-4) (wrong ones too), a group with none 0; added to the rewards before the group mean is
  subtracted (`scale_rewards=False`).
- compress: their LC-Extractor (a fine-tuned 7B model) finds the prefix of each right answer's
  think block up to the first sentence that states the right answer; the rollout is trained as
  that prefix followed by its own `</think>` and answer, and its advantage at `</think>` gains
  1 - prefix / think (-1 where no prefix states the answer).

traac trains each rollout as sampled, so it cannot reward a `</think>` placed where the cropped
sequence puts it. It finds the first correct step with its own verifier in place of the
extractor (`traac.compression.first_correct`, as the first-correct penalty does) and charges the
share that follows it as a sequence reward: compress_i = -(think tokens after the first correct
step) / (think tokens) on a right answer, -1 where no step states the answer or the think block
is empty, 0 on a wrong one. L_i is the sampled length (the authors measure the cropped one).
Where and why this departs is in docs/peer_methods.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from traac.training.methods.base import LengthMethod, MethodSettings
from traac.training.methods.first_correct_penalty import FirstCorrectReward

EPS = 1e-4  # the authors'


@dataclass(frozen=True)
class LCR1Settings(MethodSettings):
    BLOCK, FLAT_PREFIX = "lc_r1", "lcr1_"
    POSITIVE = ("length_coef", "compress_coef")

    length_coef: float = field(
        default=1.0,
        metadata={"help": "lc_r1: weight of the length reward 1 - L / (longest right L) (the "
                  "authors' len_penalty_coef 1.0)."},
    )  # fmt: skip
    compress_coef: float = field(
        default=1.0,
        metadata={"help": "lc_r1: weight of the compress term on the think block after the "
                  "first correct step (the authors' add_adv 1.0)."},
    )  # fmt: skip


def lcr1_length_reward(lengths: Sequence[int], correct: Sequence[bool]) -> list[float]:
    """1 - L_i / (longest right answer + 1e-4) for every rollout; 0 if none is right."""
    right = [n for n, ok in zip(lengths, correct, strict=True) if ok]
    if not right:
        return [0.0] * len(lengths)
    longest = max(right) + EPS
    return [1.0 - n / longest for n in lengths]


def lcr1_compress(splits: Sequence[tuple[int, int] | bool | None]) -> list[float]:
    """Per rollout: False (wrong) 0; a right one's (tokens after the first correct step, think
    tokens) -after/think; None (no step states the answer) or an empty think block -1."""
    out = []
    for split in splits:
        if split is False:
            out.append(0.0)
        elif split is None or not split[1]:
            out.append(-1.0)
        else:
            out.append(-split[0] / split[1])
    return out


class LCR1Reward(FirstCorrectReward):
    def lc_r1_reward(
        self, completions: list[Any], completion_ids: list[Sequence[int]], **kwargs: Any
    ) -> list[float]:
        """Both terms: the length reward over each gathered group, the compress term on this
        process's right rollouts; this process's slice, scaled."""
        s = self.settings
        correct = self.verdicts(completions, **kwargs)
        found = self.after_first_correct(completion_ids, correct, kwargs)
        compress = lcr1_compress([found[i] if ok else False for i, ok in enumerate(correct)])
        length = self.per_group(completions, completion_ids, kwargs, lcr1_length_reward)
        return [
            s.length_coef * a + self.scale * s.compress_coef * b
            for a, b in zip(length, compress, strict=True)
        ]


METHOD = LengthMethod(
    name="lc_r1",
    paper="LC-R1, arXiv:2506.14755 (zxiangx/LC-R1)",
    help="LC-R1: length reward against the longest right answer, compress term after the answer",
    correctness=1.0,  # accuracy 1 (+ format 1)
    reward="lc_r1_reward",
    settings=LCR1Settings,
    make=LCR1Reward,
    values=lambda s, run: (
        f"{s.length_coef:g} (1 - L / max right L) + {s.compress_coef:g} x (-(think "
        "after the first correct step) / think on right answers, -1 where none states it)"
    ),
    compare=(("LC-R1", {"mode": "lc_r1", "scale_rewards": "none"}),),
)
