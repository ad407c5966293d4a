"""Held-out evaluation during training: the per-tier counts, and `traac train` on the quick
testbed with `eval_dataset` every step (which failed at trainer init before), its metrics
checked against TRL's own eval metrics of the same rollouts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from traac.cli import main as cli_main
from traac.training.telemetry.metrics_file import METRICS_FILE
from traac.training.telemetry.step_stats import RolloutView, read_metrics
from traac.training.trl_adapter.held_out import HeldOutCounts
from traac.training.trl_adapter.trainer import TRAACTrainer

RECIPE = Path(__file__).resolve().parents[3] / "recipes" / "testbed.yaml"
N = 4  # rollouts per prompt


def view(correct: bool, response: int, think: int) -> RolloutView:
    return RolloutView(correct, True, False, False, response, think, response - think - 1)


def test_counts_per_tier_and_over_all() -> None:
    held_out = HeldOutCounts()
    held_out.add(["easy", "hard"], [view(True, 10, 6), view(False, 30, 20)])
    held_out.add(["easy", None], [view(False, 20, 10), view(True, 8, 4)])  # no tier: all only
    assert held_out.metrics() == {
        "traac/all/accuracy": 0.5, "traac/all/response_tokens": 17.0,
        "traac/all/think_tokens": 10.0, "traac/all/rollouts": 4.0,
        "traac/easy/accuracy": 0.5, "traac/easy/response_tokens": 15.0,
        "traac/easy/think_tokens": 8.0, "traac/easy/rollouts": 2.0,
        "traac/hard/accuracy": 0.0, "traac/hard/response_tokens": 30.0,
        "traac/hard/think_tokens": 20.0, "traac/hard/rollouts": 1.0,
    }  # fmt: skip


def train_with_eval(
    quick_testbed: Path, out: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> list[dict]:
    """`traac train` of 2 steps with the held-out problems evaluated after each; what the
    trainer handed every report_to logger, each with its step."""
    logged: list[dict] = []
    log = TRAACTrainer.log

    def spy(self: TRAACTrainer, logs: dict, *args: Any) -> None:
        log(self, logs, *args)
        logged.append({**logs, "step": self.state.global_step})

    monkeypatch.setattr(TRAACTrainer, "log", spy)
    code = cli_main(
        ["train", "--config", str(RECIPE), "--model_name_or_path", str(quick_testbed),
         "--dataset", "testbed:easy?n=4", "--eval_dataset", "testbed:all?n=2",
         "--eval_strategy", "steps", "--eval_steps", "1", "--per_device_eval_batch_size", "8",
         "--output_dir", str(out), "--mode", mode, "--max_steps", "2",
         "--per_device_train_batch_size", str(2 * N), "--num_generations", str(N),
         "--max_completion_length", "48", "--disable_tqdm", "true"]
    )  # fmt: skip
    assert code == 0
    return logged


@pytest.mark.slow
def test_train_evaluates_the_held_out_problems_every_eval_steps(
    quick_testbed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    logged = train_with_eval(quick_testbed, out, "cr", monkeypatch)
    lines = [json.loads(x) for x in (out / METRICS_FILE).read_text().splitlines()]
    evals = [r for r in lines if r.get("split") == "eval"]
    assert [r["step"] for r in evals] == [1, 2]
    assert [s.step for s in read_metrics(out / METRICS_FILE)] == [1, 2]  # training steps only
    for record in evals:
        # 2 problems per tier x N rollouts; the tiers add up to all
        assert record["traac/all/rollouts"] == 6 * N
        for tier in ("easy", "medium", "hard"):
            assert record[f"traac/{tier}/rollouts"] == 2 * N
            assert (
                0 <= record[f"traac/{tier}/think_tokens"] <= record[f"traac/{tier}/response_tokens"]
            )
        tiers = [record[f"traac/{t}/accuracy"] for t in ("easy", "medium", "hard")]
        assert record["traac/all/accuracy"] == pytest.approx(sum(tiers) / 3)
    evaluations = [h for h in logged if "eval_traac/all/accuracy" in h]
    assert [h["step"] for h in evaluations] == [1, 2]
    for h, record in zip(evaluations, evals, strict=True):
        for key, value in record.items():
            if key.startswith("traac/"):
                assert h[f"eval_{key}"] == pytest.approx(value)  # the same numbers to report_to
        # TRL's own metrics of the same rollouts (3 equal batches of 8): the correctness reward
        # is 4 for a right answer, and its mean completion length counts the same tokens.
        assert h["eval_rewards/correctness_reward/mean"] == pytest.approx(
            4 * record["traac/all/accuracy"]
        )
        assert h["eval_completions/mean_length"] == pytest.approx(
            record["traac/all/response_tokens"]
        )


@pytest.mark.slow
def test_a_methods_metric_of_a_training_step_leaves_the_evaluation_out(
    quick_testbed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AdaptThink logs its share of empty think blocks whenever its reward runs, held-out
    evaluation included: TRL keeps those apart (`eval_...`), and so does `metrics.jsonl`,
    whose line of step 2 is that step's training rollouts alone, as TRL's train log is."""
    out = tmp_path / "out"
    logged = train_with_eval(quick_testbed, out, "adaptthink", monkeypatch)
    key = "adaptthink/no_think_share"
    train = {h["step"]: h[key] for h in logged if key in h}
    assert [h["step"] for h in logged if f"eval_{key}" in h] == [1, 2]
    rows = [json.loads(x) for x in (out / METRICS_FILE).read_text().splitlines()]
    kept = {r["step"]: r[key] for r in rows if r.get("split") != "eval"}
    assert set(kept) == set(train) == {1, 2}
    for step, share in kept.items():
        assert share == pytest.approx(train[step])
