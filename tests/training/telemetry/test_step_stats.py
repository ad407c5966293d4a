"""Training telemetry read back from a short run on the quick testbed: every key the README
names is in `metrics.jsonl` and in what TRL hands its `report_to` loggers, and the numbers
agree with each other (whatever the weights make the model write)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from transformers import TrainerCallback

from traac.common.models import load_tokenizer
from traac.data.testbed_problems import make_items
from traac.data.training import items_to_dataset
from traac.training.planning.traac_config import TRAACConfig
from traac.training.telemetry.copy_stats import COPY_GROUPS, KINDS, by_kind
from traac.training.telemetry.metrics_file import METRICS_FILE
from traac.training.telemetry.step_stats import ALL, read_metrics
from traac.training.trl_adapter.trainer import TRAACTrainer

pytestmark = pytest.mark.slow
N = 4  # rollouts per prompt
BINS = ("easy", "medium", "hard")
MAX_TOKENS = 64  # short enough that some rollouts are clipped and never close their block
ALWAYS = (  # the fields a scope with rollouts always has (the means by verdict need one)
    "prompts", "rollouts", "pass_rate", "correct_frac", "response_tokens", "clipped_frac",
    "unclosed_frac", "compressed_frac", "candidates", "compressed_rollouts",
)  # fmt: skip
FRACTIONS = ("correct_frac", "clipped_frac", "unclosed_frac", "compressed_frac")


class LogCapture(TrainerCallback):
    """What TRL passes to every `report_to` logger (tensorboard, wandb, ...): `on_log`'s dict."""

    def __init__(self) -> None:
        self.logs: list[dict[str, Any]] = []

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
        if logs and any(k.startswith("traac/") for k in logs):
            self.logs.append(dict(logs))


def run(model: Path, out: Path, **overrides: Any) -> TRAACTrainer:
    """Two TRAAC steps of 3 prompts x N rollouts on mixed tiers. The random scorer evicts
    tau of the steps whatever the weights, so every correct well-formed rollout is compressed."""
    tokenizer = load_tokenizer(str(model))
    tokenizer.padding_side = "left"
    items = [it for tier in BINS for it in make_items(tier, 2, seed=3, split="rl")]
    values: dict[str, Any] = dict(
        output_dir=str(out), use_cpu=True, bf16=False, gradient_checkpointing=False,
        report_to="none", save_strategy="no", disable_tqdm=True, max_steps=2,
        per_device_train_batch_size=3 * N, num_generations=N, max_completion_length=MAX_TOKENS,
        traac={"scorer": "random"}, seed=0,
    )  # fmt: skip
    config = TRAACConfig.from_recipe(**{**values, **overrides})
    return TRAACTrainer(
        str(model), args=config, train_dataset=items_to_dataset(items), processing_class=tokenizer
    )


