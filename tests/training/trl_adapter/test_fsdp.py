"""Sharded models: FSDP2 over gloo, 2 CPU processes, one of which has nothing to compress.

Every forward of a sharded model is a collective, so a process that skipped its scoring or
regeneration forwards would leave the other blocked for ever. accelerate runs FSDP only on
accelerators, so the worker shards the reference model and the policy itself with torch's
`fully_shard` on a CPU mesh, marked as transformers marks its own FSDP2 models (so that
`generate` keeps the processes in step), and runs TRAAC steps on the teacher's traces. Process 1
judges every rollout wrong, whatever the weights: it has no candidate to score and no answer to
regenerate, while process 0 has several. With LoRA the PEFT wrapper is the root, as accelerate
shards it (the decoder layers, then the wrapper with the embeddings, final norm and head as one
group), and the probe, run before any other forward as with vLLM, must enter that root.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from traac.training.trl_adapter.rollouts import FSDP_REFUSED

ROOT = Path(__file__).resolve().parents[3]
CPU_2PROC = ROOT / "recipes" / "accelerate" / "cpu_2proc.yaml"
N = 4

WORKER = """
import json, os, random, sys

import torch.distributed as dist

from torch.distributed.device_mesh import init_device_mesh
from peft import LoraConfig
from torch.distributed.fsdp import FSDPModule, fully_shard

import traac.training.step.driver as driver_module
from traac.common.models import load_tokenizer
from traac.data.training import item_from_row, items_to_dataset
from traac.testbed.config import TeacherSettings
from traac.data.testbed_problems import make_items
from traac.testbed.traces import teach
from traac.training.planning.traac_config import TRAACConfig
from traac.training.trl_adapter.trainer import TRAACTrainer

model, out, n, lora = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "lora"
batching = sys.argv[5]
rank = int(os.environ["RANK"])  # set by the launcher
driver_module.verify_many = lambda items, responses, **kw: [rank == 0] * len(responses)

tokenizer = load_tokenizer(model)
tokenizer.padding_side = "left"
# No recipe: accelerate cannot launch FSDP on CPUs, so the worker shards by hand and drives
# `traac_step` on the teacher's traces. The re-answers decode as the test asks: padded (TRL's
# `generate`, which keeps the processes in step), or refilled (refused on an FSDP policy).
args = TRAACConfig(
    output_dir=out, use_cpu=True, bf16=False, gradient_checkpointing=False, report_to="none",
    save_strategy="no", disable_tqdm=True, per_device_train_batch_size=n, num_generations=n,
    max_completion_length=200, beta=0.04, seed=0, rollout_batching=batching, method_args={
        "scorer": "attention", "scoring_model": "reference", "uniformity_calibration": "rank"
    },
)
dataset = items_to_dataset(make_items("easy", 4, seed=1, split="rl"))
adapters = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
trainer = TRAACTrainer(model, args=args, train_dataset=dataset, processing_class=tokenizer,
                       **({"peft_config": adapters} if lora else {}))

mesh = init_device_mesh("cpu", (2,))
for sharded in (trainer.model,) if lora else (trainer.ref_model, trainer.model):
    body = sharded.get_base_model() if lora else sharded
    for layer in body.model.layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(sharded, mesh=mesh)  # the root: embeddings, final norm and head in its group
    sharded._is_fsdp_managed_module = True  # what transformers' own FSDP2 set-up marks
scorer = trainer.model if lora else trainer.probe.model
assert isinstance(scorer, FSDPModule) and trainer.collective_forwards
assert trainer.compressor.scorer.model is scorer  # the probe enters the FSDP root

row = dataset[rank]  # one prompt per process, N rollouts each: the teacher's right traces
item = item_from_row(row)
rendered = tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=False)
prompt = tokenizer(rendered, add_special_tokens=False)["input_ids"]
rng = random.Random(rank)
traces = []
while len(traces) < n:
    sure = TeacherSettings(slip_prob=0.0, guess_prob=0.0, interrupt_prob=0.0)
    trace = teach(item.entry, rng, sure)
    if trace.n_rechecks >= 3:
        traces.append(trace.response())
completions = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in traces]
trainer.model.train()
report = []
for step in range(2):
    trainer.traac_step([dict(row)] * n, [list(prompt)] * n, completions, None, n)
    groups = trainer.last_step.groups
    report.append({
        "pass_rates": [g.pass_rate for g in groups],
        "scored": sum(len(g.compressions) for g in groups),
        "used": sum(c.used for g in groups for c in g.compressions),
    })
if rank == 0:
    print("REPORT " + json.dumps(report), flush=True)
dist.barrier()
# FSDP's last asynchronous collectives are freed on gloo's worker threads, which need the GIL to
# drop their tensors: a process finalising the interpreter meanwhile aborts (SIGABRT) after a run
# that succeeded, and destroying the group does not free the ones the modules hold. The verdict
# is printed, so the worker leaves without finalising.
sys.stdout.flush()
os._exit(0)
"""


def run_worker(
    model: Path, tmp_path: Path, port: int, policy: str, batching: str
) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    launch = [
        sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(CPU_2PROC),
        "--main_process_port", str(port),
        str(script), str(model), str(tmp_path / "out"), str(N), policy, batching,
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    try:
        return subprocess.run(launch, capture_output=True, text=True, timeout=300, env=env)
    except subprocess.TimeoutExpired as err:
        pytest.fail(f"the sharded run hung; stderr: {err.stderr!s:.2000}")


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["full", "lora"])
def test_a_process_with_no_candidates_does_not_deadlock_a_sharded_run(
    quick_testbed: Path, tmp_path: Path, free_port: Callable[[], int], policy: str
) -> None:
    done = run_worker(quick_testbed, tmp_path, free_port(), policy, "padded")
    assert done.returncode == 0, done.stdout[-1000:] + done.stderr[-3000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("REPORT "))
    for step in json.loads(line.removeprefix("REPORT ")):
        assert step["pass_rates"] == [1.0, 0.0]  # process 0 all right, process 1 all wrong
        assert step["scored"] == N  # process 0's candidates were scored, and only those
        assert step["used"] > 0  # and re-answered, while process 1 regenerated nothing


@pytest.mark.slow
def test_refilled_decoding_of_a_hand_sharded_policy_stops_in_one_line(
    quick_testbed: Path, tmp_path: Path, free_port: Callable[[], int]
) -> None:
    """Refilled, each process decodes its rows alone, as many forwards as its longest row
    takes, while every FSDP2 forward is a collective: the first re-answer round stops on both
    processes with the fix, instead of hanging. (An FSDP launch is refused at the dry run.)"""
    done = run_worker(quick_testbed, tmp_path, free_port(), "full", "refill")
    assert done.returncode != 0
    assert done.stderr.count(f"TraacError: {FSDP_REFUSED}") == 2, done.stderr[-3000:]
