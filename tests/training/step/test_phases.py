"""The TRAAC step without a model: binning, selection, pooling (N kept, seeded shuffle),
dropping, each process's slice, the per-batch state and the step's telemetry."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from traac.compression.compression import CompressionResult
from traac.compression.difficulty import SINGLE_BIN, DifficultySettings
from traac.compression.formats import ChatFormat
from traac.compression.segmentation import Step
from traac.training.step import phases as step
from traac.training.step.phases import Compression, Rollout, TraacStep
from traac.training.telemetry.step_stats import ALL

N = 4


def rollout(origin: int, correct: bool = True, well_formed: bool = True, **kw: object) -> Rollout:
    ids = kw.pop("ids", [origin])
    return Rollout(ids, None, f"r{origin}", correct, well_formed, True, origin, **kw)  # type: ignore[arg-type]


def result(tokens_before: int = 10, tokens_after: int = 6) -> CompressionResult:
    steps = [Step("a", 0, 1), Step("b", 1, 2)]
    return CompressionResult(
        "ab", steps, np.array([0.7, 0.3]), [True, False], 0.5, 0.5, "a", tokens_before, tokens_after
    )


def test_bins_follow_the_pass_rate_thresholds() -> None:
    verdicts = [True] * 4 + [True, True, False, True] + [True, False, False, False] + [False] * 4
    rates, bins = step.bin_groups(verdicts, N, DifficultySettings())
    assert rates == [1.0, 0.75, 0.25, 0.0]
    assert bins == ["easy", "medium", "hard", "hard"]
    # The thresholds are inclusive: 4 of 5 right is exactly 0.8, easy; 3 of 10 is 0.3, medium.
    assert step.bin_groups([True] * 4 + [False], 5, DifficultySettings())[1] == ["easy"]
    assert step.bin_groups([True] * 3 + [False] * 7, 10, DifficultySettings())[1] == ["medium"]
    assert step.bin_groups(verdicts, N, DifficultySettings(enabled=False))[1] == [SINGLE_BIN] * 4


def test_selection_takes_only_right_well_formed_rollouts_at_their_bins_tau() -> None:
    rollouts = [
        rollout(0),
        rollout(1, correct=False),
        rollout(2, well_formed=False),
        rollout(3),
    ]
    chosen = step.select_candidates(
        rollouts, ["easy", "easy", "easy", "hard"], DifficultySettings()
    )
    assert [(r.origin, tau) for r, tau in chosen] == [(0, 0.6), (3, 0.2)]


def two_groups() -> tuple[list[Rollout], list[Rollout], list[Compression]]:
    originals = [rollout(i) for i in range(2 * N)]
    copies = [rollout(i, compressed=True, ids=[100 + i]) for i in (0, 1, 3)]
    compressions = [Compression(i, result(), 0.6, prefix_ids=[7]) for i in (0, 1, 3)]
    return originals, copies, compressions


def test_pooling_keeps_n_and_leaves_groups_without_copies_as_they_were() -> None:
    originals, copies, compressions = two_groups()
    groups = step.pool(
        originals, copies, compressions, ["a"] * N + ["b"] * N, [1.0, 1.0], ["easy"] * 2, N,
        (0, 5),
    )  # fmt: skip
    assert [len(g.pooled) for g in groups] == [N, N]
    assert [g.data_source for g in groups] == ["a", "b"]
    first, second = groups
    assert {r.origin for r in first.pooled} <= set(range(N))
    assert all(r in originals[:N] + copies for r in first.pooled)
    assert [c.origin for c in first.compressions] == [0, 1, 3] and second.compressions == []
    assert second.pooled == second.originals == originals[N:]


def test_pooling_shuffles_with_the_seed_the_step_and_the_group() -> None:
    originals, copies, compressions = two_groups()

    def pooled(seed: tuple[int, int]) -> list[Rollout]:
        args = (originals, copies, compressions, ["a"] * 2 * N, [1.0, 1.0], ["easy"] * 2, N)
        return step.pool(*args, seed)[0].pooled

    candidates = originals[:N] + copies
    order = np.random.default_rng([3, 7, 0]).permutation(len(candidates))[:N]
    assert pooled((3, 7)) == [candidates[k] for k in order]
    assert pooled((3, 7)) == pooled((3, 7))
    assert any(pooled((3, step)) != pooled((3, 7)) for step in range(8, 12))


def test_degenerate_groups_are_dropped_only_under_dynamic_sampling() -> None:
    originals = [rollout(i) for i in range(N)] + [rollout(N + i, i == 0) for i in range(N)]
    assert step.degenerate(originals[:N]) and not step.degenerate(originals[N:])
    for sampling, dropped in (("none", [False, False]), ("drop", [True, False])):
        groups = step.pool(
            originals, [], [], ["a"] * 2 * N, [1.0, 0.25], ["easy", "hard"], N, (0, 0)
        )
        step.mark_dropped(groups, [2, 0], sampling)
        assert [g.dropped for g in groups] == dropped
        assert [g.resampled for g in groups] == [2, 0]


def test_degenerate_groups_get_replacement_prompts_drawn_with_the_seed() -> None:
    originals = (
        [rollout(i) for i in range(N)]
        + [rollout(N + i, i == 0) for i in range(N)]
        + [rollout(2 * N + i, False) for i in range(N)]
    )
    picks = step.replacements(originals, N, 100, (1, 2, 3))
    expected = np.random.default_rng([1, 2, 3]).integers(100, size=2)
    assert picks == {0: int(expected[0]), 2: int(expected[1])}
    assert step.replacements(originals[N : 2 * N], N, 100, (1, 2, 3)) == {}


def test_each_process_gets_its_slice_and_the_columns_its_rewards_read() -> None:
    originals = [rollout(i) for i in range(N)] + [rollout(N + i, i == 0) for i in range(N)]
    groups = step.pool(originals, [], [], ["a"] * 2 * N, [1.0, 0.25], ["easy", "hard"], N, (0, 0))
    step.mark_dropped(groups, [0, 0], "drop")
    # Two processes of 4 rows each, the second holding the rows 4..7 (the second group).
    part = step.slice_of(groups, N - 2, N, N, "drop")
    assert [r.origin for r in part.rollouts] == [2, 3, 4, 5]
    assert part.columns.bin == ["easy", "easy", "hard", "hard"]
    assert part.columns.correct == [True, True, True, False]
    assert part.columns.compressed == [False] * 4
    assert part.dropped == [True, True, False, False]
    assert step.slice_of(groups, 0, N, N, "none").dropped is None


def test_a_step_result_hands_trl_its_pooled_rollouts_and_new_reward_rows() -> None:
    originals = [rollout(i) for i in range(N)]
    groups = step.pool(originals, [], [], ["a"] * N, [0.5], ["medium"], N, (0, 0))
    rows = [{"prompt": "q", "answer": "1"} for _ in range(N)]
    result = step.StepResult(
        step.TraacStep(1, groups), rows, [[1, 2]] * N, step.slice_of(groups, 0, N, N, "drop"),
        sampled_logprobs=False,
    )  # fmt: skip
    assert result.completion_ids == [r.completion_ids for r in originals]
    assert result.logprobs is None and result.dropped == [False] * N
    rewarded = result.reward_rows({"evaluation": True})
    assert [r["correct"] for r in rewarded] == result.columns.correct
    assert {r["bin"] for r in rewarded} == {"medium"} and all(r["evaluation"] for r in rewarded)
    assert all("dropped" not in r for r in rewarded)  # the step carries them, not the rows
    assert all(r[step.STEP_COLUMN] is result for r in rewarded)  # for the keep phase
    assert result.every_dropped == [False] * N and result.left_out == [False] * N
    assert rows == [{"prompt": "q", "answer": "1"}] * N  # new rows; the given ones untouched


class Tokenizer:
    """Token ids are characters' codes; `</think>` is one token, 9."""

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [9] if text == "</think>" else [ord(c) for c in text]


