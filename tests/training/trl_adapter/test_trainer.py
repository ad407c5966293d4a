"""TRAACTrainer on the quick testbed: 2-step runs of every mode (TRAAC's and the peers') and
scorer, the pooled group of one TRAAC step, rewards of a hand-built group, the length windows
advancing once per step, dynamic sampling on hand-built groups."""

from __future__ import annotations

import json
import math
import random
import statistics
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from traac.cli import main as cli_main
from traac.common.models import load_tokenizer
from traac.compression.first_correct import step_answer
from traac.compression.segmentation import split_steps
from traac.data.testbed_problems import make_items
from traac.data.training import item_from_row, items_to_dataset
from traac.testbed.config import TeacherSettings
from traac.testbed.traces import teach
from traac.training.methods.alp import alp_length_reward
from traac.training.methods.dapo_overlong import dapo_overlong_punishment
from traac.training.methods.dler import dler_length_reward
from traac.training.methods.dot import dot_cutoffs
from traac.training.methods.kimi import kimi_length_reward
from traac.training.methods.shorterbetter import shorterbetter_length_reward
from traac.training.planning.traac_config import TRAACConfig
from traac.training.telemetry.metrics_file import METRICS_FILE
from traac.training.trl_adapter.trainer import TRAACTrainer

pytestmark = pytest.mark.slow
N = 4  # rollouts per prompt in these tests
RECIPE = Path(__file__).resolve().parents[3] / "recipes" / "testbed.yaml"


def small_config(tmp_path: Path, **overrides: Any) -> TRAACConfig:
    values: dict[str, Any] = {
        "output_dir": str(tmp_path / "out"),
        "use_cpu": True,
        "bf16": False,
        "gradient_checkpointing": False,
        "report_to": "none",
        "save_strategy": "no",
        "disable_tqdm": True,
        "max_steps": 2,
        "per_device_train_batch_size": 2 * N,
        "num_generations": N,
        "max_completion_length": 96,
        "seed": 0,
    }
    traac = {"uniformity_calibration": "rank", **overrides.pop("traac", {})}
    values.update(overrides, traac=traac)
    return TRAACConfig.from_recipe(**values)  # the mode's block its own, the rest unused


def make_trainer(model: Path, tmp_path: Path, **overrides: Any) -> TRAACTrainer:
    tokenizer = load_tokenizer(str(model))
    tokenizer.padding_side = "left"
    dataset = items_to_dataset(make_items("easy", 6, seed=1, split="rl"))
    return TRAACTrainer(
        str(model),
        args=small_config(tmp_path, **overrides),
        train_dataset=dataset,
        processing_class=tokenizer,
    )


def count_window_pushes(trainer: TRAACTrainer) -> list[dict]:
    """Record every push into the length windows (one per training step expected)."""
    pushes: list[dict] = []
    windows = trainer.rewards.windows
    push = windows.push_step

    def spy(lengths_by_key: dict) -> None:
        pushes.append({k: sorted(v) for k, v in lengths_by_key.items()})
        push(lengths_by_key)

    windows.push_step = spy  # type: ignore[method-assign]
    return pushes


@pytest.mark.parametrize(
    ("mode", "scorer"),
    [
        ("traac", "attention"),
        ("traac", "confidence"),
        ("traac", "random"),
        ("cr_lr", "attention"),
        ("compression_no_difficulty", "attention"),
        ("traac_no_compression", "attention"),
    ],
)
def test_two_steps_of_each_mode_and_scorer(
    quick_testbed: Path, tmp_path: Path, mode: str, scorer: str
) -> None:
    trainer = make_trainer(quick_testbed, tmp_path, mode=mode, traac={"scorer": scorer})
    pushes = count_window_pushes(trainer)
    trainer.train()
    assert trainer.state.global_step == 2
    lines = (tmp_path / "out" / METRICS_FILE).read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["step"] for r in records] == [1, 2]
    assert trainer.reward_func_names == ["correctness_reward", "format_reward", "length_reward"]
    bins = ("easy", "medium", "hard") if trainer.args.mode_spec.bins else ("all",)
    for record in records:
        assert sum(record[f"traac/{b}/prompts"] for b in bins) == 2
        assert record["traac/all/prompts"] == 2 and record["traac/all/rollouts"] == 2 * N
    # The windows advanced once per step, and hold the correct pooled lengths of the last step.
    assert len(pushes) == 2
    last = trainer.last_step
    expected: dict = {}
    for g in last.groups:
        for r in g.pooled:
            if r.correct:
                expected.setdefault((g.data_source, g.bin), []).append(len(r.completion_ids))
    assert pushes[-1] == {k: sorted(v) for k, v in expected.items()}
    for group in last.groups:
        assert len(group.pooled) == N
        assert group.bin in bins
        if not trainer.args.compresses:
            assert not any(r.compressed for r in group.pooled) and not group.compressions


