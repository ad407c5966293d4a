"""Length rewards of TRAAC's peer methods, as pure functions of one prompt's group of rollouts.

Every reward takes the group (all rollouts GRPO sampled for one prompt: `lengths[i]` in response
tokens, `correct[i]` the verifier's verdict) and returns one float per rollout: the *length part*
of the method's reward only. The trainer adds correctness and format separately, so a method
whose paper writes one reward `r = c * 1[correct] + length term` is reproduced exactly when the
trainer's correctness weight is that paper's `c`:

- `alp_length_reward` (ALP, Xiang et al. 2025): c = 1;
- `shorterbetter_length_reward` (ShorterBetter, Yi et al. 2025): c = alpha = 2 (or 1);
- `kimi_length_reward` (Kimi k1.5): added to the correctness reward with a weight;
- `dapo_cache_length` (DAPO Eq. 13's band; the formula is TRL's own, composed in
  `traac.training.methods`, one module per method);
- `l1_max_length_reward` (L1-Max, Aggarwal & Welleck 2025): `r - 1[correct]`, so c = 1 gives
  the paper's multiplicative reward; `sample_l1_budget` and `l1_max_prompt` set up its prompts;
- `dler_length_reward` (DLER, Liu et al. 2025): the truncation penalty, c = 1; `dler_limit` is
  its difficulty-aware variant's limit per prompt;
- `laser_length_reward` (Laser-D, Liu et al. 2025): c = 1.5 (+1 right, -0.5 wrong);
  `laser_target_lengths` adapts its targets to difficulty and to training.

docs/peer_methods.md has the formulas, the paper values and a worked example of each.
"""

from __future__ import annotations

import math
import operator
import random
import statistics
from collections.abc import Sequence

from traac.compression.difficulty import pass_rate
from traac.errors import TraacError

DAPO_MAX_COMPLETION_LENGTH = 20480  # L_max, DAPO section 4.1: 16,384 expected + 4,096 cache
DAPO_CACHE_LENGTH = 4096  # L_cache, DAPO section 4.1
L1_MAX_INSTRUCTION = "Think for maximum {budget} tokens."
DLER_LENGTH = 4000  # DLER's truncation length (the authors' dler_slurm.sh max_response_length)
LASER_BANDS = ("low", "medium", "high")  # Laser-D's accuracy bands, hardest first


def alp_length_reward(
    lengths: Sequence[int], correct: Sequence[bool], *, beta: float, normalizer: float
) -> list[float]:
    """ALP's length penalty: `-(beta / N) * max(p_solved(q), 1 / K) * |y|` for every rollout.

    Xiang et al., "Just Enough Thinking: Efficient Reasoning with Adaptive Length Penalties
    Reinforcement Learning", arXiv:2506.05256, section 3 (the ALP reward):
    `r(y, q) = 1[answer(y) = y*] - (beta / N) * max(p_solved(q), K^-1) * |y|`, with
    `p_solved(q) = (1/K) sum_k 1[answer(y_k) = y*]` the online solve rate of the prompt's K
    rollouts. Easy prompts (high solve rate) pay more per token; the `1/K` floor keeps a small
    penalty on prompts no rollout solved. The correctness term is the trainer's (weight 1).

    Choices: the solve rate is this group's pass rate (the paper's K rollouts are GRPO's group).
    The penalty hits every rollout, right or wrong, as the formula reads. `beta` (the global
    coefficient) and `normalizer` (N) have no defaults: the paper's values could not be read
    from the sources available to traac, so a run must state both (docs/peer_methods.md).
    """
    lengths, correct = _group("alp", lengths, correct)
    _check_number("alp beta", beta, positive=True)
    _check_number("alp normalizer (N)", normalizer, positive=True)
    per_token = beta / normalizer * max(pass_rate(correct), 1.0 / len(lengths))
    return [-per_token * n for n in lengths]


def sample_optimal_length(lengths: Sequence[int], correct: Sequence[bool]) -> float:
    """ShorterBetter's SOL: the shortest right rollout's length, else the group's mean length."""
    lengths, correct = _group("shorterbetter", lengths, correct)
    right = [n for n, ok in zip(lengths, correct, strict=True) if ok]
    return float(min(right)) if right else statistics.fmean(lengths)


