"""avg@k, pass@k and maj@k on crafted problems, each value computed by hand from the definitions
lighteval's `AvgAtN`, `PassAtK` and `MajAtN` use; the bootstrap interval against the analytic
one on a large sample."""

from __future__ import annotations

import math

import numpy as np
import pytest

from traac.errors import TraacError
from traac.evaluation.harness.metrics import (
    Sample,
    bootstrap_mean_ci,
    default_ks,
    g_pass_at_k,
    majority_index,
    mg_pass_at_k,
    pass_at_k,
    sampling_stats,
    spread,
    string_vote,
)


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (4, 1, 2, 1 - 3 / 6),  # 1 - C(3,2)/C(4,2)
        (5, 2, 3, 1 - 1 / 10),  # 1 - C(3,3)/C(5,3)
        (10, 3, 1, 0.3),  # pass@1 is the share right
        (10, 3, 4, 1 - 35 / 210),  # 1 - C(7,4)/C(10,4)
        (4, 0, 4, 0.0),
        (4, 4, 1, 1.0),
        (4, 2, 3, 1.0),  # fewer than k wrong samples: some draw of k always holds a right one
    ],
)
def test_pass_at_k_is_the_unbiased_estimator(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected)
    assert pass_at_k(n, c, k) == pytest.approx(1 - math.comb(n - c, k) / math.comb(n, k))


# G-Pass@k_tau = P(at least m = max(ceil(k tau), 1) right among k of n drawn, c right), counted by
# hand: n = 5, c = 3, k = 3 draws C(5,3) = 10 sets; 1 of them holds 3 right, C(3,2) C(2,1) = 6
# hold 2, C(3,1) C(2,2) = 3 hold 1, none holds 0.
@pytest.mark.parametrize(
    ("tau", "expected"),
    [
        (0.0, 1.0),  # m = 1: every set holds one right (pass@3)
        (0.25, 1.0),  # m = ceil(0.75) = 1
        (0.5, (6 + 1) / 10),  # m = ceil(1.5) = 2
        (0.75, 1 / 10),  # m = ceil(2.25) = 3
        (1.0, 1 / 10),  # m = 3
    ],
)
def test_g_pass_at_k_is_lightevals_hypergeometric_tail(tau: float, expected: float) -> None:
    assert g_pass_at_k(5, 3, 3, tau) == pytest.approx(expected, abs=1e-15)


def test_mg_pass_at_k_by_hand() -> None:
    # i from ceil(3/2) + 1 = 3 to 3: (2/3) P(3 right) = (2/3)(1/10)
    assert mg_pass_at_k(5, 3, 3) == pytest.approx(2 / 3 * 1 / 10)
    # n = 6, c = 4, k = 4: i = 3, 4; P(>= 3) = (C(4,3) C(2,1) + 1) / C(6,4) = 9/15, P(4) = 1/15
    assert mg_pass_at_k(6, 4, 4) == pytest.approx(2 / 4 * (9 / 15 + 1 / 15))
    assert mg_pass_at_k(6, 4, 1) == 0.0  # lighteval: the sum over (1, 1] is empty
    assert g_pass_at_k(6, 1, 4, 0.5) == 0.0  # m = 2 > c: lighteval's guard
    with pytest.raises(TraacError, match="G-Pass@k"):
        g_pass_at_k(3, 1, 4, 0.5)


def test_pass_at_k_refuses_impossible_counts() -> None:
    with pytest.raises(TraacError, match="pass@k"):
        pass_at_k(4, 5, 1)
    with pytest.raises(TraacError, match="pass@k"):
        pass_at_k(4, 1, 5)


def test_default_ks() -> None:
    assert default_ks(1) == [1]
    assert default_ks(4) == [1, 2, 4]
    assert default_ks(6) == [1, 2, 4, 6]
    assert default_ks(32) == [1, 2, 4, 8, 16, 32]


@pytest.mark.parametrize(
    ("answers", "winner"),
    [
        (["3", "5", "5"], 1),
        (["3", "5", "5", "3"], 0),  # a tie goes to the answer given first (lighteval's max)
        (["5", "3", "3", "5"], 0),
        (["7", "3", "5", "3", "5"], 1),  # 3 and 5 tie; 3 came first
        (["4 ", " 4", "7"], 0),  # whitespace does not split votes
        (["a", "A"], 0),  # case is kept: two answers, tie, the first wins
    ],
)
def test_majority_index(answers: list[str], winner: int) -> None:
    votes = [string_vote(a) for a in answers]
    assert majority_index(votes) == winner
    keys = [" ".join(a.split()) for a in answers]
    assert keys[winner] == max(keys, key=keys.count)  # lighteval's rule