def test_cr_mode_through_the_cli(quick_testbed: Path, tmp_path: Path) -> None:
    out = tmp_path / "cli"
    code = cli_main(
        ["train", "--config", str(RECIPE), "--model_name_or_path", str(quick_testbed),
         "--dataset", "testbed:easy?n=4", "--output_dir", str(out), "--mode", "cr",
         "--max_steps", "2", "--per_device_train_batch_size", str(2 * N),
         "--num_generations", str(N), "--max_completion_length", "48", "--disable_tqdm", "true"]
    )  # fmt: skip
    assert code == 0
    records = [json.loads(x) for x in (out / METRICS_FILE).read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2]
    assert records[-1]["traac/all/compressed_frac"] == 0.0
    assert "traac/reward/format_reward" not in records[-1]  # cr: correctness only
    assert (out / "model.safetensors").exists()


def spy_on_answers(trainer: TRAACTrainer) -> list[tuple[list[list[int]], list[list[int]]]]:
    """Record every (prompts, answers) of `sample_answers`, the one call into TRL's generation
    (the adapter's)."""
    calls: list[tuple[list[list[int]], list[list[int]]]] = []
    sample = trainer.sample_answers

    def spy(prompts: list[list[int]], budget: int) -> tuple:
        out = sample(prompts, budget)
        calls.append((prompts, out[0]))
        return out

    trainer.sample_answers = spy  # type: ignore[method-assign]
    return calls


def teacher_batch(trainer: TRAACTrainer) -> tuple[list[dict], list[list[int]], list[list[int]]]:
    """Two prompts x N rollouts whose completions are the testbed teacher's traces: right, well
    formed and several steps long; but the last rollout of the second prompt has a wrong answer
    (origin 2N - 1) and the third of the first closes its think block twice (origin 2: right but
    malformed)."""
    tokenizer = trainer.processing_class
    dataset = trainer.train_dataset
    rows, prompt_ids, completion_ids = [], [], []
    teacher = TeacherSettings(slip_prob=0.0, guess_prob=0.0, interrupt_prob=0.0)
    rng = random.Random(0)
    for p in range(2):
        row = dataset[p]
        item = item_from_row(row)
        rendered = tokenizer.apply_chat_template(
            row["prompt"], add_generation_prompt=True, tokenize=False
        )
        prompt = tokenizer(rendered, add_special_tokens=False)["input_ids"]
        for k in range(N):
            trace = teach(item.entry, rng, teacher)
            while trace.n_rechecks < 3:
                trace = teach(item.entry, rng, teacher)
            text = trace.response()
            if p == 1 and k == N - 1:
                text = text.replace("\\boxed{", "\\boxed{1")
            if p == 0 and k == 2:
                text = text.replace("</think>", "</think></think>")
            rows.append(dict(row))
            prompt_ids.append(list(prompt))
            ids = tokenizer(text, add_special_tokens=False)["input_ids"]
            completion_ids.append([*ids, tokenizer.eos_token_id])
    return rows, prompt_ids, completion_ids


