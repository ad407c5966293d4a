"""DeepSpeed ZeRO-2 and ZeRO-3 for real: `accelerate launch` of `traac train` on 2 CPU processes.

DeepSpeed's CPU accelerator runs over gloo (`DS_ACCELERATOR=cpu`); its shared-memory comm op is
compiled once into a cache kept between sessions (pytest's cache directory). Each launch runs
`traac train` through a worker that changes three things, all at the trainer's boundary:
process 0 judges every rollout right and process 1 every rollout wrong (whatever the weights),
so in every step process 0 has candidates to compress and re-answer and process 1 has none;
it counts each model's forwards (its embedding's, the first module of every forward, a
collective under ZeRO-3) and the re-answers each process asks for; and with
`TRAAC_TEST_SIGTERM_STEP` process 0 raises SIGTERM at the end of that step's rollout phase.

Six launches cover: ZeRO-3 with `zero3_init_flag` (LoRA, the confidence scorer, evaluation during
training), ZeRO-3 without it (the attention scorer on a foreign scoring model), and ZeRO-2 (a
peer mode; the random scorer run straight through, and stopped by SIGTERM then resumed). Each
runs recipes/testbed.yaml as shipped, its refilled rollouts included (a ZeRO-3 policy decodes
them gathered), made small where the launch says.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from safetensors.torch import load_file

ROOT = Path(__file__).resolve().parents[3]
RECIPES = ROOT / "recipes"
N = 4  # rollouts per prompt; 2 prompts per process
SIGTERM_EXIT = 143  # a process's exit after a SIGTERM (128 + 15)

WORKER = """
import atexit, hashlib, json, os, signal, sys
from pathlib import Path

from transformers import TrainerCallback

import traac.training.step.driver as driver_module
import traac.training.trl_adapter.trainer as trainer_module
from traac.cli import main
from traac.training.step.rounds import GenerationRounds
from traac.training.trl_adapter.rollouts import RefillRollouts

RANK = int(os.environ["RANK"])
REPORT = Path(os.environ["TRAAC_TEST_REPORT"]) / f"rank{RANK}.json"
STOP_AT = int(os.environ.get("TRAAC_TEST_SIGTERM_STEP", "0"))
driver_module.verify_many = lambda items, responses, **kw: [RANK == 0] * len(responses)
Trainer = trainer_module.TRAACTrainer
record = {"reanswers": [], "forwards": [], "final": None, "decoded": []}
counts = {}
decoding = []  # inside a refilled round: the policy gathered, its forwards no collectives


def count(role):
    if not decoding:
        counts[role] += 1


def write():
    REPORT.write_text(json.dumps(record))


regenerate = GenerationRounds.regenerate


def counted_regenerate(self, prompts, prefix_lengths, filler):
    record["reanswers"].append(len(prompts))
    return regenerate(self, prompts, prefix_lengths, filler)


decode = RefillRollouts.__call__


def recorded_decode(self, model, prompts, max_new_tokens, step):  # each round's tokens, hashed
    decoding.append(True)
    try:
        out = decode(self, model, prompts, max_new_tokens, step)
    finally:
        decoding.clear()
    tokens = hashlib.sha256(json.dumps([prompts, out]).encode()).hexdigest()[:16]
    record["decoded"].append([step, len(prompts), tokens])
    return out


log_step = Trainer._log_step


def log_then_stop(self, step):
    log_step(self, step)
    if step.record.step == STOP_AT and RANK == 0:
        signal.raise_signal(signal.SIGTERM)


class Count(TrainerCallback):
    def __init__(self, trainer):
        self.trainer = trainer

    def on_train_begin(self, args, state, control, **kwargs):
        t = self.trainer
        policy = t.accelerator.unwrap_model(t.model)
        record["stage"] = t.model_wrapped.zero_optimization_stage()
        record["partitioned"] = hasattr(next(policy.parameters()), "ds_shape")
        models = {"policy": t.model, "reference": t.ref_model, "scorer": t.probe.model}
        for role, model in models.items():
            if model is not None:
                counts[role] = 0
                embed = t.accelerator.unwrap_model(model).get_input_embeddings()
                embed.register_forward_hook(lambda *a, role=role: count(role))

    def on_step_end(self, args, state, control, **kwargs):
        record["forwards"].append(dict(counts))
        write()

    def on_train_end(self, args, state, control, **kwargs):
        record["final"] = dict(counts)
        write()


