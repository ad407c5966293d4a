"""GPU smoke test: TRAAC end to end on a model of Qwen3-0.6B's shape, with no network.

    python benchmarks/gpu_smoke.py [--tiny] [--steps 5] [--output DIR]

For the first machine with a GPU: it builds a random-initialised model of Qwen3-0.6B's shape
(28 layers, hidden 1024, 16 query / 8 key-value heads) with the testbed's tokenizer, runs
`--steps` TRAAC steps with LoRA, then the same with full fine-tuning (bf16; vLLM colocated if it
imports, else transformers generation), evaluates the result with a think budget and test-time
compression (`traac eval --think-budget --compress-tau`), and prints for each phase the seconds
per step, the rollout tokens per second and the peak GPU memory. A random model never closes its
think block, so every rollout runs to max_completion_length: a worst case for memory and a fixed
amount of work, not a measure of the method. `--tiny` runs the same path at a tiny shape on the
CPU (what the test suite runs). Before any step, each training phase's arguments go through
`traac train --dry-run` (seconds): the suite runs that validation with a GPU faked, so an
argument only the GPU path sends is checked on every CPU too (tests/benchmarks/test_gpu_smoke.py).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

from _common import machine
from traac.cli import main as traac
from traac.testbed.build import PROMPT_STYLE, teacher_traces
from traac.testbed.config import QUICK
from traac.testbed.tokenizer import EOS, PAD, build_tokenizer
from traac.training.telemetry.metrics_file import METRICS_FILE

RECIPE = Path(__file__).resolve().parents[1] / "recipes" / "testbed.yaml"
QWEN3_06B = {  # Qwen/Qwen3-0.6B's config.json, the fields that shape it
    "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28,
    "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
    "max_position_embeddings": 40960,
}  # fmt: skip
TINY = {
    "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
    "max_position_embeddings": 1024,
}  # fmt: skip


def model_files(shape: dict[str, int]) -> tuple[Qwen3Config, Any]:
    """The config of a model of `shape` and the testbed's tokenizer (trained offline on the
    teacher's traces)."""
    entries, traces = teacher_traces(QUICK)
    corpus = [e["question"] for e in entries] + [t.written for t in traces]
    tokenizer = build_tokenizer(corpus, QUICK.model.vocab_size)
    eos, pad = tokenizer.convert_tokens_to_ids(EOS), tokenizer.convert_tokens_to_ids(PAD)
    config = Qwen3Config(vocab_size=len(tokenizer), tie_word_embeddings=True, eos_token_id=eos,
                         pad_token_id=pad, bos_token_id=None, **shape)  # fmt: skip
    config.traac_prompt_style = PROMPT_STYLE
    return config, tokenizer


def build_model(out: Path, shape: dict[str, int]) -> Path:
    """A random model of `shape` with the testbed's tokenizer, saved in bfloat16 like a hub
    checkpoint."""
    config, tokenizer = model_files(shape)
    eos, pad = config.eos_token_id, config.pad_token_id
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(config).to(torch.bfloat16)
    model.generation_config = GenerationConfig(eos_token_id=eos, pad_token_id=pad, do_sample=True,
                                               top_k=0, max_new_tokens=256)  # fmt: skip
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def peak_gib() -> str:
    if not torch.cuda.is_available():
        return "n/a (no GPU)"
    return f"{torch.cuda.max_memory_allocated() / 2**30:.2f} GiB"


def phase(name: str, argv: list[str], rollouts: int, metrics: Path | None) -> None:
    """Run one traac command in this process and print its seconds, its peak GPU memory and,
    for a training run (`metrics`: its output_dir), the per-step figures of its metrics."""
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    begin = time.perf_counter()
    code = traac(argv)
    seconds = time.perf_counter() - begin
    if code != 0:
        raise SystemExit(f"gpu_smoke: {name} exited {code}: traac {' '.join(argv)}")
    line = f"{name}: {seconds:.1f} s, peak GPU memory {peak_gib()}"
    if metrics is not None:
        steps = [json.loads(x) for x in (metrics / METRICS_FILE).read_text().splitlines()]
        tokens = sum(s["traac/all/response_tokens"] * rollouts for s in steps)
        line += (f", {seconds / len(steps):.2f} s per step ({len(steps)} steps), "
                 f"{tokens / seconds:.0f} rollout tokens per second")  # fmt: skip
    print(line, flush=True)