def test_pooled_group_holds_n_rollouts_with_regenerated_compressed_ones(
    quick_testbed: Path, tmp_path: Path
) -> None:
    trainer = make_trainer(
        quick_testbed,
        tmp_path,
        max_completion_length=200,
        traac={"scorer": "random"},
    )  # fmt: skip: random evicts e = tau of the steps whatever the weights
    # (docs/method.md#ablation-scorers)
    calls = spy_on_answers(trainer)
    rows, prompt_ids, completion_ids = teacher_batch(trainer)
    trainer.model.train()
    step = trainer.traac_step(rows, prompt_ids, completion_ids, None, N)
    mine = step.rollouts

    groups = trainer.last_step.groups
    assert [g.pass_rate for g in groups] == [1.0, 0.75]
    # Only right, well-formed rollouts are compressed (docs/method.md#step, 4): the random
    # scorer evicts tau of the steps of every candidate, so every other rollout is one.
    originals = [r for g in groups for r in g.originals]
    assert [(r.correct, r.well_formed) for r in (originals[2], originals[2 * N - 1])] == [
        (True, False),
        (False, True),
    ]
    candidates = {r.origin for r in originals if r.correct and r.well_formed}
    assert {c.origin for g in groups for c in g.compressions if c.used} == candidates
    assert 2 not in candidates and 2 * N - 1 not in candidates
    # Originals and compressed copies are pooled, shuffled, and cut back to N (step 6): the
    # first group held 4 originals and 3 copies, and its pooled N are not simply its originals.
    first = groups[0]
    assert len(first.originals) + sum(c.used for c in first.compressions) == N + 3
    assert first.pooled != first.originals
    assert any(r.compressed for r in first.pooled)
    assert [g.bin for g in groups] == ["easy", "medium"]
    tiers = [item_from_row(rows[g * N]).tier for g in range(2)]  # telemetry's, by tier
    assert [g.tier for g in groups] == tiers and set(tiers) <= {"easy", "medium", "hard"}
    assert [r.completion_ids for r in mine] == [r.completion_ids for g in groups for r in g.pooled]
    columns = step.columns  # what the reward functions will read, passed explicitly
    assert columns.compressed == [r.compressed for r in mine]
    assert columns.bin == ["easy"] * N + ["medium"] * N
    assert columns.correct == [r.correct for r in mine]
    assert all("compressed" not in row for row in rows)  # TRL's rows are left as they were
    ((prompts, answers),) = calls
    regenerated = {tuple(p): a for p, a in zip(prompts, answers, strict=True)}
    compressed_seen = 0
    for g in groups:
        assert len(g.pooled) == N
        by_origin = {o.origin: o for o in g.originals}
        assert set(by_origin) == set(range(g.index * N, (g.index + 1) * N))
        used = {c.origin: c for c in g.compressions if c.used}
        for r in g.pooled:
            assert r.origin in by_origin
            if not r.compressed:
                assert r is by_origin[r.origin]
                continue
            compressed_seen += 1
            c = used[r.origin]
            original = trainer.chat_format.parse(by_origin[r.origin].text).reasoning
            steps = c.result.steps
            # The compressed reasoning: an ordered subsequence of the original's steps.
            assert "".join(s.text for s in steps) == original
            assert c.result.n_evicted > 0
            kept = "".join(s.text for s, k in zip(steps, c.result.kept, strict=True) if k)
            assert c.result.text == kept and len(kept) < len(original)
            assert r.text.startswith(f"<think>{kept}</think>")
            # Its answer: regenerated from prompt + compressed think block, not copied.
            prompt = prompt_ids[r.origin]
            answer = regenerated[tuple(prompt + c.prefix_ids)]
            assert r.completion_ids == c.prefix_ids + answer
            assert trainer.processing_class.decode(c.prefix_ids) == f"<think>{kept}</think>"
    assert compressed_seen > 0
    assert len(regenerated) == sum(c.used for g in groups for c in g.compressions)


def test_compressed_rollouts_get_nan_sampling_logprobs_on_their_think_block(
    quick_testbed: Path, tmp_path: Path
) -> None:
    """With a backend that reports sampling log-probs (vLLM), a compressed rollout's think
    block was never sampled in that context: NaN (no importance correction) there, the
    regenerated answer's own log-probs after it."""
    trainer = make_trainer(
        quick_testbed,
        tmp_path,
        max_completion_length=200,
        traac={"scorer": "random"},
    )  # fmt: skip: random evicts e = tau of the steps whatever the weights
    # (docs/method.md#ablation-scorers)
    sample = trainer.sample_answers

    def with_logprobs(prompts: list[list[int]], budget: int) -> tuple:
        ids, _ = sample(prompts, budget)
        return ids, [[-0.5] * len(a) for a in ids]

    trainer.sample_answers = with_logprobs  # type: ignore[method-assign]
    rows, prompt_ids, completion_ids = teacher_batch(trainer)
    logprobs = [[-1.0] * len(ids) for ids in completion_ids]
    trainer.model.train()
    pooled = trainer.traac_step(rows, prompt_ids, completion_ids, logprobs, N).rollouts
    used = {c.origin: c for g in trainer.last_step.groups for c in g.compressions if c.used}
    compressed = [r for r in pooled if r.compressed]
    assert compressed
    for r in compressed:
        think = len(used[r.origin].prefix_ids)
        assert all(math.isnan(x) for x in r.logprobs[:think])
        assert r.logprobs[think:] == [-0.5] * (len(r.completion_ids) - think)
    assert all(r.logprobs == [-1.0] * len(r.completion_ids) for r in pooled if not r.compressed)


def test_rewards_of_a_hand_built_group(quick_testbed: Path, tmp_path: Path) -> None:
    trainer = make_trainer(quick_testbed, tmp_path)
    trainer.model.train()
    texts = [
        "<think>a</think>The answer is \\boxed{1}.",  # right, length 10
        "<think>a</think>The answer is \\boxed{1}.",  # right, length 20
        "<think>a</think></think>x",  # right, length 30, two closers: the order half
        "no think block at all",  # wrong, length 40
    ]
    lengths = [10, 20, 30, 40]
    correct = [True, True, True, False]
    rows = [
        {"prompt": "q", "answer": "1", "verifier": "math", "data_source": "src", "entry": "",
         "id": "x", "difficulty": "", "correct": ok, "bin": "easy"}
        for ok in correct
    ]  # fmt: skip
    ids = [list(range(n)) for n in lengths]
    rewards = trainer._calculate_rewards(rows, ["q"] * 4, texts, ids)
    # Window = [10, 20, 30]: L_norm = (30 - l) / 20; beta = 1 / (1 + exp((l - 20) / 2)); W = 2.
    beta_30 = 1 / (1 + math.exp(5))
    expected = torch.tensor(
        [
            [4.0, 1.0, 2.0 * 1.0 * 1.0],
            [4.0, 1.0, 2.0 * 1.0 * 0.5],
            [4.0, 0.5, 2.0 * 1.0 * beta_30],
            [0.0, 0.0, 0.0],
        ]
    )
    assert torch.allclose(rewards, expected, atol=1e-6)
    # A second step joins the window: [10, 20, 30] + [25]; medium scale 0.75 for its own key.
    rows2 = [dict(rows[0], bin="medium")]
    rewards2 = trainer._calculate_rewards(rows2, ["q"], texts[:1], [list(range(25))])
    # Its window is [25]: L_norm = 0 (max L = min L), beta = 0.5 at the median.
    assert rewards2[0, 2].item() == pytest.approx(2.0 * 0.75 * 0.5)
    assert trainer.rewards.windows.window(("src", "easy")) == [10, 20, 30]
    assert trainer.rewards.windows.window(("src", "medium")) == [25]


