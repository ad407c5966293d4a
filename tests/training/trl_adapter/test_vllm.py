"""TRAAC steps with `use_vllm: true` on the CPU, through the vLLM fake (tests/fakes/vllm_fake),
in TRL 1.16's three layouts: colocated with tensor parallel 1, a tensor-parallel group of two
processes, and server mode. The tests read what reached vLLM: the prompts of each step's
sampling, resampling and re-answers, the weight syncs and wake-ups per step, padding only where
the layout needs it (filled with a prompt closed by an empty think block), and equal calls
across the processes that must make them together.

Verdicts come from `vllm_fake.training.verdicts`, a fixed function of the item and the
response, so that every run resamples and compresses whatever the testbed's weights are."""

from __future__ import annotations

import inspect
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import vllm_fake
from trl.generation.vllm_client import VLLMClient
from vllm_fake import client, signatures
from vllm_fake.training import record_steps

from traac.common.models import load_tokenizer
from traac.data.testbed_problems import make_items
from traac.data.training import items_to_dataset
from traac.training.planning.traac_config import TRAACConfig
from traac.training.trl_adapter.trainer import TRAACTrainer
from traac.training.trl_adapter.trl_api import TRL_VLLM_ATTRIBUTES

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[3]
N = 4  # rollouts per prompt


def vllm_trainer(model: Path, tmp_path: Path, **overrides: Any) -> TRAACTrainer:
    tokenizer = load_tokenizer(str(model))
    tokenizer.padding_side = "left"
    args = TRAACConfig(
        output_dir=str(tmp_path / "out"), use_cpu=True, bf16=False, report_to="none",
        gradient_checkpointing=False, save_strategy="no", disable_tqdm=True, max_steps=2,
        per_device_train_batch_size=2 * N, num_generations=N, max_completion_length=96,
        seed=0, method_args={"scorer": "random"}, dynamic_sampling="resample",
        max_resample_rounds=1,
        use_vllm=True, **overrides,
    )  # fmt: skip
    items = make_items("easy", 12, seed=1, split="rl")
    even = [i for i in items if int(i.answer) % 2 == 0][:3]  # groups all wrong: resampled
    odd = [i for i in items if int(i.answer) % 2 == 1][:3]  # mixed: compressed
    dataset = items_to_dataset(even + odd)  # 2 steps of 2 prompts draw both kinds
    return TRAACTrainer(str(model), args=args, train_dataset=dataset, processing_class=tokenizer)


def steps(events: list[dict]) -> list[list[dict]]:
    """The events of each step: up to and including its `traac_step` record."""
    out, current = [], []
    for event in events:
        current.append(event)
        if event["call"] == "traac_step":
            out.append(current)
            current = []
    return out


def calls(step: list[dict], name: str) -> list[dict]:
    return [e for e in step if e["call"] == name]


def check_one_sync_per_step(events: list[dict], *, sleeping: bool) -> None:
    """Each step pushes every weight exactly once and resets the prefix cache once; in sleep
    mode it also wakes the engine once (weights, then KV cache) and sleeps once."""
    loaded = []
    for step in steps(events):
        names = [n for e in calls(step, "load_weights") for n in e["names"]]
        assert len(calls(step, "reset_prefix_cache")) == 1
        assert len(names) == len(set(names)) > 0
        loaded.append(sorted(names))
        if sleeping:
            assert [e["tags"] for e in calls(step, "wake_up")] == [["weights"], ["kv_cache"]]
            assert [e["level"] for e in calls(step, "sleep")] == [2]
    assert all(names == loaded[0] for names in loaded)


def check_unpadded(events: list[dict]) -> tuple[int, int]:
    """A process generating on its own sends, after the step's sampling, its resampled rows
    (at the full budget) and then exactly the re-answers it owes (at the smaller answer
    budget), nothing else. Returns (re-answers, resample rounds) seen."""
    reanswers = rounds = 0
    for step in steps(events):
        record = step[-1]
        sampled, *later = calls(step, "generate")
        budget = sampled["max_tokens"][0]
        resampled = [p for c in later if c["max_tokens"][0] == budget for p in c["prompts"]]
        answered = [p for c in later if c["max_tokens"][0] < budget for p in c["prompts"]]
        assert len(resampled) == record["resampled_rows"]
        assert all(p in record["prompts"] for p in resampled)
        assert answered == record["reanswers"]
        reanswers += len(answered)
        rounds += record["resample_rounds"]
    return reanswers, rounds


def padded(records: list[dict], group: list[int], key: str) -> list[list[int]]:
    """What a group's gathered call holds: each member's prompts, padded to the longest list
    of the group with that member's first prompt closed by an empty think block."""
    longest = max(len(records[r][key]) for r in group)
    out = []
    for r in group:
        filler = records[r]["prompts"][0] + records[r]["empty_think"]
        out += records[r][key] + [filler] * (longest - len(records[r][key]))
    return out