def test_step_stats_per_scope() -> None:
    eos = 0
    originals = [
        rollout(0, ids=[1, 2, 9, 3, eos]),  # think 2, answer 1, closed by eos
        rollout(1, ids=[1, 9, 3, 4, eos]),  # think 1, answer 2
        rollout(2, correct=False, ids=[1, 2, 3, 4, 5]),  # no closer: clipped, all think
        rollout(3, correct=False, ids=[1, 9, 3, eos]),
    ]
    copy = rollout(0, compressed=True, ids=[1, 9, 3, eos])
    compressions = [Compression(0, result(), 0.6, prefix_ids=[1, 9]), Compression(1, result(), 0.6)]
    groups = step.pool(originals, [copy], compressions, ["a"] * N, [0.5], ["medium"], N, (0, 1))
    step.mark_dropped(groups, [0], "drop")
    stats = step.step_stats(
        TraacStep(2, groups), ("easy", "medium", "hard"), Tokenizer(), ChatFormat(), [eos],
        {"generate": 1.5}, {"correctness_reward": 2.0}, "drop",
    )  # fmt: skip
    assert stats.step == 2 and set(stats.scopes) == {ALL, "easy", "medium", "hard"}
    scope = stats.scopes[ALL]
    assert stats.scopes["medium"] == scope and stats.scopes["easy"].prompts == 0
    assert (scope.prompts, scope.rollouts, scope.pass_rate) == (1, N, 0.5)
    assert (scope.candidates, scope.compressed_rollouts, scope.dropped) == (2, 1, 0)
    assert scope.steps_removed == 1 and scope.tokens_removed == 4
    pooled = groups[0].pooled
    assert scope.compressed_frac == pytest.approx(sum(r.compressed for r in pooled) / N)
    assert scope.clipped_frac == pytest.approx(sum(r.origin == 2 for r in pooled) / N)
    flat = stats.flat()
    assert flat["traac/seconds/generate"] == 1.5 and flat["traac/reward/correctness_reward"] == 2
    assert "traac/sampling/resample_rounds" not in flat