@pytest.mark.parametrize(
    ("beta", "scoring_model", "expected"),
    [
        (0.001, "reference", "ref_model"),
        (0.0, "reference", "frozen copy"),
        (0.001, "policy", "policy"),
    ],
)
def test_scoring_model(
    quick_testbed: Path, tmp_path: Path, beta: float, scoring_model: str, expected: str
) -> None:
    trainer = make_trainer(
        quick_testbed, tmp_path, beta=beta, traac={"scoring_model": scoring_model}
    )
    scored_by = trainer.compressor.scorer.model
    policy = trainer.accelerator.unwrap_model(trainer.model)
    if expected == "ref_model":
        assert scored_by is trainer.accelerator.unwrap_model(trainer.ref_model)
    elif expected == "policy":
        assert scored_by is policy
    else:  # beta = 0: TRL holds no reference model, TRAAC loads a frozen initial policy
        assert trainer.ref_model is None and scored_by is not policy
        assert not any(p.requires_grad for p in scored_by.parameters())
        for a, b in zip(scored_by.parameters(), policy.parameters(), strict=True):
            assert torch.equal(a, b)


def test_a_foreign_scoring_model_scores_through_its_own_tokenizer(
    quick_testbed: Path, smollm2: Path, tmp_path: Path
) -> None:
    trainer = make_trainer(quick_testbed, tmp_path, traac={"scoring_model": str(smollm2)})
    scorer = trainer.compressor.scorer
    assert scorer.model is trainer.probe.model
    assert scorer.model.config.model_type == "llama"  # SmolLM2, not the Qwen3 policy
    assert not any(p.requires_grad for p in scorer.model.parameters())
    assert len(scorer.tokenizer) != len(trainer.tokenizer)
    reasoning = "First, 3 + 5 = 8.\nThen 8 - 2 = 6.\nSo the answer is 6.\nWait, 3 + 5 = 8.\n"
    (trace,) = trainer.compressor.score([reasoning])
    words = [s.text.split()[0] for s in trace.steps if s.text.strip()]
    assert words == ["First,", "Then", "So", "Wait,"]
    assert len(trace.scores) == len(trace.steps) and np.isfinite(trace.scores).all()
    assert trace.scores.sum() > 0  # SmolLM2's attention reached the steps through the offsets


# ---------------------------------------------------------------- peer modes, dynamic sampling