@dataclass(frozen=True)
class Phase:
    """One traac command of the smoke: its name, its arguments, the rollouts per step and, for
    a training run, its output directory (whose metrics it prints)."""

    name: str
    argv: list[str]
    rollouts: int
    metrics: Path | None


def phases(root: Path, model: Path, steps: int, tiny: bool, gpu: bool, vllm: bool) -> list[Phase]:
    """The smoke's commands, in order: LoRA, full fine-tuning, then an evaluation of the
    result with a think budget and test-time compression. On the CPU the recipe's one thread
    (the tiny model's ops are too small to split); on the GPU the count torch chose for this
    process (the host's share of the work: tokenizing, verifying)."""
    batch, n, length = (8, 4, 24) if tiny else (16, 8, 1024)
    common = [
        "train", "--config", str(RECIPE), "--model_name_or_path", str(model),
        "--dataset", f"testbed:all?n={4 * batch // n}", "--max_steps", str(steps),
        "--per_device_train_batch_size", str(batch), "--num_generations", str(n),
        "--max_completion_length", str(length), "--bf16", "true",
        "--use_cpu", "false" if gpu else "true", "--disable_tqdm", "true",
        "--use_vllm", str(vllm).lower(), "--vllm_mode", "colocate",
        "--rollout_batching", "padded",  # the testbed recipe's refill is transformers-only
        "--vllm_gpu_memory_utilization", "0.3",
        "--num_threads", str(torch.get_num_threads() if gpu else 1),
    ]  # fmt: skip
    lora, full = root / "lora", root / "full"
    lora_argv = [*common, "--use_peft", "true", "--lora_r", "16", "--learning_rate", "1e-4",
                 "--output_dir", str(lora)]  # fmt: skip
    evaluate = [
        "eval", "--model", str(full), "--dataset", "testbed:all?n=8", "--output",
        str(root / "eval"), "--max-new-tokens", str(length), "--think-budget",
        str(max(8, length // 2)), "--compress-tau", "0.4", "--num-samples", "1",
        "--backend", "vllm" if vllm else "transformers",
        *(["--gpu-memory-utilization", "0.3"] if vllm else []),
        "--device", "cuda" if gpu else "cpu", "--dtype", "bfloat16",
    ]  # fmt: skip
    return [
        Phase("LoRA", lora_argv, batch, lora),
        Phase("full fine-tuning", [*common, "--output_dir", str(full)], batch, full),
        Phase("eval (think budget, compress-tau)", evaluate, 0, None),
    ]


def validate(plan: list[Phase]) -> None:
    """`traac train --dry-run` of every training phase: a bad argument fails in seconds, before
    any step (the plans go to a buffer; a failure prints its one line)."""
    for step in plan:
        if step.argv[0] != "train":
            continue
        with contextlib.redirect_stdout(io.StringIO()):
            code = traac([*step.argv, "--dry-run"])
        if code != 0:
            raise SystemExit(f"gpu_smoke: {step.name}: the dry run exited {code}: traac "
                             f"{' '.join(step.argv)} --dry-run")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="a tiny shape, on the CPU")
    parser.add_argument("--steps", type=int, default=5, help="TRAAC steps per run (default 5)")
    parser.add_argument("--output", type=Path, help="keep models and runs here (default: temp)")
    args = parser.parse_args(argv)
    gpu = torch.cuda.is_available() and not args.tiny
    vllm = gpu and importlib.util.find_spec("vllm") is not None
    print(f"machine: {machine()}; GPU: {torch.cuda.get_device_name() if gpu else 'none'}; "
          f"generation: {'vLLM (colocate)' if vllm else 'transformers'}", flush=True)  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        root = args.output or Path(tmp)
        model = build_model(root / "model", TINY if args.tiny else QWEN3_06B)
        plan = phases(root, model, args.steps, args.tiny, gpu, vllm)
        validate(plan)
        for step in plan:
            phase(step.name, step.argv, step.rollouts, step.metrics)
    return 0


if __name__ == "__main__":
    sys.exit(main())