def test_step_stats_count_the_kinds_evicted_on_testbed_prompts() -> None:
    reasoning = "First, 3 + 5 = 8.\nSo the answer is 8.\nWait, 3 + 5 = 8.\nSo the answer is 8.\n"
    cuts = [0, 18, 38, 55, len(reasoning)]
    steps = [Step(reasoning[a:b], a, b) for a, b in itertools.pairwise(cuts)]
    evicted = CompressionResult(
        reasoning, steps, np.ones(4), [False, True, False, True], 0.5, 0.5, "", 20, 10
    )  # the compute step and the re-check evicted
    kept = CompressionResult(reasoning, steps, np.ones(4), [True] * 4, 0.9, 0.0, "", 20, 20)
    originals = [rollout(i) for i in range(2 * N)]
    compressions = [Compression(0, evicted, 0.6, prefix_ids=[1]), Compression(N, kept, 0.6)]
    for source in ("testbed", "gsm8k"):
        groups = step.pool(
            originals, [], compressions, [source] * 2 * N, [1.0, 1.0], ["easy"] * 2, N, (0, 0),
            ["medium"] * N + ["easy"] * N,
        )  # fmt: skip
        stats = step.step_stats(
            TraacStep(1, groups), ("easy",), Tokenizer(), ChatFormat(), [0], {}, {}
        )
        scope = stats.scopes["easy"]
        if source == "testbed":
            assert (scope.evicted_compute, scope.evicted_conclude, scope.evicted_recheck) == (
                1.0, 0.0, 1.0
            )  # fmt: skip
            assert scope.compute_loss == 0.5  # one of the two candidates' two compute steps
            assert stats.flat()["traac/easy/compute_loss"] == 0.5
            # by the problems' tiers: the medium problem lost its computation, the easy one not
            assert (scope.compute_loss_medium_tier, scope.compute_loss_easy_tier) == (1.0, 0.0)
            assert scope.compute_loss_hard_tier is None
            assert stats.flat()["traac/easy/compute_loss_medium_tier"] == 1.0
        else:  # no labels outside the testbed's format
            assert scope.evicted_compute is None and scope.compute_loss is None


def test_answer_only_masks_the_think_block_of_each_copy_in_the_slice() -> None:
    originals = [rollout(i, ids=[i] * 5) for i in range(N)]
    copy = rollout(1, ids=[7, 7, 7, 1, 2], compressed=True, think_prefix=3)
    groups = step.pool(originals, [copy], [], ["a"] * N, [1.0], ["easy"], N, (0, 0))
    assert copy in groups[0].pooled  # the seed keeps it
    part = step.slice_of(groups, 0, N, N, "none", masks_think=True)
    assert part.loss_masks == [[0, 0, 0, 1, 1] if r is copy else [1] * 5 for r in part.rollouts]
    result = step.StepResult(step.TraacStep(1, groups), [{}] * N, [[1]] * N, part, False)
    assert result.rollout_output()["env_mask"] == part.loss_masks  # TRL's tool mask
    full = step.slice_of(groups, 0, N, N, "none")
    assert full.loss_masks is None
    full_result = step.StepResult(step.TraacStep(1, groups), [{}] * N, [[1]] * N, full, False)
    assert "env_mask" not in full_result.rollout_output()