@pytest.mark.parametrize(
    ("mode", "sampling"),
    [
        ("alp", "none"),
        ("shorterbetter", "drop"),
        ("kimi", "none"),
        ("dapo_overlong", "resample"),
        ("l1_max", "none"),
        ("dler", "none"),
        ("laser_d", "drop"),
        ("gfpo", "none"),
        ("dot", "none"),
        ("first_correct", "none"),
        ("traac", "resample"),
    ],
)
def test_two_steps_of_each_peer_mode_and_dynamic_sampling(
    quick_testbed: Path, tmp_path: Path, mode: str, sampling: str
) -> None:
    """Every peer mode trains end to end; what it logged is recomputed from the pooled groups
    the step trained on (so the check holds whatever the CPU's weights sample)."""
    trainer = make_trainer(
        quick_testbed, tmp_path, mode=mode, dynamic_sampling=sampling, max_resample_rounds=1,
        max_completion_length=64, l1_max={"budget_min": 8, "budget_max": 64},
        traac={"scorer": "random"}, dler={"length": 32}, dot={"alpha": 1.0, "margin": 1},
    )  # fmt: skip
    trainer.train()
    assert trainer.state.global_step == 2
    records = [json.loads(x) for x in (tmp_path / "out" / METRICS_FILE).read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2]
    last, groups = records[-1], trainer.last_step.groups
    if mode == "gfpo":  # no term of its own; each group trains on its 2 shortest of 4
        assert trainer.reward_func_names == ["correctness_reward", "format_reward"]
        total = sum(len(g.pooled) for g in groups)
        logged = [list(trainer._logs["rewards"][n])[-total:] for n in trainer.reward_func_names]
        left_out = np.isnan(np.asarray(logged, dtype=float)).all(axis=0)
        for g, group in enumerate(groups):
            lengths = [len(r.completion_ids) for r in group.pooled]
            kept = sorted(range(N), key=lambda i: (lengths[i], i))[:2]
            assert [not x for x in left_out[g * N : (g + 1) * N]] == [i in kept for i in range(N)]
        return
    name = "length_reward" if mode == "traac" else f"{mode}_length_reward"
    assert trainer.reward_func_names == ["correctness_reward", "format_reward", name]
    assert f"traac/reward/{name}" in last
    if mode in ("alp", "shorterbetter", "kimi", "dapo_overlong", "dler"):
        peer = trainer.method.length
        s = peer.settings
        formulas = {
            "alp": lambda n, ok: alp_length_reward(n, ok, beta=s.beta, normalizer=s.normalizer),
            "shorterbetter": lambda n, ok: shorterbetter_length_reward(n, ok, beta=s.beta),
            "kimi": lambda n, ok: kimi_length_reward(n, ok, weight=s.weight),
            "dapo_overlong": lambda n, ok: dapo_overlong_punishment(64)([[0] * k for k in n]),
            "dler": lambda n, ok: dler_length_reward(n, ok, limit=32),
        }
        expected = [
            peer.scale * r
            for g in groups
            for r in formulas[mode](
                [len(x.completion_ids) for x in g.pooled], [x.correct for x in g.pooled]
            )
            if not g.dropped  # a dropped row has no reward (out of GRPO's normalisation)
        ]
        logged = last[f"traac/reward/{name}"]
        if expected:
            assert logged == pytest.approx(statistics.fmean(expected), abs=1e-5)
        else:
            assert math.isnan(logged)
    if mode == "laser_d":  # targets chosen at the first step from candidates 16..64 step 4
        targets = trainer.method.length.laser.targets
        assert targets is not None and set(targets.values()) <= set(range(16, 65, 4))
        logged = last[f"traac/reward/{name}"]
        if all(g.dropped for g in groups):  # no row scored: no mean
            assert math.isnan(logged)
        else:
            assert 0.0 <= logged <= 0.5 * 4 / 1.5
    if mode in ("dot", "first_correct"):  # they read the text: the run's tokenizer and format
        assert trainer.method.length.tokenizer is trainer.tokenizer
        assert trainer.method.length.chat_format == trainer.chat_format
    if mode == "dot":  # only the rows its cutoffs mark (4 rollouts: alpha 1 < 1.5) may lose 4
        marked = sum(
            cut is not None
            for g in groups
            for cut in dot_cutoffs(
                [len(x.completion_ids) for x in g.pooled],
                [x.correct for x in g.pooled],
                alpha=1.0,
                margin=1,
            )
        )
        total = sum(len(g.pooled) for g in groups)
        assert -4.0 * marked / total - 1e-6 <= last[f"traac/reward/{name}"] <= 0.0
    if mode == "first_correct":  # a right rollout loses at most lambda 0.5 x 4, a wrong none
        right = sum(x.correct for g in groups for x in g.pooled)
        total = sum(len(g.pooled) for g in groups)
        assert -2.0 * right / total - 1e-6 <= last[f"traac/reward/{name}"] <= 0.0
    if mode == "l1_max":
        rows = trainer.train_dataset
        assert all(8 <= b <= 64 for b in rows["length_budget"])
        assert all(
            r["prompt"][-1]["content"].endswith(f"Think for maximum {r['length_budget']} tokens.")
            for r in rows
        )
        assert -4.0 <= last[f"traac/reward/{name}"] <= 0.0
    if sampling == "none":
        assert "traac/all/dropped" not in last and not any(g.dropped for g in groups)
        return
    # Dropped exactly where the pooled verdicts all agree, whatever the shaped rewards.
    assert [g.dropped for g in groups] == [len({r.correct for r in g.pooled}) == 1 for g in groups]
    assert last["traac/all/dropped"] == sum(g.dropped for g in groups)
    if sampling == "resample":
        assert last["traac/sampling/resample_rounds"] == trainer.last_step.resample_rounds <= 1
        assert last["traac/sampling/resampled_groups"] == sum(g.resampled for g in groups)


class State:
    def __init__(self, step: int) -> None:
        self.global_step = step


