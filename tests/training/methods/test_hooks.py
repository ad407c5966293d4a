"""Each method's hooks for one run (`MethodHooks`): its rewards in TRL's order, bound to the
objects that keep their state; every peer method is a method with settings, described as
before."""

from __future__ import annotations

from unittest.mock import ANY

import pytest

from traac.training.methods.base import TRAAC_REWARDS, LengthMethod
from traac.training.methods.hooks import MethodHooks
from traac.training.methods.registry import METHODS
from traac.training.methods.traac import TraacMethod
from traac.training.methods.traac_rewards import TraacRewards
from traac.training.planning.traac_config import TRAACConfig

DESCRIPTIONS = {  # `--dry-run`'s line of each peer at max_completion_length 4000
    "alp": "ALP, arXiv:2506.05256: -(beta/N) max(p_solved, 1/K) |y|, beta 1, N 4000; length "
    "term x4 (right answer 4 here, 1 in the paper)",
    "shorterbetter": "ShorterBetter, arXiv:2504.21370: -beta |l - l_SOL|, beta 0.001; length "
    "term x2 (right answer 4 here, 2 in the paper)",
    "kimi": "Kimi k1.5, arXiv:2501.12599 section 2.3.3: weight 1 x (0.5 - (l - min) / (max - "
    "min)), wrong rollouts capped at 0; length term x4 (right answer 4 here, 1 in the paper)",
    "dapo_overlong": "DAPO Eq. 13, arXiv:2503.14476 (TRL's get_soft_overlong_punishment): 0 up "
    "to 3200, linear to -1 at 4000 tokens (L_cache 800); length term x2 (right answer 4 here, 2 "
    "in the paper)",
    "l1_max": "L1-Max, arXiv:2503.04697: 1[correct] clip(alpha (n_gold - n_y) + delta, 0, 1), "
    "alpha 0.0003, delta 0.5, n_gold ~ U{100..4000} per prompt, written into the prompt; length "
    "term x4 (right answer 4 here, 1 in the paper)",
    "dler": "DLER, arXiv:2510.15110 (NVlabs/DLER): -1[correct and |y| > L], L 4000; length term "
    "x4 (right answer 4 here, 1 in the paper)",
    "dler_difficulty": "Difficulty-aware DLER, arXiv:2510.15110: -1[correct and |y| > L(q)], L "
    "4000, floor(L x 0.5) when the group's pass rate >= 0.8; length term x4 (right answer 4 "
    "here, 1 in the paper)",
    "laser_d": "Laser-D, arXiv:2505.15612 (hkust-nlp/Laser): +0.5 for a right answer within its "
    "band's target, targets from 1000..4000 step 250, re-chosen every 20 steps (expected right "
    "1); length term x2.66667 (right answer 4 here, 1.5 in the paper)",
    "gfpo": "GFPO, arXiv:2508.09726: keep 4 of 8 per group by length; no length term; length "
    "term x4 (right answer 4 here, 1 in the paper)",
    "dot": "DOT, arXiv:2601.03969 (Anti-Length Shift): -1[all right, |y| - T >= m and y[:T] "
    "wrong], T = floor(mean + 1.35484 std), m 32; length term x4 (right answer 4 here, 1 in the "
    "paper)",  # alpha 3 x (7 / sqrt(8)) / (31 / sqrt(32)) at 8 rollouts
    "first_correct": "First-correct-answer penalty, arXiv:2601.02972 (Correct, Concise and "
    "Complete): -lambda x (think tokens after the first correct step / think tokens) on right "
    "answers, lambda 0.5; length term x4 (right answer 4 here, 1 in the paper)",
    "lc_r1": "LC-R1, arXiv:2506.14755 (zxiangx/LC-R1): 1 (1 - L / max right L) + 1 x (-(think "
    "after the first correct step) / think on right answers, -1 where none states it); length "
    "term x4 (right answer 4 here, 1 in the paper)",
    "ddca": "DDCA, arXiv:2602.02099 (alphadl/DDCA): A_acc + beta (n/G) A_len over right answers "
    "(sigmoid z-scores of length), beta 0.2; length term x4 (right answer 4 here, 1 in the paper)",
    "arlcp": "ARLCP, ICLR 2026 (ZeweiYu1/ARLCP): -w1 sigmoid(z(reflections)) - (0.2 - w1) "
    "sigmoid(z(length)) over right answers, w1 0.05 / 0.1 / 0.15 up to 40 / 80 / above; length "
    "term x4 (right answer 4 here, 1 in the paper)",
    "adaptthink": "AdaptThink, EMNLP 2025 (THU-KEG/AdaptThink): +delta on a rollout with an empty "
    "think block, delta 0.05; 0.5 of each group's rollouts start with one; length term x4 (right "
    "answer 4 here, 1 in the paper)",
}