@pytest.mark.parametrize(
    ("answers", "winner"),
    [
        ([None, None, "4"], 2),  # no answer casts no vote (lighteval: "" wins, sample 0)
        ([None, "", "4", "5"], 2),  # nor does an empty one; 4 and 5 tie, 4 first
        ([None, ""], None),  # nobody voted
    ],
)
def test_a_missing_answer_never_votes(answers: list[str | None], winner: int | None) -> None:
    assert majority_index([string_vote(a) for a in answers]) == winner


def test_votes_may_be_verifier_groups() -> None:
    # Samples 0, 2, 3 are one answer by the verifier (say 1/2, 0.5, \frac{1}{2}); 1 is another.
    assert majority_index([0, 1, 0, 0]) == 0
    assert majority_index([None, 1, 2, 2]) == 2


def samples_of(rows: dict[str, list[tuple[str | None, bool]]]) -> list[Sample]:
    """Problem -> [(extracted answer, right)] in sample order; written out of order."""
    out = [
        Sample(pid, k, ok, string_vote(answer), 10 * (k + 1), 5 * (k + 1), answer is not None, None)
        for pid, row in rows.items()
        for k, (answer, ok) in enumerate(row)
    ]
    return out[::-1]


def test_sampling_stats_by_hand() -> None:
    stats = sampling_stats(
        samples_of(
            {
                # gold 4: two right of four; the majority (5 twice, 4 twice) ties, 5 first.
                "p": [("5", False), ("4", True), ("5", False), ("4", True)],
                # gold 1: one right of four; 1 is alone against two 2s.
                "q": [("1", True), ("2", False), ("2", False), ("3", False)],
                # gold 9: all right.
                "r": [("9", True)] * 4,
            }
        )
    )
    assert stats.n_items == 3 and stats.samples_per_item == 4
    assert stats.avg == pytest.approx(100 * (0.5 + 0.25 + 1.0) / 3)
    # pass@1 = avg@k; pass@2: p 1-C(2,2)/C(4,2) = 5/6, q 1-C(3,2)/C(4,2) = 1/2, r 1.
    assert stats.pass_at[1] == pytest.approx(stats.avg)
    assert stats.pass_at[2] == pytest.approx(100 * (5 / 6 + 1 / 2 + 1) / 3)
    assert stats.pass_at[4] == pytest.approx(100.0)
    # maj@1: the first sample: p wrong, q right, r right.
    assert stats.maj_at[1] == pytest.approx(200 / 3)
    # maj@2: p (5, 4) tie -> 5 wrong; q (1, 2) tie -> 1 right; r right.
    assert stats.maj_at[2] == pytest.approx(200 / 3)
    # maj@4: p tie 5/4 -> 5 wrong; q 2 wins -> wrong; r right.
    assert stats.maj_at[4] == pytest.approx(100 / 3)
    # Lengths: response 10 * (sample + 1); right samples p1 p3 q0 r0..r3.
    right = [20, 40, 10, 10, 20, 30, 40]
    assert stats.response_right.mean == pytest.approx(np.mean(right))
    assert stats.response_right.median == 20
    assert stats.response_right.p90 == pytest.approx(np.percentile(right, 90))
    assert stats.response_wrong.n == 5
    assert stats.unclosed_rate == 0.0 and stats.truncated_rate is None
    low, high = stats.avg_ci
    assert low < stats.avg < high


def test_a_problem_where_nobody_answers_scores_zero_at_maj() -> None:
    stats = sampling_stats(samples_of({"p": [(None, False)] * 2, "q": [("3", True)] * 2}))
    assert stats.maj_at[2] == pytest.approx(50.0)


def test_uneven_samples_stop_k_at_the_smallest_count() -> None:
    stats = sampling_stats(samples_of({"p": [("1", True)] * 3, "q": [("1", False)] * 2}))
    assert stats.samples_per_item == 2
    assert sorted(stats.pass_at) == [1, 2]
    assert stats.avg == pytest.approx(50.0)  # per problem first: (1 + 0) / 2


def test_bootstrap_interval_matches_the_normal_one_on_many_problems() -> None:
    rng = np.random.default_rng(1)
    values = rng.random(400)
    low, high = bootstrap_mean_ci(values)
    half = 1.96 * values.std(ddof=1) / math.sqrt(len(values))
    assert low == pytest.approx(values.mean() - half, abs=0.006)
    assert high == pytest.approx(values.mean() + half, abs=0.006)
    assert bootstrap_mean_ci(values) == (low, high)  # seeded: a re-report repeats it
    assert bootstrap_mean_ci([0.7]) == (0.7, 0.7)
    assert bootstrap_mean_ci([1.0, 1.0, 1.0]) == (1.0, 1.0)


def test_spread_of_nothing() -> None:
    assert spread([]).mean is None
    assert spread([3, 1, 2]).median == 2