def test_laser_d_resumed_from_its_state_rewards_as_the_uninterrupted_run(
    quick_testbed: Path, tmp_path: Path
) -> None:
    """Laser-D's targets and monitoring sample are in the TRAAC state a checkpoint keeps: a run
    stopped after step 0 and resumed from its state (through JSON, as `traac_state.json`)
    rewards steps 1-3 as the run that went on. Candidates 24..96 step 6 (a 96-token cap); the
    targets are chosen at step 0 (high: 30) and re-chosen at step 3 from steps 1-3."""
    batches = [  # per step, two groups of N: (lengths, verdicts)
        ([30, 30, 30, 30, 40, 50, 60, 70], [True] * N + [True, True, False, False]),
        ([60, 60, 60, 60, 30, 40, 90, 90], [True] * N + [True, False, True, False]),
        ([66, 66, 66, 66, 36, 36, 36, 36], [True] * N + [True, True, True, False]),
        ([60, 66, 72, 30, 40, 50, 60, 70], [True] * N + [True, True, False, False]),
    ]

    def rewards(trainer: TRAACTrainer, step: int) -> list[float]:
        lengths, correct = batches[step]
        ids = [[0] * n for n in lengths]
        return trainer.method.length.func(
            ["x"] * len(ids), completion_ids=ids, correct=correct, trainer_state=State(step)
        )

    options = {"mode": "laser_d", "laser_d": {"monitor_steps": 3}}
    uninterrupted = make_trainer(quick_testbed, tmp_path / "a", **options)
    stopped = make_trainer(quick_testbed, tmp_path / "b", **options)
    assert rewards(uninterrupted, 0) == rewards(stopped, 0)
    state = json.loads(json.dumps(stopped.traac_state_dict()))
    resumed = make_trainer(quick_testbed, tmp_path / "c", **options)
    resumed.load_traac_state_dict(state)
    for step in (1, 2, 3):
        assert rewards(resumed, step) == rewards(uninterrupted, step), step
    assert resumed.method.length.laser.targets == uninterrupted.method.length.laser.targets


def three_groups(trainer: TRAACTrainer) -> tuple[list[dict], list[list[int]], list[list[int]]]:
    """The teacher batch plus a third prompt whose N rollouts are all wrong: group 0 all right
    (lengths differ, so its length rewards differ), group 1 all wrong, group 2 mixed."""
    rows, prompt_ids, completion_ids = teacher_batch(trainer)
    wrong = [trainer.processing_class("<think>no</think>\\boxed{x}")["input_ids"]] * N
    right, mixed = slice(0, N), slice(N, 2 * N)
    return (
        rows[right] + [rows[N]] * N + rows[mixed],
        prompt_ids[right] + [prompt_ids[N]] * N + prompt_ids[mixed],
        completion_ids[right] + wrong + completion_ids[mixed],
    )


def test_dynamic_sampling_drops_on_correctness_alone(quick_testbed: Path, tmp_path: Path) -> None:
    trainer = make_trainer(quick_testbed, tmp_path, mode="cr_lr", dynamic_sampling="drop")
    rows, prompt_ids, completion_ids = three_groups(trainer)
    trainer.model.train()
    step = trainer.traac_step(rows, prompt_ids, completion_ids, None, N)
    mine = step.rollouts
    groups = trainer.last_step.groups
    assert [g.pass_rate for g in groups] == [1.0, 0.0, 0.75]
    assert [g.dropped for g in groups] == [True, True, False]
    assert step.dropped == [True] * 2 * N + [False] * N
    # The shaped reward disagrees: the all-right group's rewards differ (length reward), so it
    # has a GRPO signal on them; it is dropped all the same, on its verdicts.
    columns = step.columns
    texts = [r.text for r in mine]
    ids = [r.completion_ids for r in mine]
    rows_in = [{**row, "correct": ok} for row, ok in zip(rows, columns.correct, strict=True)]
    totals = trainer._calculate_rewards(rows_in, ["q"] * len(rows), texts, ids).sum(dim=1)
    assert totals[:N].std() > 0
    # Dropped rows contribute nothing to the loss: no mask, no advantage, not counted.
    output = {
        "completion_mask": torch.ones(3 * N, 5, dtype=torch.long),
        "advantages": torch.arange(1.0, 3 * N + 1),
        "num_items_in_batch": torch.tensor(15 * N),
    }
    masked = trainer._mask_dropped(output, step.dropped)
    assert masked["completion_mask"][: 2 * N].sum() == 0
    assert masked["completion_mask"][2 * N :].sum() == 5 * N
    assert masked["advantages"][: 2 * N].abs().sum() == 0
    assert torch.equal(masked["advantages"][2 * N :], torch.arange(2 * N + 1.0, 3 * N + 1))
    assert masked["num_items_in_batch"].item() == 5 * N