def config(mode: str) -> TRAACConfig:
    return TRAACConfig(
        output_dir="unused", use_cpu=True, bf16=False, mode=mode, max_completion_length=4000
    )


@pytest.mark.parametrize("mode", list(METHODS))
def test_each_method_binds_its_named_rewards_in_order(mode: str) -> None:
    c = config(mode)
    traac = TraacRewards(c.reward_config(), difficulty=c.difficulty_config())
    run = c.method_run()
    hooks = MethodHooks(c.mode_spec, traac, run, 4, None)
    funcs = hooks.reward_funcs
    assert [f.__name__ for f in funcs] == list(c.mode_spec.rewards)
    assert all(f.__self__ is traac for f in funcs if f.__name__ in TRAAC_REWARDS)
    peer = isinstance(c.mode_spec, LengthMethod)  # a length term of its own
    assert (hooks.length is None) == (not peer) == (run is None)
    assert hooks.compresses == c.compresses
    if hooks.length is None:
        assert hooks.retain is None and hooks.state_dict() == {}
        return
    assert hooks.length.run == run and hooks.length.verdicts == traac.verdicts
    own = [] if hooks.length.func is None else [hooks.length.func]  # GFPO filters, adds no term
    assert funcs == [traac.correctness_reward, traac.format_reward, *own]
    assert (hooks.retain is not None) == hooks.length.filters == (mode == "gfpo")


def test_every_peer_is_a_method_with_settings_and_its_description() -> None:
    """Every peer the registry holds; the described ones (a newer peer's own test checks its
    line) word for word."""
    peers = [name for name, m in METHODS.items() if not isinstance(m, TraacMethod)]
    assert [name for name in peers if name in DESCRIPTIONS] == list(DESCRIPTIONS)
    assert all(isinstance(METHODS[name], LengthMethod) for name in peers)
    for name in peers:
        peer = METHODS[name]
        own = peer.rewards[2:]  # after correctness and format: the method's term, if any
        assert (peer.compresses, peer.bins, own) == (False, True, (peer.reward,) * bool(own))
        assert own or peer.reward is None
        assert config(name).method_run().describe() == DESCRIPTIONS.get(name, ANY)
    assert [name for name in peers if METHODS[name].prepare] == ["l1_max"]


def test_traac_s_own_methods_compress_as_named_and_only_those_have_settings() -> None:
    own = {name: m for name, m in METHODS.items() if isinstance(m, TraacMethod)}
    assert list(own) == ["traac", "cr", "cr_lr", "traac_no_compression",
                         "compression_no_difficulty"]  # fmt: skip
    assert [n for n, m in own.items() if m.compresses] == ["traac", "compression_no_difficulty"]
    assert [n for n, m in own.items() if m.settings] == ["traac", "compression_no_difficulty"]
    assert [n for n, m in own.items() if m.bins] == ["traac", "traac_no_compression"]
    assert own["cr"].rewards == TRAAC_REWARDS[:1]
    assert config("traac").method_run() is None