release = Trainer.release_gathers


def checked_release(self):  # after it, each ZeRO-3 engine holds no gathered parameter
    release(self)
    from deepspeed.runtime.zero.partition_parameters import ZeroParamStatus

    engines = {"policy": self.model_wrapped, "reference": self.ref_model,
               "scorer": self.probe.model}
    record["released"] = {
        role: all(p.ds_status == ZeroParamStatus.NOT_AVAILABLE
                  for p in engine.module.parameters())
        for role, engine in engines.items()
        if hasattr(engine, "empty_partition_cache") and engine.zero_optimization_stage() == 3
    }
    write()


init = Trainer.__init__


def counted_init(self, *args, **kwargs):
    init(self, *args, **kwargs)
    self.add_callback(Count(self))


GenerationRounds.regenerate = counted_regenerate
RefillRollouts.__call__ = recorded_decode
Trainer._log_step = log_then_stop
Trainer.__init__ = counted_init
Trainer.release_gathers = checked_release


def group_left():  # at exit, after `traac train`'s own handler (registered later, run first)
    import torch.distributed

    record["group_left"] = not torch.distributed.is_initialized()
    write()


atexit.register(group_left)
sys.exit(main(sys.argv[1:]))
"""


class Launch:
    """One `accelerate launch` of `traac train` and what its processes reported."""

    def __init__(self, out: Path, done: subprocess.CompletedProcess[str]) -> None:
        self.out, self.done = out, done
        self.ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]

    @property
    def metrics(self) -> list[dict[str, Any]]:
        lines = (self.out / "run" / "metrics.jsonl").read_text().splitlines()
        return [json.loads(line) for line in lines]


def accelerate_config(tmp: Path, stage: int, init_flag: bool) -> Path:
    """The CPU recipe of `stage`, with `zero3_init_flag` as asked."""
    config = yaml.safe_load((RECIPES / "accelerate" / f"cpu_zero{stage}.yaml").read_text())
    config["deepspeed_config"]["zero3_init_flag"] = init_flag
    path = tmp / f"zero{stage}-init{init_flag}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(scope="module")
def launches(
    quick_testbed: Path,
    tmp_path_factory: pytest.TempPathFactory,
    free_port: Callable[[], int],
    request: pytest.FixtureRequest,
) -> Iterator[dict[str, Launch]]:
    root = tmp_path_factory.mktemp("deepspeed")
    worker = root / "worker.py"
    worker.write_text(WORKER)
    cache = getattr(request.config, "cache", None)  # the comm op, compiled once per checkout
    extensions = cache.mkdir("torch-extensions") if cache else root / "torch-extensions"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "DS_ACCELERATOR": "cpu",
           "TORCH_EXTENSIONS_DIR": str(extensions)}  # fmt: skip
    model = str(quick_testbed)

    def launch(name: str, stage: int, init_flag: bool, *extra: str, stop_at: int = 0) -> Launch:
        out = root / name
        out.mkdir(exist_ok=True)
        # The shipped recipe as it is (refilled rollouts included), made small: the quick
        # model, 2 steps of 2 prompts x N rollouts a process with shorter completions, so a
        # launch takes a minute, not the recipe's hours; its output in the test's directory.
        argv = [
            sys.executable, "-m", "accelerate.commands.launch",
            "--config_file", str(accelerate_config(root, stage, init_flag)),
            "--main_process_port", str(free_port()), str(worker),
            "train", "--config", str(RECIPES / "testbed.yaml"), "--model_name_or_path", model,
            "--dataset", "testbed:easy?n=16", "--output_dir", str(out / "run"),
            "--max_steps", "2", "--per_device_train_batch_size", str(2 * N),
            "--num_generations", str(N), "--max_completion_length", "96",
            "--disable_tqdm", "true", *extra,
        ]  # fmt: skip
        run_env = {**env, "TRAAC_TEST_REPORT": str(out), "TRAAC_TEST_SIGTERM_STEP": str(stop_at)}
        begin = time.perf_counter()
        try:  # a launch takes under a minute; a deadlock would hold it for ever
            done = subprocess.run(argv, capture_output=True, text=True, timeout=400, env=run_env)
        except subprocess.TimeoutExpired as err:
            pytest.fail(f"launch {name} hung; stderr: {err.stderr!s:.3000}")
        if stop_at:  # the processes exit 143 once saved, which torchrun reports as a failure
            assert f"stopped by SIGTERM after step {stop_at};" in done.stderr, done.stderr[-4000:]
            assert f"exitcode  : {SIGTERM_EXIT} " in done.stderr
        else:
            assert done.returncode == 0, f"{name}: {done.stderr[-4000:]}"
        print(f"launch {name}: {time.perf_counter() - begin:.1f} s")  # shown by pytest -s
        return Launch(out, done)

    held_out = ("--eval_dataset", "testbed:easy?n=4", "--eval_strategy", "steps",
                "--eval_steps", "1", "--per_device_eval_batch_size", str(N))  # fmt: skip
    lora = ("--use_peft", "true", "--lora_r", "4", "--lora_alpha", "8", "--lora_dropout", "0.0")
    # Each u ranked among the step's candidates: the least uniform always evict steps.
    ranked = (
        "--traac.uniformity_calibration",
        "rank",
        "--traac.uniformity_gate",
        "1.0",
        "--difficulty",
        '{"tau": {"easy": 1.0}}',
    )
    random = ("--traac.scorer", "random", "--save_strategy", "steps", "--save_steps", "1")
    runs = {
        "zero3_lora_confidence": launch(
            "zero3_lora_confidence", 3, True, "--traac.scorer", "confidence", *lora, *held_out
        ),
        "zero3_foreign": launch("zero3_foreign", 3, False, "--traac.scoring_model", model, *ranked),
        "zero2_peer": launch("zero2_peer", 2, False, "--mode", "alp", "--max_steps", "1"),
        "zero2_random": launch("zero2_random", 2, False, *random),
    }
    runs["zero2_stopped"] = launch("zero2_resumed", 2, False, *random, stop_at=1)
    runs["zero2_resumed"] = launch(
        "zero2_resumed", 2, False, *random, "--resume_from_checkpoint", "auto"
    )
    yield runs


COMPRESSING = ("zero3_lora_confidence", "zero3_foreign", "zero2_random")


@pytest.mark.slow
@pytest.mark.parametrize("name", COMPRESSING)
def test_steps_compress_and_reanswer_where_one_process_has_none(
    launches: dict[str, Launch], name: str
) -> None:
    run = launches[name]
    rank0, rank1 = (r["reanswers"] for r in run.ranks)
    assert len(rank0) == len(rank1) == 2  # every process took part in both steps' re-answers
    assert all(n >= 1 for n in rank0) and max(rank0) >= 2 and rank1 == [0, 0]
    steps = [r for r in run.metrics if r.get("split") != "eval"]
    assert [r["step"] for r in steps] == [1, 2]
    for step, n in zip(steps, rank0, strict=True):  # the telemetry counts process 0's answers
        assert step["traac/all/compressed_rollouts"] == n


@pytest.mark.slow
@pytest.mark.parametrize("name", ["zero3_lora_confidence", "zero3_foreign"])
def test_every_process_runs_as_many_forwards_of_each_sharded_model(
    launches: dict[str, Launch], name: str
) -> None:
    """Under ZeRO-3 each forward gathers the parameters from every process: a process that
    skipped one (it had nothing to score or re-answer) would leave the others waiting. The
    refilled rounds decode with the policy gathered once for the round, so their forwards (as
    many as each process's longest row takes) are not counted."""
    rank0, rank1 = launches[name].ranks
    assert rank0["forwards"] == rank1["forwards"] and rank0["final"] == rank1["final"]
    roles = set(rank0["final"])
    assert "policy" in roles and ("scorer" in roles) == (name == "zero3_foreign")
    assert all(n > 0 for n in rank0["final"].values())


@pytest.mark.slow
def test_every_launch_decodes_the_same_first_rollouts(launches: dict[str, Launch]) -> None:
    """Before the first update every launch holds the same weights (LoRA's adapters start at
    zero), prompts and seeds, so its first round of refilled rollouts is the same tokens on each
    process whether ZeRO-2 or ZeRO-3, gathered with or without `zero3_init_flag`; the two
    processes draw from streams of their own."""
    first = {
        name: [r["decoded"][0] for r in run.ranks]
        for name, run in launches.items()
        if name != "zero2_resumed"  # its first round is step 2's
    }
    assert len({json.dumps(rounds) for rounds in first.values()}) == 1, first
    rank0, rank1 = first["zero2_random"]
    assert rank0[0] == rank1[0] == 0 and rank0[2] != rank1[2]
    for name, run in launches.items():  # every round of rollouts and re-answers was refilled
        assert all(r["decoded"] for r in run.ranks), name


@pytest.mark.slow
def test_the_engines_ran_the_stage_and_features_asked(launches: dict[str, Launch]) -> None:
    lora = launches["zero3_lora_confidence"]
    assert (lora.out / "run" / "adapter_model.safetensors").is_file()  # LoRA's output
    evals = [r for r in lora.metrics if r.get("split") == "eval"]
    assert [r["step"] for r in evals] == [1, 2]  # evaluated after each step
    foreign = launches["zero3_foreign"]
    assert "scorer" in foreign.ranks[0]["final"]  # the foreign model was loaded and probed
    peer = launches["zero2_peer"]
    assert [r["step"] for r in peer.metrics] == [1] and peer.ranks[0]["reanswers"] == []
    for name, run in launches.items():  # the engine's stage; ZeRO-3 partitions every weight
        stage = 3 if name.startswith("zero3") else 2
        assert [r["stage"] for r in run.ranks] == [stage, stage], name
        assert [r["partitioned"] for r in run.ranks] == [stage == 3] * 2, name
        # `traac train` left the process group as the process exited, stopped or not: gloo's
        # threads joined before the interpreter is finalised
        assert [r["group_left"] for r in run.ranks] == [True, True], name
    # Every ZeRO-3 engine's gathers released before the processes leave (`release_gathers`):
    # the policy's alone with LoRA (its reference is itself), with the reference's and the
    # foreign scorer's otherwise.
    assert [r["released"] for r in lora.ranks] == [{"policy": True}] * 2
    both = {"policy": True, "reference": True, "scorer": True}
    assert [r["released"] for r in foreign.ranks] == [both] * 2


@pytest.mark.slow
def test_a_run_resumed_after_sigterm_matches_an_uninterrupted_one(
    launches: dict[str, Launch],
) -> None:
    straight, resumed = launches["zero2_random"], launches["zero2_resumed"]
    stopped = launches["zero2_stopped"]
    assert "stopped by SIGTERM after step 1" in stopped.done.stderr
    assert len(stopped.ranks[1]["reanswers"]) == 1  # process 1 stopped with process 0
    assert (resumed.out / "run" / "checkpoint-1").is_dir()

    def timeless(run: Launch) -> list[dict[str, Any]]:
        return [{k: v for k, v in r.items() if "seconds" not in k} for r in run.metrics]

    assert [r["step"] for r in resumed.metrics] == [1, 2]
    assert timeless(resumed) == timeless(straight)
    a = load_file(straight.out / "run" / "model.safetensors")
    b = load_file(resumed.out / "run" / "model.safetensors")
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(b[key], a[key], atol=1e-6, rtol=1e-5)