def test_dropped_groups_do_not_enter_the_batch_scaling(quick_testbed: Path, tmp_path: Path) -> None:
    """Under `scale_rewards: batch` (DAPO's and DLER's), a dropped group is out of the
    normalisation, as DAPO filters before its advantages: each kept row's advantage is its
    reward minus its group's mean, over the standard deviation of the kept rows alone; the
    dropped rows' advantages are 0."""
    trainer = make_trainer(
        quick_testbed, tmp_path, mode="cr_lr", dynamic_sampling="drop", scale_rewards="batch",
        per_device_train_batch_size=3 * N,  # TRL's generation batch: the three groups
    )  # fmt: skip
    rows, prompt_ids, completion_ids = three_groups(trainer)
    trainer.model.train()
    step = trainer.traac_step(rows, prompt_ids, completion_ids, None, N)
    assert step.dropped == [True] * 2 * N + [False] * N
    # The rewards of every row, each scored on its own (no dropped column: nothing masked).
    texts = [r.text for r in step.rollouts]
    ids = [r.completion_ids for r in step.rollouts]
    rows_in = [{**row, "correct": ok} for row, ok in zip(rows, step.columns.correct, strict=True)]
    weights = trainer.reward_weights.unsqueeze(0)
    totals = (trainer._calculate_rewards(rows_in, ["q"] * len(rows), texts, ids) * weights).sum(1)
    kept = totals[2 * N :]
    # The dropped groups would move the batch's spread: the test can tell the two apart.
    assert not torch.isclose(totals.std(), kept.std(), rtol=0.05)
    trainer._sampled_step = lambda inputs: step  # type: ignore[method-assign]
    output = trainer._generate_and_score_completions(rows)
    advantages = output["advantages"]
    assert advantages[: 2 * N].abs().sum() == 0
    expected = (kept - kept.mean()) / (kept.std() + 1e-4)
    assert torch.allclose(advantages[2 * N :], expected, atol=1e-4)


def test_dynamic_sampling_resamples_the_prompts_of_degenerate_groups(
    quick_testbed: Path, tmp_path: Path
) -> None:
    trainer = make_trainer(
        quick_testbed, tmp_path, mode="cr_lr", dynamic_sampling="resample", max_resample_rounds=1
    )
    calls = spy_on_answers(trainer)
    rows, prompt_ids, completion_ids = three_groups(trainer)
    kept_rows, kept_prompts = rows[2 * N :], prompt_ids[2 * N :]
    given = [dict(row) for row in rows], [list(ids) for ids in prompt_ids]
    trainer.model.train()
    step = trainer.traac_step(rows, prompt_ids, completion_ids, None, N)
    assert (rows, prompt_ids) == given  # TRL's lists are left as they were
    mine, rows, prompt_ids = step.rollouts, step.rows, step.prompt_ids
    groups = trainer.last_step.groups
    # Groups 0 (all right) and 1 (all wrong) got a fresh training prompt each, N rollouts of it
    # sampled in one call; the mixed group kept its prompt and its rollouts.
    assert [g.resampled for g in groups] == [1, 1, 0] and trainer.last_step.resample_rounds == 1
    ((prompts, answers),) = calls
    assert prompts == prompt_ids[: 2 * N]
    for g in (0, 1):
        group_rows = rows[g * N : (g + 1) * N]
        assert all(r == group_rows[0] for r in group_rows)
        assert any(group_rows[0] == dict(x) for x in trainer.train_dataset)
        (expected,) = trainer.prompt_ids([group_rows[0]["prompt"]])
        assert prompt_ids[g * N : (g + 1) * N] == [expected] * N
    assert [r.completion_ids for r in mine[: 2 * N]] == answers
    assert rows[2 * N :] == kept_rows and prompt_ids[2 * N :] == kept_prompts
    assert [r.completion_ids for r in mine[2 * N :]] == completion_ids[2 * N :]
    # What is still degenerate after the last round is dropped; the mixed group is kept.
    assert [g.dropped for g in groups] == [
        len({r.correct for r in g.pooled}) == 1 for g in groups[:2]
    ] + [False]


def test_a_bf16_recipe_loads_policy_reference_and_scorer_in_bf16(
    quick_testbed: Path, tmp_path: Path
) -> None:
    """TRL loads float32 unless `model_init_kwargs` names a dtype; the reference copies it and a
    frozen scorer follows the policy. `bf16: true` must load all three in bfloat16 (Qwen3-4B
    in float32 is 16 GB a copy), and a dtype the recipe names wins."""
    trainer = make_trainer(
        quick_testbed, tmp_path, bf16=True, beta=0.001, traac={"scoring_model": str(quick_testbed)}
    )
    assert trainer.args.model_init_kwargs == {"dtype": "bfloat16"}
    loaded = [trainer.model, trainer.ref_model, trainer.probe.model]
    assert [m.dtype for m in loaded] == [torch.bfloat16] * 3
    named = small_config(tmp_path, bf16=True, model_init_kwargs={"dtype": "float32"})
    assert named.load_dtype == torch.float32 and small_config(tmp_path).load_dtype is None


