"""`rollout_batching: refill` on the quick testbed: greedy rollouts equal TRL's padded
`generate`, sampled ones repeat under the same seed and step (a resumed run), a TRAAC step
samples and re-answers through it, and the recipe field validates; and the recipe's micro-
batches (per_device_train_batch_size 8 x gradient_accumulation_steps 4) make the same update as
one batch of 32."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from trl import GRPOTrainer

from traac.common.models import load_tokenizer
from traac.data.testbed_problems import make_items
from traac.data.training import items_to_dataset
from traac.errors import TraacError
from traac.training.planning.traac_config import TRAACConfig
from traac.training.trl_adapter.rollouts import RefillRollouts
from traac.training.trl_adapter.trainer import TRAACTrainer

pytestmark = pytest.mark.slow


def config(tmp_path: Path, **overrides: Any) -> TRAACConfig:
    values: dict[str, Any] = {
        "output_dir": str(tmp_path / "out"), "use_cpu": True, "bf16": False,
        "report_to": "none", "save_strategy": "no", "disable_tqdm": True, "max_steps": 1,
        "per_device_train_batch_size": 8, "num_generations": 4, "max_completion_length": 96,
        "seed": 0,
    }  # fmt: skip
    return TRAACConfig.from_recipe(**{**values, **overrides})


def trainer(model: Path, tmp_path: Path, tier: str = "medium", **overrides: Any) -> TRAACTrainer:
    tokenizer = load_tokenizer(str(model))
    tokenizer.padding_side = "left"
    dataset = items_to_dataset(make_items(tier, 8, seed=1, split="rl"))
    args = config(tmp_path, **overrides)
    return TRAACTrainer(str(model), args=args, train_dataset=dataset, processing_class=tokenizer)


def prompts(t: TRAACTrainer) -> list[list[int]]:
    return t.prompt_ids([row["prompt"] for row in t.train_dataset])


def test_greedy_refilled_rollouts_equal_trls_padded_generate(quick_testbed, tmp_path):
    t = trainer(quick_testbed, tmp_path)
    t.generation_config.do_sample = False  # TRL's padded path, greedy
    ids = prompts(t)
    padded, _ = t._backend_generate(ids, None, {}, 1)
    t.refill = RefillRollouts(0, 0.0, 1.0, set(t.eos_token_ids), t.tokenizer.pad_token_id)
    refilled, logprobs = t._backend_generate(ids, None, {}, 1)
    assert logprobs is None
    assert refilled == padded
    # a meaningful comparison: rows of uneven length, some ended by the stop token
    assert len({len(r) for r in padded}) > 1
    assert any(r[-1] in t.eos_token_ids for r in padded)


def test_sampled_rollouts_repeat_for_the_same_seed_and_step(quick_testbed, tmp_path):
    t = trainer(quick_testbed, tmp_path, rollout_batching="refill")
    ids = prompts(t)[:4]
    budget = t.max_completion_length
    model = t.accelerator.unwrap_model(t.model)

    def sample(seed: int, step: int) -> list[list[int]]:
        engine = RefillRollouts(seed, 1.0, 1.0, set(t.eos_token_ids), t.tokenizer.pad_token_id)
        with torch.no_grad():
            return engine(model, ids, budget, step)

    first = sample(0, 3)
    assert sample(0, 3) == first  # a resumed run redraws its step's rollouts
    engine = RefillRollouts(0, 1.0, 1.0, set(t.eos_token_ids), t.tokenizer.pad_token_id)
    seeds = {engine.row_seed(s, r, k) for s in (0, 1) for r in (1, 2) for k in range(8)}
    assert len(seeds) == 32  # every step, round and row its own stream
    other = RefillRollouts(0, 1.0, 1.0, set(t.eos_token_ids), t.tokenizer.pad_token_id, rank=1)
    assert {other.row_seed(s, r, k) for s in (0, 1) for r in (1, 2) for k in range(8)}.isdisjoint(
        seeds
    )  # another process's rows, numbered from 0 too, draw other streams


def test_a_traac_step_samples_and_reanswers_through_refill(quick_testbed, tmp_path, monkeypatch):
    t = trainer(quick_testbed, tmp_path, "easy", rollout_batching="refill",
                per_device_train_batch_size=16)  # fmt: skip
    calls: list[tuple[int, int]] = []
    engine = t.refill
    monkeypatch.setattr(
        t, "refill", lambda m, p, b, s: calls.append((len(p), b)) or engine(m, p, b, s)
    )
    monkeypatch.setattr(GRPOTrainer, "_generate_single_turn",
                        lambda *a, **k: pytest.fail("TRL's generate ran"))  # fmt: skip
    t.train()
    assert calls[0] == (16, t.max_completion_length)  # the step's rollouts
    assert len(t.last_step.groups) == 4
    # re-answers after (here: the first 10 tokens of) think blocks, within the length cap
    ids = prompts(t)[:3]
    think = [r.completion_ids[:10] for r in t.last_step.groups[0].originals[:3]]
    calls.clear()
    answers = t.driver.rounds.regenerate(
        [p + k for p, k in zip(ids, think, strict=True)], [10] * 3, ids[0]
    )
    assert calls == [(3, t.max_completion_length - 10)]
    assert len(answers) == 3 and all(len(a) <= t.max_completion_length - 10 for a, _ in answers)


_ZERO3 = {"ACCELERATE_USE_DEEPSPEED": "true", "ACCELERATE_DEEPSPEED_ZERO_STAGE": "3"}


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"rollout_batching": "fast"}, "rollout_batching"),
        ({"rollout_batching": "refill", "top_k": 5}, "top_k"),
        ({"rollout_batching": "refill", "repetition_penalty": 1.1}, "repetition_penalty"),
        ({"rollout_batching": "refill", "use_vllm": True}, "rollout_batching"),
    ],
)
def test_rollout_batching_validates_at_once(tmp_path, fields, named):
    with pytest.raises(TraacError, match=rf"^{named}: "):
        config(tmp_path, **fields)
    assert config(tmp_path).rollout_batching == "padded"


@pytest.mark.parametrize(
    ("launch", "fields", "named"),
    [  # the accelerate launch's environment, the recipe's fields, the field the line names
        ({"ACCELERATE_USE_FSDP": "true"}, {}, "rollout_batching"),
        ({}, {"fsdp": "full_shard"}, "rollout_batching"),
        (_ZERO3, {"ds3_gather_for_generation": False}, "rollout_batching"),
    ],
)
def test_refill_refuses_a_launch_whose_decoding_forwards_are_collectives(
    tmp_path, monkeypatch, launch, fields, named
):
    for name, value in launch.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(TraacError, match=rf"^{named}: .*rollout_batching padded$"):
        config(tmp_path, rollout_batching="refill", **fields)


@pytest.mark.parametrize("stage", ["1", "2", "3"])
def test_refill_runs_under_every_zero_stage_that_gathers(tmp_path, monkeypatch, stage):
    """ZeRO-1/2 keep every parameter on every process; ZeRO-3 decodes gathered (the trainer)."""
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", stage)
    assert config(tmp_path, rollout_batching="refill").rollout_batching == "refill"


def test_micro_batches_make_the_update_of_one_batch(quick_testbed, tmp_path):
    """TRL samples the step's 32 rollouts at once either way; its log-probs and loss then run
    on micro-batches of 8 whose gradients add up to the one batch's (plain SGD, so the update
    is the gradient)."""
    updates = []
    for batch, accumulation in ((32, 1), (8, 4)):
        torch.manual_seed(0)
        t = trainer(quick_testbed, tmp_path / str(batch), "medium",
                    per_device_train_batch_size=batch, gradient_accumulation_steps=accumulation,
                    num_generations=8, optim="sgd", learning_rate=0.1, warmup_steps=0,
                    lr_scheduler_type="constant", max_grad_norm=1e9)  # fmt: skip
        before = {k: v.detach().clone() for k, v in t.model.named_parameters()}
        t.train()
        delta = {k: v.detach() - before[k] for k, v in t.model.named_parameters()}
        updates.append(([r.completion_ids for g in t.last_step.groups for r in g.pooled], delta))
    (rollouts, full), (chunked_rollouts, chunked) = updates
    assert chunked_rollouts == rollouts  # the same 32 rollouts
    moved = sum(float(u.abs().sum()) for u in full.values())
    assert moved > 0
    for name, u in full.items():
        torch.testing.assert_close(chunked[name], u, rtol=1e-4, atol=1e-7, msg=name)