@pytest.fixture
def on_fake_vllm(fake_vllm: Any, quick_testbed: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setitem(client.SERVED, "model", str(quick_testbed))
    record_steps(monkeypatch.setattr)
    return fake_vllm


def test_colocated_sleep_mode_syncs_and_wakes_once_per_step_and_pads_nothing(
    quick_testbed: Path, tmp_path: Path, on_fake_vllm: Any
) -> None:
    trainer = vllm_trainer(quick_testbed, tmp_path, vllm_enable_sleep_mode=True)
    assert all(hasattr(trainer, name) for name in TRL_VLLM_ATTRIBUTES)
    trainer.train()
    events = on_fake_vllm.EVENTS
    assert len(steps(events)) == 2
    check_one_sync_per_step(events, sleeping=True)
    assert events[-1] == {"call": "sleep", "level": 2}  # asleep between steps
    reanswers, rounds = check_unpadded(events)
    assert reanswers > 0 and rounds > 0  # both kinds of round were reached


def test_server_mode_sends_one_request_per_round_and_syncs_once_per_step(
    quick_testbed: Path, tmp_path: Path, on_fake_vllm: Any
) -> None:
    vllm_trainer(quick_testbed, tmp_path, vllm_mode="server").train()
    events = on_fake_vllm.EVENTS
    check_one_sync_per_step(events, sleeping=False)
    for step in steps(events):
        sampled, *later = calls(step, "generate")
        assert sampled["n"] == [N] * len(sampled["prompts"])  # one request per prompt, n each
        if step[-1]["reanswers"]:
            assert later[-1]["prompts"] == step[-1]["reanswers"]  # one process: nothing to pad


def test_three_layouts_on_two_processes(quick_testbed: Path, tmp_path: Path) -> None:
    """One `accelerate launch` of two CPU processes runs each layout for two steps."""
    # The shipped recipe with vLLM on, which samples through TRL's vLLM generation: refilled
    # decoding is traac's engine in its place (refused beside use_vllm), so padded; made small
    # (the quick model, 2 steps of 2 prompts a process, 96 tokens), the random scorer and
    # resampling so that both the re-answer and the resample rounds reach vLLM.
    base = [
        "train", "--config", str(ROOT / "recipes" / "testbed.yaml"),
        "--model_name_or_path", str(quick_testbed), "--dataset", "testbed:easy?n=24",
        "--max_steps", "2", "--per_device_train_batch_size", str(2 * N),
        "--num_generations", str(N), "--max_completion_length", "96", "--traac.scorer", "random",
        "--dynamic_sampling", "resample", "--max_resample_rounds", "1", "--use_vllm", "true",
        "--rollout_batching", "padded", "--disable_tqdm", "true",
    ]  # fmt: skip
    layouts = {
        "colocate": ["--vllm_mode", "colocate"],
        "tp2": ["--vllm_mode", "colocate", "--vllm_tensor_parallel_size", "2",
                "--vllm_enable_sleep_mode", "true"],
        "server": ["--vllm_mode", "server"],
    }  # fmt: skip
    runs = []
    for name, extra in layouts.items():
        (tmp_path / name).mkdir()
        argv = [*base, *extra, "--output_dir", str(tmp_path / name / "out")]
        runs.append({"model": str(quick_testbed), "out": str(tmp_path / name), "argv": argv})
    (tmp_path / "runs.json").write_text(json.dumps(runs))
    script = Path(vllm_fake.__file__).parent / "training.py"
    with socket.socket() as free:  # a port of its own: other launches may hold the default
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--config_file",
              str(ROOT / "recipes" / "accelerate" / "cpu_2proc.yaml"), "--main_process_port",
              str(port), str(script), str(tmp_path / "runs.json")]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(launch, capture_output=True, text=True, timeout=380, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = {
        name: [json.loads((tmp_path / name / f"vllm-rank{r}.json").read_text()) for r in (0, 1)]
        for name in layouts
    }
    assert all(run["rc"] == 0 for both in ranks.values() for run in both)

    # Colocated, tensor parallel 1: each process generates alone, unpadded.
    seen = [check_unpadded(run["events"]) for run in ranks["colocate"]]
    assert sum(r for r, _ in seen) > 0 and sum(n for _, n in seen) > 0
    for run in ranks["colocate"]:
        check_one_sync_per_step(run["events"], sleeping=False)
    per_step = [[s[-1]["reanswers"] for s in steps(run["events"])] for run in ranks["colocate"]]
    assert any(len(a) != len(b) for a, b in zip(*per_step, strict=True))  # uneven, unpadded

    # A tensor-parallel group of both processes: the same calls on both, each holding both
    # members' prompts padded to the group's longest list; sleep mode syncs once per step.
    tp0, tp1 = (run["events"] for run in ranks["tp2"])
    generated = [[e for e in events if e["call"] == "generate"] for events in (tp0, tp1)]
    assert generated[0] == generated[1]  # same prompts, same sampled tokens
    reanswered = 0
    for events in (tp0, tp1):
        check_one_sync_per_step(events, sleeping=True)
    for step0, step1 in zip(steps(tp0), steps(tp1), strict=True):
        records = [step0[-1], step1[-1]]
        if any(r["reanswers"] for r in records):
            assert calls(step0, "generate")[-1]["prompts"] == padded(records, [0, 1], "reanswers")
            reanswered += 1
    assert reanswered > 0

    # Server mode: the main process sends one request per round, every process's prompts
    # padded to the longest list; one weight push per step.
    main, other = (run["events"] for run in ranks["server"])
    check_one_sync_per_step(main, sleeping=False)
    assert not [e for e in other if e["call"] != "traac_step"]  # only the main one has a client
    reanswered = 0
    for step0, step1 in zip(steps(main), steps(other), strict=True):
        records = [step0[-1], step1[-1]]
        if any(r["reanswers"] for r in records):
            assert calls(step0, "generate")[-1]["prompts"] == padded(records, [0, 1], "reanswers")
            reanswered += 1
    assert reanswered > 0


# ---------------------------------------------------------------- the fake's own faithfulness


def test_the_signature_list_is_of_the_release_the_extra_pins() -> None:
    listing = json.loads(signatures.LIST.read_text())
    assert listing["vllm"] == signatures.pinned_version(), (
        "regenerate it: python tests/fakes/vllm_fake/signatures.py"
    )
    assert listing["generated"] and listing["regenerate"]


FAKES = {
    "LLM.__init__": vllm_fake.LLM.__init__,
    "LLM.generate": vllm_fake.LLM.generate,
    "LLM.sleep": vllm_fake.LLM.sleep,
    "LLM.wake_up": vllm_fake.LLM.wake_up,
    "LLM.reset_prefix_cache": vllm_fake.LLM.reset_prefix_cache,
    "Qwen3ForCausalLM.load_weights": vllm_fake._Weights.load_weights,
}


@pytest.mark.parametrize("name", list(FAKES))
def test_each_faked_vllm_call_takes_only_what_the_real_one_does(name: str) -> None:
    """The real vLLM's parameters, read from its source (installed, else the list)."""
    real = signatures.load()["signatures"][name]
    ours = [p for p in inspect.signature(FAKES[name]).parameters if p != "self"]
    named = [p for p in ours if p != "engine_args"]
    assert [p for p in named if p not in real] == []
    assert named == sorted(named, key=real.index)  # in the real order: positional calls agree
    if "engine_args" in ours:  # the rest go to EngineArgs, as in vLLM
        assert "**" in real


@pytest.mark.parametrize(
    ("name", "fields"),
    [("SamplingParams", ["n", "temperature", "top_p", "top_k", "min_p", "max_tokens", "seed",
                         "stop", "stop_token_ids", "logprobs", "skip_special_tokens",
                         "repetition_penalty", "structured_outputs"]),
     ("StructuredOutputsParams", list(vllm_fake.StructuredOutputsParams.__dataclass_fields__)),
     ("CompletionOutput", list(vllm_fake.CompletionOutput.__dataclass_fields__)),
     ("Logprob", list(vllm_fake.Logprob.__dataclass_fields__)),
     ("RequestOutput.__init__", list(vllm_fake.RequestOutput.__dataclass_fields__))],
)  # fmt: skip
def test_each_faked_vllm_type_has_only_real_fields(name: str, fields: list[str]) -> None:
    real = signatures.load()["signatures"][name]
    assert [f for f in fields if f not in real] == []


def test_the_fake_engine_refuses_what_vllm_refuses(quick_testbed: Path) -> None:
    llm = vllm_fake.LLM(model=str(quick_testbed), enable_sleep_mode=True)
    with pytest.raises(TypeError, match="unexpected"):
        vllm_fake.LLM(model=str(quick_testbed), not_an_engine_arg=1)
    with pytest.raises(TypeError, match="unexpected"):
        vllm_fake.SamplingParams(max_new_tokens=4)
    llm.sleep(level=2)
    with pytest.raises(RuntimeError, match="asleep"):
        llm.generate([{"prompt_token_ids": [5, 6]}], vllm_fake.SamplingParams(max_tokens=2))
    weights = llm.llm_engine.model_executor.driver_worker.model_runner.model
    name, tensor = next(iter(llm.model.named_parameters()))
    with pytest.raises(RuntimeError, match="sleeping weights"):
        weights.load_weights([(name, tensor)])
    llm.wake_up()
    with pytest.raises(RuntimeError, match="never loaded"):  # level 2 discarded them
        llm.generate([{"prompt_token_ids": [5, 6]}], vllm_fake.SamplingParams(max_tokens=2))
    weights.load_weights(list(llm.model.named_parameters()))
    (out,) = llm.generate([{"prompt_token_ids": [5, 6]}], vllm_fake.SamplingParams(max_tokens=2))
    assert len(out.outputs[0].token_ids) <= 2


def test_the_fake_client_has_the_real_clients_signatures() -> None:
    for name, method in vars(client.FakeVLLMClient).items():
        if callable(method):
            ours = inspect.signature(method).parameters
            assert list(ours) == list(inspect.signature(getattr(VLLMClient, name)).parameters)
