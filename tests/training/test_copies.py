"""What the compressed copies are trained on (`copy_loss`): the mask, the field's checks, and a
TRAAC step whose copies reach TRL's loss with their think blocks masked and still attended to."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from traac.common.models import load_tokenizer
from traac.data.testbed_problems import make_items
from traac.data.training import item_from_row, items_to_dataset
from traac.testbed.config import TeacherConfig
from traac.testbed.traces import teach
from traac.training.config import TRAACConfig, TRAACConfigError
from traac.training.copies import loss_masks
from traac.training.trainer import TRAACTrainer

N = 4


def test_the_mask_covers_each_think_block_and_nothing_after() -> None:
    assert loss_masks([5, 3, 2], [2, 0, 4]) == [[0, 0, 1, 1, 1], [1, 1, 1], [0, 0]]


def test_copy_loss_is_checked(tmp_path: Path) -> None:
    common = {"output_dir": str(tmp_path), "use_cpu": True, "report_to": "none"}
    assert TRAACConfig(**common).copy_loss == "full"  # the paper's
    assert TRAACConfig(**common, copy_loss="answer_only").copy_loss == "answer_only"
    with pytest.raises(TRAACConfigError, match="copy_loss: 'think' is not one of"):
        TRAACConfig(**common, copy_loss="think")
    with pytest.raises(TRAACConfigError, match=r"copy_loss: answer_only .* mode cr_lr"):
        TRAACConfig(**common, copy_loss="answer_only", mode="cr_lr")


def teacher_group(trainer: TRAACTrainer) -> tuple[list[dict], list[list[int]], list[list[int]]]:
    """One prompt x N of the testbed teacher's right, well-formed traces, several steps each."""
    tokenizer = trainer.processing_class
    row = trainer.train_dataset[0]
    rendered = tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True,
                                             tokenize=False)  # fmt: skip
    prompt = tokenizer(rendered, add_special_tokens=False)["input_ids"]
    rng = random.Random(0)
    teacher = TeacherConfig(slip_prob=0.0, guess_prob=0.0, interrupt_prob=0.0)
    completions = []
    for _ in range(N):
        trace = teach(item_from_row(row).entry, rng, teacher)
        while trace.n_rechecks < 3:
            trace = teach(item_from_row(row).entry, rng, teacher)
        ids = tokenizer(trace.response(), add_special_tokens=False)["input_ids"]
        completions.append([*ids, tokenizer.eos_token_id])
    return [dict(row)] * N, [list(prompt)] * N, completions


@pytest.mark.slow
@pytest.mark.parametrize("copy_loss", ["full", "answer_only"])
def test_a_step_trains_the_copies_as_copy_loss_says(
    quick_testbed: Path, tmp_path: Path, copy_loss: str
) -> None:
    """A step with compressed copies through TRL's scoring: under `answer_only` each copy's
    think block has tool mask 0 (out of the loss and of the token count) and completion mask 1
    (its answer still attends to it); the originals and every token under `full` count."""
    tokenizer = load_tokenizer(str(quick_testbed))
    tokenizer.padding_side = "left"
    config = TRAACConfig(
        output_dir=str(tmp_path / "out"),
        use_cpu=True,
        bf16=False,
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
        max_steps=1,
        per_device_train_batch_size=N,
        num_generations=N,
        max_completion_length=200,
        scorer="random",
        seed=0,
        copy_loss=copy_loss,
        loss_type="dapo",
    )  # fmt: skip: random evicts e = tau of the steps whatever the weights
    dataset = items_to_dataset(make_items("easy", 4, seed=1, split="rl"))
    trainer = TRAACTrainer(str(quick_testbed), args=config, train_dataset=dataset,
                           processing_class=tokenizer)  # fmt: skip
    rows, prompt_ids, completion_ids = teacher_group(trainer)
    trainer.model.train()
    step = trainer.traac_step(rows, prompt_ids, completion_ids, None, N)
    copies = [r for r in step.rollouts if r.compressed]
    assert copies and not all(r.compressed for r in step.rollouts)  # both kinds were pooled
    used = {c.origin: c for g in step.record.groups for c in g.compressions if c.used}
    assert all(r.think_prefix == len(used[r.origin].prefix_ids) > 0 for r in copies)

    trainer._sampled_step = lambda inputs: step  # type: ignore[method-assign]
    output = trainer._generate_and_score_completions(rows)
    completion_mask = output["completion_mask"]
    for k, r in enumerate(step.rollouts):
        assert completion_mask[k, : len(r.completion_ids)].sum() == len(r.completion_ids)
    if copy_loss == "full":
        assert "tool_mask" not in output
        assert output["num_items_in_batch"] == completion_mask.sum()
        return
    tool_mask = output["tool_mask"]
    for k, r in enumerate(step.rollouts):
        length = len(r.completion_ids)
        expected = [0] * r.think_prefix + [1] * (length - r.think_prefix)
        assert tool_mask[k, :length].tolist() == expected
    trained = sum(len(r.completion_ids) - r.think_prefix for r in step.rollouts)
    assert output["num_items_in_batch"] == trained == (completion_mask * tool_mask).sum()
    # In TRL's loss the KL term of a copy's think token counts for nothing, of its answer's does.
    trainer.current_gradient_accumulation_steps = 1  # what the training loop sets

    def loss_with_reference_moved(row: int, columns: slice) -> torch.Tensor:
        moved = output["ref_per_token_logps"].clone()
        moved[row, columns] -= 5.0
        with torch.no_grad():
            return trainer.compute_loss(trainer.model, {**output, "ref_per_token_logps": moved})

    k = next(k for k, r in enumerate(step.rollouts) if r.compressed)
    think = step.rollouts[k].think_prefix
    base = loss_with_reference_moved(k, slice(0, 0))
    assert torch.isfinite(base)
    assert torch.equal(loss_with_reference_moved(k, slice(0, think)), base)
    assert not torch.equal(loss_with_reference_moved(k, slice(think, think + 1)), base)