def shorterbetter_length_reward(
    lengths: Sequence[int], correct: Sequence[bool], *, beta: float = 0.001
) -> list[float]:
    """ShorterBetter's length term: `-beta * |l(y_j) - l_SOL(G(x_i))|` for every rollout.

    Yi, Wang and Li, "ShorterBetter: Guiding Reasoning Models to Find Optimal Inference Length
    for Efficient Reasoning", arXiv:2504.21370, method section (the SOL definition and the reward
    `r(y_j) = alpha * 1[y_j = y*_i] - beta * |l(y_j) - l_SOL(G(x_i))|`). The Sample Optimal
    Length is the shortest right rollout of the group; when none is right the paper takes the
    group's mean length (`sample_optimal_length`), so an unsolved prompt pulls lengths toward
    their mean instead of rewarding nothing. Defaults: beta = 0.001 and alpha = 2 (the trainer's
    correctness weight) are the authors' released setting (their models are "alpha_2"; the paper
    also trains alpha = 1).

    Both right and wrong rollouts are pulled toward the SOL, from above and from below, as the
    paper's absolute value reads: a wrong rollout shorter than the SOL is penalised too.
    """
    lengths, correct = _group("shorterbetter", lengths, correct)
    _check_number("shorterbetter beta", beta, positive=True)
    sol = sample_optimal_length(lengths, correct)
    return [-beta * abs(n - sol) for n in lengths]


def kimi_length_reward(
    lengths: Sequence[int], correct: Sequence[bool], *, weight: float = 1.0
) -> list[float]:
    """Kimi k1.5's length reward: `lambda` for a right rollout, `min(0, lambda)` for a wrong one.

    Kimi Team, "Kimi k1.5: Scaling Reinforcement Learning with LLMs", arXiv:2501.12599,
    section 2.3.3 (Length Penalty): `lambda = 0.5 - (len(i) - min_len) / (max_len - min_len)`
    over the k sampled responses of the problem, so the shortest gets +0.5 and the longest -0.5;
    wrong answers are never rewarded for being short, only penalised for being long. When
    `max_len = min_len` the paper sets the length reward to zero for all responses.

    The paper adds the length reward "to the original reward with a weighting parameter" and
    gives no value for it; `weight` defaults to 1.0, the unweighted `len_reward`. The paper also
    warms the penalty up (no length penalty first, then a constant one): that schedule belongs to
    the trainer, which sets `weight` per step.
    """
    lengths, correct = _group("kimi", lengths, correct)
    _check_number("kimi weight", weight, positive=False)
    low, high = min(lengths), max(lengths)
    if high == low:
        return [0.0] * len(lengths)
    out: list[float] = []
    for n, ok in zip(lengths, correct, strict=True):
        lam = 0.5 - (n - low) / (high - low)
        out.append(weight * (lam if ok else min(0.0, lam)))
    return out


def dapo_cache_length(max_completion_length: int, cache_length: int | None = None) -> int:
    """L_cache of DAPO's soft overlong punishment for a run whose responses stop at `L_max =
    max_completion_length` tokens: `cache_length` if given, else the paper's ratio.

    Yu et al., "DAPO: An Open-Source LLM Reinforcement Learning System at Scale",
    arXiv:2503.14476, Eq. 13: 0 up to `L_max - L_cache` tokens, then linear from 0 down to -1 at
    `L_max`, and -1 beyond. The paper uses L_max = 20480 and L_cache = 4096 (section 4.1: 16,384
    expected tokens plus a 4,096-token cache); the default keeps that ratio, `floor(L_max * 4096
    / 20480)`, one fifth, so a short run gets a band scaled to its budget. The formula itself is
    TRL's (`traac.training.methods.dapo_overlong.dapo_overlong_punishment`), not copied here.
    """
    max_len = _check_count("dapo max_completion_length", max_completion_length, minimum=1)
    if cache_length is None:
        return max_len * DAPO_CACHE_LENGTH // DAPO_MAX_COMPLETION_LENGTH
    cache = _check_count("dapo cache_length", cache_length, minimum=0)
    if cache > max_len:
        raise TraacError(
            f"dapo cache_length ({cache}) must not exceed max_completion_length ({max_len})"
        )
    return cache


