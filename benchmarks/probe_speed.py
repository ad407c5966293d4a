"""How much the attention probe costs over a plain forward pass, and what eager attention costs.

A random-init Qwen3-architecture model (hidden 512, 8 layers, 8 query / 2 key-value heads), or
with `--model smollm2` the real SmolLM2-135M-Instruct (30 layers, 9 / 3 heads, with an attention
sink), runs three ways on one sequence of T tokens:
  plain  SDPA forward of the base model (what scoring could not be cheaper than),
  probe  `AttentionScorer.token_scores` (the same forward plus one attention row per layer;
         "probe rows alone" times just those rows, for all layers, outside the forward),
  eager  `output_attentions=True` with eager attention (the T x T maps the probe avoids).
Time: median of `--repeats` warm calls; plain and probe alternate inside one process so load
from other processes on the machine hits them alike (eager runs in a process of its own).
Peak memory: a fresh process per method and length builds the model and input, resets the
kernel's peak-RSS counter (/proc/self/clear_refs), runs ONE cold call and reports VmHWM minus
the RSS before the call, i.e. the extra resident memory the call needed at its peak (Linux only;
glibc's mmap threshold is pinned at 64 KiB there so that freed tensors leave RSS at once).
Eager is skipped where its returned maps alone would exceed `--eager-max-gb`.

Separately, the CPU-side work of compressing one ~10k-token trajectory, the forward excluded:
tokenising the probe with offsets, then segmentation, token-to-step aggregation, uniformity,
eviction and re-counting tokens (`Compressor` with precomputed token scores).

    python benchmarks/probe_speed.py            # T = 1k, 2k, 4k, 8k
    python benchmarks/probe_speed.py --quick    # T = 512, 1k, 2 repeats
    python benchmarks/probe_speed.py --threads 1   # steadier on a machine shared with others
    python benchmarks/probe_speed.py --model smollm2 --lengths 2048,4096   # the real model
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from _common import add_model_options, command, machine, set_threads

METHODS = ("plain", "probe", "eager")
MODEL = {
    "hidden_size": 512,
    "intermediate_size": 1536,
    "num_hidden_layers": 8,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "vocab_size": 4096,
    "max_position_embeddings": 16384,
}


def build(length: int, device: str, name: str = "random"):
    """`random`: the random-init model above; else a traac model name or path (`smollm2`)."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen3Config, Qwen3ForCausalLM

    from traac.pipelines.model_registry import resolve_model

    torch.manual_seed(0)
    if name == "random":
        model = Qwen3ForCausalLM(Qwen3Config(**MODEL))
    else:
        model = AutoModelForCausalLM.from_pretrained(resolve_model(name), dtype=torch.float32)
    model = model.eval().to(device)
    model.set_attn_implementation("sdpa")
    ids = torch.randint(0, model.config.vocab_size, (1, length), device=device)
    return model, ids


def runner(method: str, model, ids) -> Callable[[], object]:
    """A zero-argument call doing `method` once on `ids`."""
    import torch

    from traac.compression.scoring import AttentionScorer

    if method == "plain":
        return torch.no_grad()(lambda: model.base_model(input_ids=ids, use_cache=False))
    if method == "probe":
        scorer = AttentionScorer(model, tokenizer=None)
        return lambda: scorer.token_scores(ids)

    def eager():
        model.set_attn_implementation("eager")
        try:
            with torch.no_grad():
                return model.base_model(input_ids=ids, use_cache=False, output_attentions=True)
        finally:
            model.set_attn_implementation("sdpa")

    return eager


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def worker_memory(method: str, length: int, device: str, name: str) -> dict:
    """Extra peak memory of one cold call, in a fresh process (RSS on CPU, allocator on CUDA)."""
    import torch

    model, ids = build(length, device, name)
    call = runner(method, model, ids)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        out = call()
        _sync(device)
        peak = torch.cuda.max_memory_allocated() - base
    else:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset VmHWM (peak RSS) to the current RSS
        base = _status_kb("VmRSS") * 1024
        out = call()
        peak = _status_kb("VmHWM") * 1024 - base
    del out
    return {"peak_mb": peak / 2**20}


def worker_time(methods: list[str], length: int, repeats: int, device: str, name: str) -> dict:
    """Median seconds per method; methods alternate (rotating order) after one warm-up each."""
    model, ids = build(length, device, name)
    calls = {m: runner(m, model, ids) for m in methods}
    for m in methods:
        calls[m]()
    times: dict[str, list[float]] = {m: [] for m in methods}
    for r in range(repeats):
        for m in methods[r % len(methods) :] + methods[: r % len(methods)]:
            _sync(device)
            start = time.perf_counter()
            out = calls[m]()
            _sync(device)
            times[m].append(time.perf_counter() - start)
            del out
    out = {m: statistics.median(t) for m, t in times.items()}
    if "probe" in methods:
        out["rows"] = rows_alone(length, repeats, device)
    return out