@pytest.mark.parametrize(
    "compression", ["early_exit", "early_exit_attention_weights", "after_answer"]
)
def test_early_exits_keep_each_candidate_through_its_first_verified_step(
    quick_testbed: Path, tmp_path: Path, compression: str
) -> None:
    """The oracle ablations on the teacher's traces (each re-checks its sum after reaching it),
    the first correct step found by the verifier through the pool: `early_exit` cuts right
    after it; `early_exit_attention_weights` keeps that prefix whole and lets the attention
    probe evict only steps after it."""
    trainer = make_trainer(
        quick_testbed, tmp_path, max_completion_length=200, traac={"compression": compression}
    )
    rows, prompt_ids, completion_ids = teacher_batch(trainer)
    trainer.model.train()
    trainer.traac_step(rows, prompt_ids, completion_ids, None, N)
    compressions = [c for g in trainer.last_step.groups for c in g.compressions]
    assert len(compressions) == 2 * N - 2  # the right, well-formed ones
    for c in compressions:
        gold = str(item_from_row(rows[c.origin]).answer)
        steps = split_steps(c.result.reasoning)
        first = next(k for k, s in enumerate(steps) if step_answer(s.text) == gold)
        assert first < len(steps) - 1  # re-checks follow it
        head = c.result.reasoning[: steps[first].end]
        kept = "".join(s.text for s, k in zip(c.result.steps, c.result.kept, strict=True) if k)
        assert kept == c.result.text and kept.startswith(head)
        assert c.result.steps[: first + 1] == steps[: first + 1]
        if compression == "early_exit":
            assert c.used and kept == head
            assert c.result.kept == [k <= first for k in range(len(steps))]


def test_after_answer_keeps_whole_a_candidate_that_never_states_its_answer(
    quick_testbed: Path, tmp_path: Path
) -> None:
    """Where no step states the answer, every step comes before it: `after_answer` evicts
    none of them (a candidate kept whole, no copy), where the authors' oracle with attention
    scores the whole trace."""
    trainer = make_trainer(
        quick_testbed, tmp_path, max_completion_length=200, traac={"compression": "after_answer"}
    )
    rows, prompt_ids, completion_ids = teacher_batch(trainer)
    tokenizer = trainer.processing_class
    gold = str(item_from_row(rows[0]).answer)
    silent = "<think>Add them up. Carry the tens. Check again.</think>\\boxed{" + gold + "}"
    completion_ids[0] = [*tokenizer(silent, add_special_tokens=False)["input_ids"],
                         tokenizer.eos_token_id]  # fmt: skip
    trainer.model.train()
    trainer.traac_step(rows, prompt_ids, completion_ids, None, N)
    by_origin = {c.origin: c for g in trainer.last_step.groups for c in g.compressions}
    assert len(by_origin) == 2 * N - 2  # every right, well-formed candidate has its record
    whole = by_origin[0]
    assert not whole.result.compressed and whole.result.text == whole.result.reasoning
    assert not whole.prefix_ids  # nothing evicted: no copy under the evicted pool


def test_without_compression_rewards_as_traac_on_a_step_with_no_copies(
    quick_testbed: Path, tmp_path: Path
) -> None:
    """The control arm is TRAAC less compression: on a step where TRAAC evicts nothing (tau 0
    in every bin, so no copy), the two bin the same groups and reward every rollout alike;
    CR+LR (one bin at scale 1) rewards the medium group's right rollouts differently."""
    no_eviction = {"tau": {"easy": 0.0, "medium": 0.0, "hard": 0.0}}
    rewards, bins = {}, {}
    for mode, extra in (("traac", {"difficulty": no_eviction}),
                        ("traac_no_compression", {}), ("cr_lr", {})):  # fmt: skip
        trainer = make_trainer(
            quick_testbed, tmp_path / mode, mode=mode, max_completion_length=200, **extra
        )
        rows, prompt_ids, completion_ids = teacher_batch(trainer)
        trainer.model.train()
        step = trainer.traac_step(rows, prompt_ids, completion_ids, None, N)
        assert not any(r.compressed for r in step.rollouts)
        out = trainer._calculate_rewards(
            step.reward_rows(), [r["prompt"] for r in step.rows],
            [r.text for r in step.rollouts], step.completion_ids,
        )  # fmt: skip
        rewards[mode] = {r.origin: out[i].tolist() for i, r in enumerate(step.rollouts)}
        bins[mode] = [g.bin for g in trainer.last_step.groups]
    assert bins["traac"] == bins["traac_no_compression"] == ["easy", "medium"]
    assert rewards["traac_no_compression"] == rewards["traac"]
    assert rewards["cr_lr"] != rewards["traac"] and bins["cr_lr"] == ["all", "all"]


def test_two_steps_of_early_exit_attention_under_the_dler_profile(
    quick_testbed: Path, tmp_path: Path
) -> None:
    trainer = make_trainer(
        quick_testbed, tmp_path, traac={"compression": "early_exit_attention_weights"},
        optimizer_profile="dler", max_resample_rounds=1, max_completion_length=64,
    )  # fmt: skip
    assert (trainer.scale_rewards, trainer.loss_type) == ("batch", "dapo")
    trainer.train()
    assert trainer.state.global_step == 2
    records = [json.loads(x) for x in (tmp_path / "out" / METRICS_FILE).read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2]
    assert all("traac/sampling/resample_rounds" in r for r in records)