def test_telemetry_keys_and_their_relations(quick_testbed: Path, tmp_path: Path) -> None:
    trainer = run(quick_testbed, tmp_path / "out")
    capture = LogCapture()
    trainer.add_callback(capture)
    trainer.train()
    closer = len(trainer.tokenizer.encode("</think>", add_special_tokens=False))
    rows = [json.loads(x) for x in (tmp_path / "out" / METRICS_FILE).read_text().splitlines()]
    steps = read_metrics(tmp_path / "out" / METRICS_FILE)
    assert [s.step for s in steps] == [1, 2] and len(capture.logs) == 2
    for row, logged in zip(rows, capture.logs, strict=True):
        # Every telemetry key reaches TRL's loggers with the value metrics.jsonl holds.
        for key, value in row.items():
            if key not in ("step", COPY_GROUPS):  # the copies' records: the file's alone
                assert logged[key] == pytest.approx(value), key
        assert {f"traac/{ALL}/{name}" for name in ALWAYS} <= set(row)
    for step in steps:
        pooled = step.scopes[ALL]
        bins = [step.scopes[b] for b in BINS if b in step.scopes]
        assert pooled.prompts == 3 and pooled.rollouts == 3 * N
        assert sum(b.prompts for b in bins) == pooled.prompts
        assert sum(b.rollouts for b in bins) == pooled.rollouts
        weighted_rate = sum(b.pass_rate * b.prompts for b in bins if b.prompts)
        assert weighted_rate / pooled.prompts == pytest.approx(pooled.pass_rate)
        for scope in [pooled, *bins]:
            if not scope.rollouts:
                continue
            for name in FRACTIONS:
                assert 0.0 <= getattr(scope, name) <= 1.0
            right = scope.correct_frac
            # Per rollout, think + answer + closer (when closed) + eos (when not clipped) is its
            # response; so the means, weighted by the correct share, add up the same way.
            think_answer = right * (
                (scope.think_tokens_correct or 0) + (scope.answer_tokens_correct or 0)
            ) + (1 - right) * (
                (scope.think_tokens_incorrect or 0) + (scope.answer_tokens_incorrect or 0)
            )
            rebuilt = think_answer + closer * (1 - scope.unclosed_frac) + 1 - scope.clipped_frac
            assert rebuilt == pytest.approx(scope.response_tokens)
            assert (scope.think_tokens_correct is None) == (right == 0)
            assert (scope.think_tokens_incorrect is None) == (right == 1)
            assert max(scope.think_tokens_correct or 0, scope.think_tokens_incorrect or 0) <= (
                MAX_TOKENS
            )
            assert min(scope.answer_tokens_correct or 0, scope.answer_tokens_incorrect or 0) >= 0
            in_pool = round(scope.compressed_frac * scope.rollouts)
            assert in_pool == pytest.approx(scope.compressed_frac * scope.rollouts)
            assert in_pool <= scope.compressed_rollouts <= scope.candidates
            assert (scope.tokens_removed is not None) == (scope.compressed_rollouts > 0)
            if scope.tokens_removed is not None:
                assert scope.tokens_removed > 0 and scope.steps_removed >= 1
        # The bins are a partition of the pooled group: their rollout-weighted means are its.
        for name in ("response_tokens", *FRACTIONS):
            weighted = sum(getattr(b, name) * b.rollouts for b in bins if b.rollouts)
            assert weighted / pooled.rollouts == pytest.approx(getattr(pooled, name))
    # The last step, as the trainer kept it, is what the file says.
    last = trainer.last_step
    pooled_rollouts = [r for g in last.groups for r in g.pooled]
    assert steps[-1].scopes[ALL].correct_frac == pytest.approx(
        sum(r.correct for r in pooled_rollouts) / len(pooled_rollouts)
    )
    assert steps[-1].scopes[ALL].compressed_frac == pytest.approx(
        sum(r.compressed for r in pooled_rollouts) / len(pooled_rollouts)
    )
    # Every pooled rollout of each group holding a copy (if the weights made a right rollout),
    # in the trainer's order, with TRL's advantage: centred in its group, ranked within it.
    records = steps[-1].copy_groups
    with_copies = [g for g in last.groups if any(r.compressed for r in g.pooled)]
    assert [r.group for r in records] == [g.index for g in with_copies for _ in g.pooled]
    pooled = [x for g in with_copies for x in g.pooled]
    assert [(r.copy, r.correct) for r in records] == [(x.compressed, x.correct) for x in pooled]
    for g in with_copies:
        mine = [r for r in records if r.group == g.index]
        assert sum(r.advantage for r in mine) == pytest.approx(0.0, abs=1e-4)
        best = max(r.advantage for r in mine)
        assert {r.rank for r in mine if r.advantage == best} == {1}
        assert all(r.compute_evicted is not None for r in mine)  # testbed steps carry labels
        assert all((r.evicted > 0) == r.copy for r in mine)  # the paper's pool: pruned ones only
    copies = {k: v for k, v in rows[-1].items() if k.startswith("traac/copies/")}
    assert bool(copies) == bool(records)
    if records:
        kinds = by_kind(records)
        assert copies["traac/copies/originals_count"] == kinds[KINDS[2]].count
        assert copies["traac/copies/compute_evicted_count"] + copies[
            "traac/copies/other_count"
        ] == (sum(r.copy for r in records))


def test_telemetry_reaches_tensorboard(
    quick_testbed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`report_to: tensorboard` writes the telemetry's scalars (tensorboard is a dev extra)."""
    logs = tmp_path / "tb"
    monkeypatch.setenv("TENSORBOARD_LOGGING_DIR", str(logs))  # transformers' own setting
    trainer = run(quick_testbed, tmp_path / "out", report_to="tensorboard")
    trainer.train()
    (events,) = {p.parent for p in logs.rglob("events.out.tfevents.*")}
    tags = set(EventAccumulator(str(events)).Reload().Tags()["scalars"])
    for scope in (ALL, *BINS):
        assert f"train/traac/{scope}/prompts" in tags
    for field in ("rollouts", "response_tokens", "clipped_frac", "unclosed_frac"):
        assert f"train/traac/{ALL}/{field}" in tags
    # right or wrong rollouts, whichever these weights gave: their think lengths are logged
    assert {f"train/traac/{ALL}/think_tokens_{k}" for k in ("correct", "incorrect")} & tags


def test_a_peer_methods_own_metric_is_in_its_line(quick_testbed: Path, tmp_path: Path) -> None:
    """AdaptThink's share of empty think blocks: in `metrics.jsonl` as TRL logged it. Half of
    each group starts with one (the prefill), so at least half the rollouts hold one."""
    trainer = run(quick_testbed, tmp_path / "out", mode="adaptthink", max_steps=1)
    capture = LogCapture()
    trainer.add_callback(capture)
    trainer.train()
    (row,) = [json.loads(x) for x in (tmp_path / "out" / METRICS_FILE).read_text().splitlines()]
    share = row["adaptthink/no_think_share"]
    assert 0.5 <= share <= 1.0 and capture.logs[0]["adaptthink/no_think_share"] == share