def rows_alone(length: int, repeats: int, device: str) -> float:
    """Seconds of the probe's own work per forward (one row per layer), timed in isolation."""
    import torch

    from traac.compression.probe_capture import probe_row

    heads, kv_heads, dim = (
        MODEL[k] for k in ("num_attention_heads", "num_key_value_heads", "head_dim")
    )
    query = torch.randn(1, heads, length, dim, device=device)
    key = torch.randn(1, kv_heads, length, dim, device=device)
    index = torch.tensor([length - 1], device=device)
    samples = []
    for _ in range(max(5, repeats)):
        _sync(device)
        start = time.perf_counter()
        for _ in range(MODEL["num_hidden_layers"]):
            probe_row(query, key, None, dim**-0.5, True, index)
        _sync(device)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def in_subprocess(*args: str, pin_mmap: bool = False) -> dict:
    env = dict(os.environ)
    if pin_mmap:
        # A fixed glibc mmap threshold (it otherwise grows up to 32 MiB as big blocks are freed)
        # gives every tensor above 64 KiB its own mapping, returned to the kernel on free, so
        # peak RSS follows the peak of live memory instead of the allocator's reuse pattern.
        env["MALLOC_MMAP_THRESHOLD_"] = str(64 * 1024)
    done = subprocess.run(
        [sys.executable, __file__, "--worker", *args], capture_output=True, text=True, env=env
    )
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or ["no output"]
        return {"error": tail[0]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def eager_gb(length: int, name: str = "random") -> float:
    """Bytes of the attention maps `output_attentions` returns (float32), in GB."""
    config = MODEL
    if name != "random":
        from transformers import AutoConfig

        from traac.pipelines.model_registry import resolve_model

        config = AutoConfig.from_pretrained(resolve_model(name)).to_dict()
    return config["num_hidden_layers"] * config["num_attention_heads"] * length**2 * 4 / 1e9


def synthetic_trajectory(target_tokens: int, seed: int = 0):
    """A reasoning trace of phrase-led steps (~30 tokens each) and a BPE tokenizer trained on
    it (offline, so the benchmark needs no download), grown until it has `target_tokens`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from traac.compression.segmentation import SPLIT_PHRASES

    rng = random.Random(seed)
    words = ["the", "sum", "of", "we", "get", "so", "it", "is", "then", "check", "value"]

    def step() -> str:
        body = " ".join(
            rng.choice(words) if rng.random() < 0.7 else str(rng.randint(0, 999))
            for _ in range(rng.randint(8, 24))
        )
        return f"{rng.choice(SPLIT_PHRASES)}, {body}.\n"

    steps = [step() for _ in range(target_tokens // 30)]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600, special_tokens=["<think>", "</think>"], show_progress=False
    )
    tok.train_from_iterator(steps, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok)
    while len(fast("".join(steps), add_special_tokens=False)["input_ids"]) < target_tokens:
        steps += [step() for _ in range(20)]
    return "".join(steps), fast


class _NoTokens:
    """A tokenizer stand-in that returns no tokens: times compression without token counting."""

    def __call__(self, text: str, **kwargs: object) -> dict:
        return {"input_ids": []}


def cpu_compression(repeats: int) -> dict:
    """Milliseconds for the CPU side of compressing one ~10k-token trajectory."""
    import numpy as np

    from traac.compression.compression import Compressor, TokenScores, count_tokens
    from traac.compression.formats import ChatFormat
    from traac.compression.scoring import encode_offsets
    from traac.compression.segmentation import split_steps, token_step_index

    reasoning, tokenizer = synthetic_trajectory(10_000)
    fmt = ChatFormat()
    probe = fmt.probe_text(reasoning)
    _, offsets = encode_offsets(tokenizer, probe)
    # Step-level log-normal scores: peaked enough that u falls below the gate and steps go.
    steps = split_steps(probe)
    per_step = np.random.default_rng(0).lognormal(0.0, 2.0, size=len(steps))
    scores = per_step[np.clip(token_step_index(steps, offsets), 0, None)]
    precomputed = TokenScores(offsets, scores)

    class Fixed:
        gated = True

        def __init__(self, tok: object) -> None:
            self.tokenizer = tok

        def score(self, requests):
            return [precomputed for _ in requests]

    full = Compressor(Fixed(tokenizer), fmt)
    core = Compressor(Fixed(_NoTokens()), fmt)

    def median_ms(fn: Callable[[], object]) -> float:
        fn()
        samples = []
        for _ in range(max(11, repeats * 5)):
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
        return 1e3 * statistics.median(samples)

    result = full([reasoning], [0.6])[0]
    return {
        "tokens": count_tokens(tokenizer, reasoning),
        "steps": len(result.steps),
        "evicted": result.n_evicted,
        "uniformity": result.uniformity,
        "tokenize_probe_ms": median_ms(lambda: encode_offsets(tokenizer, probe)),
        "core_ms": median_ms(lambda: core([reasoning], [0.6])),
        "compressor_ms": median_ms(lambda: full([reasoning], [0.6])),
    }


def device_name(device: str) -> str:
    """The GPU on CUDA, else the CPU machine (see _common.machine)."""
    import torch

    if device.startswith("cuda"):
        return f"{torch.cuda.get_device_name()}, torch {torch.__version__}"
    return machine()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", default="1024,2048,4096,8192", help="comma-separated T")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per method")
    parser.add_argument("--quick", action="store_true", help="T = 512,1024 and 2 repeats")
    parser.add_argument("--device", default="cpu")
    add_model_options(parser, "random")  # random: the model above
    parser.add_argument("--eager-max-gb", type=float, default=8.0, help="skip eager above this")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    set_threads(args.threads)
    common = ["--device", args.device, "--threads", str(args.threads), "--model", args.model]

    if args.worker:
        kind, *rest = args.worker
        if kind == "memory":
            out = worker_memory(rest[0], int(rest[1]), args.device, args.model)
        else:
            out = worker_time(
                rest[0].split(","), int(rest[1]), int(rest[2]), args.device, args.model
            )
        print(json.dumps(out))
        return 0

    lengths = [512, 1024] if args.quick else [int(x) for x in args.lengths.split(",")]
    repeats = 2 if args.quick else args.repeats
    print(f"machine: {device_name(args.device)}")
    print(command(argv))
    header = (
        "| T | plain s | probe s | eager s | probe/plain | eager/plain | probe rows alone ms "
        "| plain MB | probe MB | eager MB | probe/plain mem |"
    )
    print(header)
    print("|" + "---|" * 11)
    for length in lengths:
        methods = [
            m for m in METHODS if m != "eager" or eager_gb(length, args.model) <= args.eager_max_gb
        ]
        # Eager times in a process of its own: its gigabytes of maps, freed, would make the
        # call after it pay fresh page faults.
        times = in_subprocess("time", "plain,probe", str(length), str(repeats), *common)
        if "eager" in methods:
            times.update(in_subprocess("time", "eager", str(length), str(repeats), *common))
        mem = {m: in_subprocess("memory", m, str(length), *common, pin_mmap=True) for m in methods}

        def cell(value: float | None, fmt: str) -> str:
            return "skipped" if value is None else format(value, fmt)

        t = {m: times.get(m) for m in METHODS}
        p = {m: mem[m].get("peak_mb") if m in mem else None for m in METHODS}
        errors = [d["error"] for d in (times, *mem.values()) if "error" in d]
        rows_ms = 1e3 * times["rows"] if "rows" in times else None
        ratio = lambda a, b: None if a is None or b is None else a / b  # noqa: E731
        print(
            f"| {length} | {cell(t['plain'], '.3f')} | {cell(t['probe'], '.3f')} "
            f"| {cell(t['eager'], '.3f')} | {cell(ratio(t['probe'], t['plain']), '.3f')} "
            f"| {cell(ratio(t['eager'], t['plain']), '.2f')} | {cell(rows_ms, '.1f')} "
            f"| {cell(p['plain'], '.0f')} "
            f"| {cell(p['probe'], '.0f')} | {cell(p['eager'], '.0f')} "
            f"| {cell(ratio(p['probe'], p['plain']), '.3f')} |"
            + (f"  errors: {errors}" if errors else ""),
            flush=True,
        )
    cpu = cpu_compression(repeats)
    print(
        f"\nCPU side of compressing one trajectory ({cpu['tokens']} tokens, {cpu['steps']} "
        f"steps, u = {cpu['uniformity']:.3f}, {cpu['evicted']} evicted at tau 0.6), "
        "forward excluded, median ms:\n"
        f"  segmentation + token-to-step aggregation + u + eviction  {cpu['core_ms']:.2f}\n"
        f"  the same + counting tokens before/after (2 tokenizations) {cpu['compressor_ms']:.2f}\n"
        f"  tokenising the probe with offsets (scorer input)          "
        f"{cpu['tokenize_probe_ms']:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