def test_mark_copies_records_each_copys_origin_and_think_block() -> None:
    copies = [rollout(0, ids=[1, 2, 3, 4]), rollout(0, ids=[5, 6])]
    used = [Compression(2, result(), 0.6, prefix_ids=[9, 9]),
            Compression(5, result(), 0.6, prefix_ids=[9])]  # fmt: skip
    step.mark_copies(copies, used)
    assert [(r.origin, r.compressed, r.think_prefix) for r in copies] == [
        (2, True, 2),
        (5, True, 1),
    ]


def test_each_group_holding_a_copy_is_recorded_with_advantages_and_ranks() -> None:
    reasoning = "First, 3 + 5 = 8.\nSo the answer is 8.\nWait, 3 + 5 = 8.\nSo the answer is 8.\n"
    cuts = [0, 18, 38, 55, len(reasoning)]
    steps = [Step(reasoning[a:b], a, b) for a, b in itertools.pairwise(cuts)]
    evicted = CompressionResult(
        reasoning, steps, np.ones(4), [False, True, False, True], 0.5, 0.5, "", 20, 10
    )  # the compute step and the re-check evicted
    rechecked = CompressionResult(
        reasoning, steps, np.ones(4), [True, True, False, True], 0.5, 0.5, "", 20, 15
    )  # the re-check alone
    originals = [rollout(i, correct=i % 4 != 3) for i in range(3 * N)]
    copy0 = rollout(0, compressed=True, think_prefix=1)
    copy9 = rollout(9, compressed=True, think_prefix=1)
    groups = [
        step.Group(0, "testbed", 0.75, "medium", originals[:N],
                   [Compression(0, evicted, 0.4, prefix_ids=[1])], [copy0, *originals[1:N]]),
        step.Group(1, "testbed", 0.75, "medium", originals[N : 2 * N], [], originals[N : 2 * N]),
        step.Group(2, "gsm8k", 0.75, "medium", originals[2 * N :],
                   [Compression(9, rechecked, 0.4, prefix_ids=[1])],
                   [originals[8], copy9, originals[10], originals[11]]),
    ]  # fmt: skip
    advantages = [1.5, 0.5, 0.5, -2.5] + [0.0] * N + [0.3, 0.9, 0.3, -1.5]
    records = step.pooled_records(groups, advantages)
    assert [r.group for r in records] == [0] * N + [2] * N  # group 1 holds no copy
    assert [(r.copy, r.correct, r.advantage, r.rank) for r in records[:N]] == [
        (True, True, 1.5, 1), (False, True, 0.5, 2), (False, True, 0.5, 2), (False, False, -2.5, 4),
    ]  # fmt: skip
    assert (records[0].evicted, records[0].compute_evicted) == (2, 1)  # testbed labels
    assert [r.compute_evicted for r in records[1:N]] == [0, 0, 0]
    assert (records[N + 1].copy, records[N + 1].evicted, records[N + 1].compute_evicted) == (
        True,
        1,
        None,
    )  # fmt: skip: no labels outside the testbed's format
    assert [r.kind for r in records] == [
        "compute-evicted copies", *["their groups' originals"] * 3,
        "their groups' originals", "other copies", *["their groups' originals"] * 2,
    ]  # fmt: skip
    stats = step.step_stats(
        TraacStep(1, groups), ("medium",), Tokenizer(), ChatFormat(), [0], {}, {},
        advantages=advantages,
    )  # fmt: skip
    assert stats.copy_groups == records
    flat = stats.flat()
    assert (flat["traac/copies/compute_evicted_count"], flat["traac/copies/other_count"]) == (1, 1)
    assert flat["traac/copies/compute_evicted_advantage"] == 1.5
    assert flat["traac/copies/originals_correct"] == pytest.approx(4 / 6)
    assert flat["traac/copies/originals_rank"] == pytest.approx((2 + 2 + 4 + 2 + 2 + 4) / 6)
    no_advantages = step.step_stats(TraacStep(1, groups), ("medium",), Tokenizer(), ChatFormat(),
                                    [0], {}, {})  # fmt: skip
    assert (
        no_advantages.copy_groups == [] and "traac/copies/other_count" not in no_advantages.flat()
    )