def l1_max_length_reward(
    lengths: Sequence[int],
    correct: Sequence[bool],
    budgets: Sequence[int],
    *,
    alpha: float = 0.0003,
    delta: float = 0.5,
) -> list[float]:
    """L1-Max's budget reward less its correctness: `r - 1[correct]`, one value per rollout.

    Aggarwal and Welleck, "L1: Controlling How Long A Reasoning Model Thinks With Reinforcement
    Learning", arXiv:2503.04697, section 3 (LCPO-Max):
    `r(y, y_gold, n_gold) = 1[y = y_gold] * clip(alpha * (n_gold - n_y) + delta, 0, 1)`, with
    `n_gold` the budget written into the prompt ("Think for maximum n_gold tokens.") and `n_y`
    the response length. delta = 0.5 makes a right answer slightly over budget still beat a
    wrong one; alpha = 0.0003 is the paper's slope. The authors' code writes the same reward as
    `(clip(alpha * (n_gold - n_y), -1, 1) + 1) / 2` (half the slope); traac follows the paper.

    The reward is multiplicative, so its length part is `r - 1[correct]`: 0 for a wrong rollout,
    `clip(...) - 1` (in [-1, 0]) for a right one. A trainer adding correctness with weight 1 gets
    the paper's `r` exactly. `budgets[i]` is rollout i's `n_gold` (one prompt's rollouts share it).
    """
    lengths, correct = _group("l1-max", lengths, correct)
    if len(budgets) != len(lengths):
        raise TraacError(
            f"l1-max: {len(lengths)} lengths but {len(budgets)} budgets; one budget per rollout"
        )
    budgets = [_check_count("l1-max budget", b, minimum=1) for b in budgets]
    _check_number("l1-max alpha", alpha, positive=True)
    _check_number("l1-max delta", delta, positive=False)
    out: list[float] = []
    for n, ok, n_gold in zip(lengths, correct, budgets, strict=True):
        score = min(1.0, max(0.0, alpha * (n_gold - n) + delta))
        out.append(score - 1.0 if ok else 0.0)
    return out


def sample_l1_budget(rng: random.Random, *, low: int = 100, high: int = 4000) -> int:
    """One prompt's L1 budget `n_gold ~ U(n_min, n_max)`, an integer in [100, 4000] inclusive.

    The paper samples the target length uniformly between n_min = 100 and n_max = 4000 tokens;
    the authors' data script draws integers with both ends included, as here. Pass a seeded
    `random.Random` so the prompts of a run are reproducible.
    """
    low = _check_count("l1 budget low", low, minimum=1)
    high = _check_count("l1 budget high", high, minimum=1)
    if low > high:
        raise TraacError(f"l1 budget low ({low}) must not exceed high ({high})")
    return rng.randint(low, high)


def l1_max_prompt(prompt: str, budget: int) -> str:
    """The prompt with L1-Max's instruction appended after a space, as the authors' data does.

    Their L1-Max training data gives half the prompts the exact form ("Think for n_gold tokens.")
    instead; traac builds the maximum form only, the one L1-Max is evaluated and compared with.
    """
    budget = _check_count("l1-max budget", budget, minimum=1)
    return f"{prompt} {L1_MAX_INSTRUCTION.format(budget=budget)}"


