"""What the compressed copies are trained on (`copy_loss`): the mask, the field's checks, and a
TRAAC step whose copies reach TRL's loss with their think blocks masked and still attended to."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch

from traac.common.models import load_tokenizer
from traac.compression.compression import CompressionResult
from traac.compression.formats import CHAT_FORMATS
from traac.compression.segmentation import Step
from traac.data.testbed_problems import make_items
from traac.data.training import item_from_row, items_to_dataset
from traac.testbed.config import TeacherSettings
from traac.testbed.traces import teach
from traac.training.planning.traac_config import TRAACConfig, TRAACConfigError
from traac.training.step.copy_rules import CopySettings, copy_think, loss_masks
from traac.training.trl_adapter.trainer import TRAACTrainer

N = 4
DOUBLE = CopySettings(copy_pool="evicted", copy_tags="double")


def test_the_mask_covers_each_think_block_and_nothing_after() -> None:
    assert loss_masks([5, 3, 2], [2, 0, 4]) == [[0, 0, 1, 1, 1], [1, 1, 1], [0, 0]]


def kept(evicted: bool) -> CompressionResult:
    """A two-step reasoning whose second step the rule evicted, or kept."""
    steps = [Step("First, 1 + 2 = 3. ", 0, 1), Step("So 3.", 1, 2)]
    whole = "First, 1 + 2 = 3. So 3."
    text = "First, 1 + 2 = 3. " if evicted else whole
    scores, after = np.array([0.9, 0.1]), 6 if evicted else 10
    return CompressionResult(whole, steps, scores, [True, not evicted], 0.5, 0.5, text, 10, after)


def test_the_pool_rule_picks_which_candidates_are_re_answered() -> None:
    fmt, evicted = CHAT_FORMATS["response-opens"], CopySettings(copy_pool="evicted")
    assert copy_think(kept(True), fmt, evicted) == "<think>First, 1 + 2 = 3. </think>"
    assert copy_think(kept(False), fmt, evicted) is None  # nothing lost: no copy
    all_correct = CopySettings(copy_pool="all_correct")
    whole = copy_think(kept(False), fmt, all_correct)  # the authors': re-answered
    assert whole == "<think>First, 1 + 2 = 3. So 3.</think>"


def test_the_copy_settings_answer_for_their_values() -> None:
    """What the step asks of the copies' settings; unset (a preset not yet applied) is the
    paper's: evicted only, single tags, trained in full."""
    asked = CopySettings("answer_only", "all_correct", "double")
    assert asked.masks_think and asked.copies_whole and asked.double_tags
    paper = CopySettings("full", "evicted", "single")
    assert not (paper.masks_think or paper.copies_whole or paper.double_tags)
    assert not (CopySettings().masks_think or CopySettings().copies_whole)


def test_double_tags_reproduce_the_authors_copies() -> None:
    """The authors' kept text keeps the probe's opener (where the response writes it) and
    closer, and is wrapped in tags again."""
    result = kept(True)
    responding, prompting = CHAT_FORMATS["response-opens"], CHAT_FORMATS["prompt-opens"]
    doubled = copy_think(result, responding, DOUBLE)
    assert doubled == "<think><think>First, 1 + 2 = 3. </think></think>"
    assert not responding.parse(f"{doubled}\\boxed{{3}}").well_formed  # costs format reward
    assert copy_think(result, prompting, DOUBLE) == "First, 1 + 2 = 3. </think></think>"


def test_copy_loss_is_checked(tmp_path: Path) -> None:
    common = {"output_dir": str(tmp_path), "use_cpu": True, "report_to": "none"}

    def copies(**values: object) -> object:
        return TRAACConfig(**common, **values).traac_settings

    assert copies().copy_loss == "answer_only"  # traac's default (the verdict study)
    assert copies(preset="paper").copy_loss == "full"  # the paper's
    assert copies(method_args={"copy_loss": "answer_only"}).copy_loss == "answer_only"
    with pytest.raises(TRAACConfigError, match="copy_loss: 'think' is not one of"):
        copies(method_args={"copy_loss": "think"})
    with pytest.raises(TRAACConfigError, match="copy_pool: 'some' is not one of"):
        copies(method_args={"copy_pool": "some"})
    # a mode that makes no copies has no copy settings: a shared recipe's are unused there
    with pytest.raises(TRAACConfigError, match="copy_tags is not a setting of mode cr,"):
        copies(method_args={"copy_tags": "double"}, mode="cr")
    unused = TRAACConfig.from_recipe(**common, traac={"copy_loss": "answer_only"}, mode="cr_lr")
    assert unused.method_args == {} and unused.traac_settings.copy_loss == "answer_only"
    assert copies(mode="cr_lr", preset="authors").copy_pool == "all_correct"  # the preset's


def teacher_group(trainer: TRAACTrainer) -> tuple[list[dict], list[list[int]], list[list[int]]]:
    """One prompt x N of the testbed teacher's right, well-formed traces, several steps each."""
    tokenizer = trainer.processing_class
    row = trainer.train_dataset[0]
    rendered = tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True,
                                             tokenize=False)  # fmt: skip
    prompt = tokenizer(rendered, add_special_tokens=False)["input_ids"]
    rng = random.Random(0)
    teacher = TeacherSettings(slip_prob=0.0, guess_prob=0.0, interrupt_prob=0.0)
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
        method_args={"scorer": "random", "copy_loss": copy_loss},
        seed=0,
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


@pytest.mark.slow
def test_the_authors_pool_re_answers_candidates_the_probe_left_whole(
    quick_testbed: Path, tmp_path: Path
) -> None:
    """With a gate of 0 the probe evicts nothing: the paper's pool makes no copy, the authors'
    (`copy_pool: all_correct`) re-answers every right, well-formed rollout whole, here with
    their double tags."""
    tokenizer = load_tokenizer(str(quick_testbed))
    tokenizer.padding_side = "left"
    dataset = items_to_dataset(make_items("easy", 4, seed=1, split="rl"))
    steps = {}
    for pool in ("evicted", "all_correct"):
        config = TRAACConfig(
            output_dir=str(tmp_path / pool), use_cpu=True, bf16=False, report_to="none",
            save_strategy="no", max_steps=1, per_device_train_batch_size=N, num_generations=N,
            max_completion_length=200,
            method_args={"uniformity_gate": 0.0, "copy_pool": pool, "copy_tags": "double"},
            seed=0,
        )  # fmt: skip
        trainer = TRAACTrainer(str(quick_testbed), args=config, train_dataset=dataset,
                               processing_class=tokenizer)  # fmt: skip
        rows, prompt_ids, completion_ids = teacher_group(trainer)
        trainer.model.train()
        steps[pool] = trainer.traac_step(rows, prompt_ids, completion_ids, None, N).record
    (paper,), (authors,) = steps["evicted"].groups, steps["all_correct"].groups
    assert len(paper.compressions) == len(authors.compressions) == N  # every one scored
    assert not any(c.result.compressed for g in (paper, authors) for c in g.compressions)
    assert not any(c.used for c in paper.compressions) and paper.pooled == paper.originals
    assert all(c.used for c in authors.compressions)
    copies = [r for r in authors.pooled if r.compressed]
    assert copies and len(authors.pooled) == N
    originals = {r.origin: r for r in authors.originals}
    for r in copies:
        reasoning = trainer.chat_format.parse(originals[r.origin].text).reasoning
        assert r.text.startswith(f"<think><think>{reasoning}</think></think>")
        assert not r.well_formed
