"""Issue 48's GPU measurements in one run (about 6 minutes on an H100): decoding, memory, probe.

    python benchmarks/gpu_fast_paths.py            # on the GPU (bf16, Qwen3-0.6B's shape)
    python benchmarks/gpu_fast_paths.py --tiny     # the same code at tiny shapes on the CPU
    python benchmarks/gpu_fast_paths.py --only probe,decode

decode  ms per decoding step, 16 rows of a random Qwen3-0.6B (vocabulary 151,936), a 32-token
        prompt, `--new-tokens` steps: plain `model.generate` sampling (dynamic cache, eager: the
        baseline), traac's padded decode (`decode_padded`, eager), its static-cache path
        (`decode_padded(static=True)`: compiled into CUDA graphs by transformers, the path a
        GPU takes), and the refill engine (`decode_refilled`, eager: the CPU's path). Goal:
        static at least 3x faster than `model.generate`. Compilation is warmed up first and
        reported apart; the compared runs must sample the same tokens (checked).
memory  each phase of a step at the GPU smoke's shape (LoRA r 16 on q/v, bf16, the testbed's
        640-token vocabulary, 16 rows of a 40-token prompt + `--completion` tokens), its peak
        above the weights by `torch.cuda.max_memory_allocated`, beside the dry-run's estimate
        of that phase (`traac.training.planning.memory.estimate`).
probe   `AttentionScorer.token_scores` against the same plain forward (`logits_to_keep=1`,
        SDPA, bf16), one sequence of T tokens, median of 10 CUDA-event-timed calls after 3
        warm-ups, T = 2k, 8k, 16k. Goal: <= 1.10x at 2k, <= 1.05x from 8k.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import torch
import transformers
from transformers import Qwen3Config, Qwen3ForCausalLM

from _common import command, machine
from traac.common.decoding import RowSampler, decode_padded, decode_refilled
from traac.compression.scoring import AttentionScorer
from traac.training.methods.traac import TraacSettings  # attention on the reference
from traac.training.planning.memory import GIB, Shape, Sharding, count_parameters, estimate

QWEN3_06B = {  # Qwen/Qwen3-0.6B's config.json, the fields that shape it
    "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28,
    "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
    "vocab_size": 151936, "tie_word_embeddings": True, "max_position_embeddings": 40960,
}  # fmt: skip
TINY = {
    "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
    "vocab_size": 640, "tie_word_embeddings": True, "max_position_embeddings": 4096,
}  # fmt: skip
SMOKE_VOCAB = 640  # the testbed tokenizer's vocabulary, which the GPU smoke's model has
ROWS, PROMPT = 16, 40  # the smoke's rollouts per step and about its testbed prompts' length


def model_of(shape: dict[str, Any], device: str, dtype: torch.dtype, **changes: Any) -> Any:
    torch.manual_seed(0)
    config = Qwen3Config(**{**shape, **changes}, pad_token_id=0, eos_token_id=1)
    model = Qwen3ForCausalLM(config).to(device=device, dtype=dtype).eval()
    model.set_attn_implementation("sdpa")
    return model


def timer(device: str) -> Callable[[Callable[[], object]], float]:
    """Seconds of one call: CUDA events on a GPU, the wall clock on a CPU."""

    def run(call: Callable[[], object]) -> float:
        if device != "cuda":
            start = time.perf_counter()
            call()
            return time.perf_counter() - start
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        call()
        end.record()
        torch.cuda.synchronize()
        return begin.elapsed_time(end) / 1e3

    return run


def decode(args: argparse.Namespace, device: str, dtype: torch.dtype) -> None:
    model = model_of(TINY if args.tiny else QWEN3_06B, device, dtype)
    vocab = model.config.vocab_size
    torch.manual_seed(1)
    prompts = torch.randint(2, vocab, (ROWS, 32)).tolist()
    new, stop = args.new_tokens, {1}
    ids = torch.tensor(prompts, device=device)
    seeds = list(range(ROWS))

    def plain() -> Any:
        with torch.inference_mode():
            return model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                  max_new_tokens=new, do_sample=True, top_k=0,
                                  pad_token_id=0, eos_token_id=1)  # fmt: skip

    def traac(static: bool) -> Callable[[], Any]:
        options = {"max_new_tokens": new, "stop_ids": stop, "pad_id": 0, "static": static}
        return lambda: decode_padded(model, prompts, RowSampler(1.0, 1.0, seeds), **options)

    def refill() -> Any:
        return decode_refilled(model, prompts, RowSampler(1.0, 1.0, seeds), max_new_tokens=new,
                               stop_ids=stop, pad_id=0, slots=ROWS)  # fmt: skip

    clock = timer(device)
    compile_s = clock(traac(True))  # the first static call compiles (and records the graphs)
    static = "traac static cache (compiled)" if device == "cuda" else "traac static cache (eager)"
    runs = {"model.generate": plain, "traac padded (eager)": traac(False), static: traac(True),
            "traac refill (eager)": refill}  # fmt: skip
    results, outputs = {}, {}
    for name, call in runs.items():
        call()  # warm-up
        steps = []
        for _ in range(args.repeats):
            out: list[Any] = []
            seconds = clock(lambda c=call, o=out: o.append(c()))
            outputs[name] = out[0]
            steps.append(seconds / new)
        results[name] = statistics.median(steps)
    same = outputs[static] == outputs["traac padded (eager)"]
    agree = sum(a == b for a, b in zip(outputs[static],
                                       outputs["traac refill (eager)"], strict=True))  # fmt: skip
    base = results["model.generate"]
    print(f"\n## decode: {ROWS} rows, 32-token prompts, {new} new tokens (ms per decoding step, "
          f"median of {args.repeats}; first static call, compiling {compile_s:.1f} s)")  # fmt: skip
    print("| engine | ms per step | tokens/s | speed-up over model.generate |\n|---|---|---|---|")
    for name, seconds in results.items():
        print(f"| {name} | {1e3 * seconds:.2f} | {ROWS / seconds:.0f} | {base / seconds:.2f}x |")
    print(
        f"static == padded eager tokens: {same}; rows equal to refill: {agree}/{ROWS} "
        "(batch shapes may move a sampled token in bf16)"
    )


def memory(args: argparse.Namespace, device: str, dtype: torch.dtype) -> None:
    from peft import LoraConfig, get_peft_model
    from trl.trainer.utils import selective_log_softmax

    shape = {**(TINY if args.tiny else QWEN3_06B), "vocab_size": SMOKE_VOCAB}
    completion = args.completion
    base = model_of(shape, device, dtype)
    model = get_peft_model(base, LoraConfig(r=16, lora_dropout=0.05))
    cuda = device == "cuda"
    torch.manual_seed(2)
    ids = torch.randint(2, SMOKE_VOCAB, (ROWS, PROMPT + completion), device=device)

    def peak(call: Callable[[], object]) -> float | None:
        if not cuda:
            call()
            return None
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        held = torch.cuda.memory_allocated()
        call()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - held

    def training() -> None:
        model.train()
        logits = model(input_ids=ids).logits[:, PROMPT - 1 : -1]
        logps = selective_log_softmax(logits, ids[:, PROMPT:])
        (-logps.mean()).backward()
        model.zero_grad(set_to_none=True)
        model.eval()

    def log_probs() -> None:
        with torch.no_grad():
            logits = model(input_ids=ids).logits[:, PROMPT - 1 : -1]
            selective_log_softmax(logits, ids[:, PROMPT:])

    def generation() -> None:
        prompt = ids[:, :PROMPT]
        with torch.inference_mode():
            model.generate(input_ids=prompt, attention_mask=torch.ones_like(prompt),
                           max_new_tokens=completion, min_new_tokens=completion,
                           do_sample=False, pad_token_id=0)  # fmt: skip

    def scorer() -> None:
        with model.disable_adapter():
            AttentionScorer(model, None, batch_size=8).token_scores(ids[:8])

    measured = {"training": peak(training), "log-prob passes": peak(log_probs),
                "generation": peak(generation), "scorer": peak(scorer)}  # fmt: skip
    config = SimpleNamespace(load_dtype=dtype, compresses=True, traac_settings=TraacSettings(),
                             beta=0.04, use_vllm=False,
                             per_device_train_batch_size=ROWS, steps_per_generation=1,
                             max_completion_length=completion,
                             gradient_checkpointing=False)  # fmt: skip
    hf = Qwen3Config(**shape)
    parameters, trainable = count_parameters(hf, (16, None))
    planned = estimate(parameters, trainable, Shape.of(hf), config=config, sharding=Sharding(),
                       lora=(16, None), prompt_tokens=PROMPT)  # fmt: skip
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    print(f"\n## memory: LoRA r 16 (q, v), {dtype}, {ROWS} rows x ({PROMPT} + {completion}) "
          f"tokens, vocabulary {SMOKE_VOCAB}; weights {weights / GIB:.2f} GiB "
          f"(estimate {sum(planned.terms.values()) / GIB:.2f})")  # fmt: skip
    print("| phase | measured peak above the weights GiB | estimate GiB | estimate / measured |")
    print("|---|---|---|---|")
    for name, got in measured.items():
        want = sum(planned.phases[name].values())
        ratio = "n/a (no GPU)" if got is None else f"{want / got:.2f}"
        shown = "n/a (no GPU)" if got is None else f"{got / GIB:.2f}"
        print(f"| {name} | {shown} | {want / GIB:.2f} | {ratio} |")
    print(
        f"whole step by the estimate: {planned.total / GIB:.2f} GiB (the smoke measured 29.19 "
        "GiB at 1,024 tokens)"
    )


def probe(args: argparse.Namespace, device: str, dtype: torch.dtype) -> None:
    model = model_of(TINY if args.tiny else QWEN3_06B, device, dtype)
    scorer = AttentionScorer(model, None)
    clock = timer(device)
    print("\n## probe: one sequence, median of 10 timed calls after 3 warm-ups (ms)")
    print("| T | plain forward | probe | probe / plain |\n|---|---|---|---|")
    for length in [int(x) for x in args.lengths.split(",")]:
        ids = torch.randint(0, model.config.vocab_size, (1, length), device=device)
        plain = torch.no_grad()(lambda i=ids: model(input_ids=i, use_cache=False, logits_to_keep=1))
        calls = {"plain": plain, "probe": lambda i=ids: scorer.token_scores(i)}
        for call in calls.values():
            for _ in range(3):
                call()
        times: dict[str, list[float]] = {name: [] for name in calls}
        for _ in range(10):  # alternating, so drift in clocks or load hits both alike
            for name, call in calls.items():
                times[name].append(clock(call))
        med = {name: statistics.median(t) for name, t in times.items()}
        print(f"| {length} | {1e3 * med['plain']:.2f} | {1e3 * med['probe']:.2f} "
              f"| {med['probe'] / med['plain']:.3f} |")  # fmt: skip


PARTS = {"decode": decode, "memory": memory, "probe": probe}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="tiny shapes, on the CPU")
    parser.add_argument("--only", default=",".join(PARTS), help="decode,memory,probe")
    parser.add_argument("--new-tokens", type=int, help="decode steps (default 256; tiny 8)")
    parser.add_argument("--completion", type=int, help="memory: tokens (default 1024; tiny 16)")
    parser.add_argument("--lengths", help="probe T (default 2048,8192,16384; tiny 64)")
    parser.add_argument("--repeats", type=int, default=3, help="decode: timed runs per engine")
    args = parser.parse_args(argv)
    gpu = torch.cuda.is_available() and not args.tiny
    if not gpu and not args.tiny:
        parser.error("no GPU here: run it on the GPU, or with --tiny for the CPU path")
    args.new_tokens = args.new_tokens or (8 if args.tiny else 256)
    args.completion = args.completion or (16 if args.tiny else 1024)
    args.lengths = args.lengths or ("64" if args.tiny else "2048,8192,16384")
    device, dtype = ("cuda", torch.bfloat16) if gpu else ("cpu", torch.float32)
    card = f"{torch.cuda.get_device_name()}, CUDA {torch.version.cuda}" if gpu else "no GPU"
    print(f"machine: {machine()}; {card}; transformers {transformers.__version__}")
    print(command(argv))
    for name in args.only.split(","):
        if name not in PARTS:
            parser.error(f"--only {name}: use {', '.join(PARTS)}")
        PARTS[name](args, device, dtype)
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