def dler_length_reward(
    lengths: Sequence[int], correct: Sequence[bool], *, limit: int | Sequence[int]
) -> list[float]:
    """DLER's truncation penalty as a length term: -1 for a right rollout longer than `limit`
    tokens (it loses its correctness reward), 0 otherwise.

    Liu et al., "DLER: Doing Length pEnalty Right", arXiv:2510.15110: a response over the
    target length earns no reward, so `1[correct] + term` is `1[correct and |y| <= limit]`, the
    paper's reward with correctness weight 1. The authors' code gets the same by capping
    generation at the limit (`max_response_length`; a cut response has no answer). `limit` is one
    length for the group, or one per rollout (`dler_limit`, the difficulty-aware variant).
    """
    lengths, correct = _group("dler", lengths, correct)
    limits = [limit] * len(lengths) if isinstance(limit, int) else list(limit)
    if len(limits) != len(lengths):
        raise TraacError(f"dler: {len(lengths)} lengths but {len(limits)} limits")
    limits = [_check_count("dler limit", b, minimum=1) for b in limits]
    rows = zip(lengths, correct, limits, strict=True)
    return [-1.0 if ok and n > b else 0.0 for n, ok, b in rows]


def dler_limit(
    correct: Sequence[bool], *, limit: int, easy_threshold: float, easy_scale: float
) -> int:
    """Difficulty-aware DLER's truncation length for one prompt's group: `floor(limit *
    easy_scale)` when the group's pass rate is at least `easy_threshold` (an easy prompt),
    `limit` otherwise. The paper tightens the truncation on easier questions; its exact
    schedule is not in the authors' released code, so the rule and its values are traac's
    (docs/peer_methods.md)."""
    _check_count("dler limit", limit, minimum=1)
    _check_number("dler easy_scale", easy_scale, positive=True)
    if not correct:
        raise TraacError("dler: empty group; pass the verdicts of a prompt's rollouts")
    if pass_rate([bool(ok) for ok in correct]) >= easy_threshold:
        return max(1, math.floor(limit * easy_scale))
    return limit


def laser_band(pass_rate_: float) -> str:
    """The Laser-D band of a training prompt from its group's pass rate: `high` at 2/3 or more,
    `medium` at 1/3 or more, `low` below (the authors' `compute_length_reward_larse_d`)."""
    if pass_rate_ >= 2 / 3:
        return "high"
    return "medium" if pass_rate_ >= 1 / 3 else "low"


def laser_thresholds(lower: int, upper: int, interval: int) -> list[int]:
    """The candidate target lengths: `lower, lower + interval, ...` up to `upper` (the authors'
    `get_length_threshold` for a lower bound of 1024 or more), and `upper` itself."""
    lower = _check_count("laser lower", lower, minimum=1)
    upper = _check_count("laser upper", upper, minimum=1)
    interval = _check_count("laser interval", interval, minimum=1)
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
    checked = [_group("laser", n, ok) for n, ok in groups]
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
    lengths, correct = _group("laser", lengths, correct)
    target = _check_count("laser target", target, minimum=1)
    _check_number("laser bonus", bonus, positive=False)
    return [bonus if ok and n <= target else 0.0 for n, ok in zip(lengths, correct, strict=True)]


def _group(
    method: str, lengths: Sequence[int], correct: Sequence[bool]
) -> tuple[list[int], list[bool]]:
    """One prompt's rollouts, checked: as many verdicts as lengths, at least one of each."""
    checked = _lengths(method, lengths)
    if len(correct) != len(checked):
        raise TraacError(
            f"{method}: {len(checked)} lengths but {len(correct)} verdicts; one each per rollout"
        )
    return checked, [bool(ok) for ok in correct]


def _lengths(method: str, lengths: Sequence[int]) -> list[int]:
    if not lengths:
        raise TraacError(f"{method}: empty group; pass the lengths of a prompt's rollouts")
    return [_check_count(f"{method} length", n, minimum=0) for n in lengths]


def _check_count(name: str, value: int, *, minimum: int) -> int:
    try:
        count = operator.index(value)
    except TypeError:
        raise TraacError(f"{name} must be an integer >= {minimum}, got {value!r}") from None
    if isinstance(value, bool) or count < minimum:
        raise TraacError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return count


def _check_number(name: str, value: float, *, positive: bool) -> None:
    """A real number, > 0 or >= 0 (bools are not numbers here)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or not (value > 0 if positive else value >= 0):
        raise TraacError(f"{name} must be a number {'>' if positive else '>='} 0, got {value!r}")
