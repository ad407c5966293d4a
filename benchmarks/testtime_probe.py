"""Test-time compression: the cached-suffix probe against the full re-forward of the probe.

A random-init Qwen3-architecture model (hidden 512, 8 layers, 8 query / 2 key-value heads), or
with `--model smollm2` the real SmolLM2-135M-Instruct, and a probe of T tokens: the opener and
T - S - 1 reasoning tokens, then S suffix tokens (separator + auxiliary prompt + closer: 26 with
Qwen3's tokenizer, as many as the real model's own tokenizer makes of them). Timed in one
process, the two alternating so that load from other processes hits both alike:
  full     `AttentionScorer.token_scores` on all T tokens (what compression.py does);
  closer   `probe_cache.cached_probe_row` once the closer is sampled: the suffix, plus the
           reasoning tokens the probe cache has not been fed yet (the tail: 0 with
           `probe_chunk=1`, at most 31 with the default 32), against the cached keys.
The rows are compared (max |difference| over the T scores). The cache itself is built while the
model decodes: `ProbeCache.feed` every 32 sampled tokens, about one prefill of the reasoning in
all ("build", timed once per repeat, chunk by chunk as decoding would run it).

    python benchmarks/testtime_probe.py                 # T = 1k and 4k
    python benchmarks/testtime_probe.py --lengths 1024 4096 --repeats 5
    python benchmarks/testtime_probe.py --model smollm2 --lengths 4096   # the real model
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from _common import add_model_options, command, machine, set_threads

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
SUFFIX = 26


def seconds(call: Callable[[], object], sync: Callable[[], None]) -> float:
    sync()
    start = time.perf_counter()
    call()
    sync()
    return time.perf_counter() - start


def load(name: str, device: str):
    """(model, suffix tokens): the random model above, or a traac model name or path, whose
    tokenizer says how many tokens the separator, auxiliary prompt and closer take."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen3Config, Qwen3ForCausalLM

    from traac.compression.formats import AUX_PROMPT, ChatFormat
    from traac.pipelines.model_registry import resolve_model

    torch.manual_seed(0)
    if name == "random":
        model, suffix = Qwen3ForCausalLM(Qwen3Config(**MODEL)), SUFFIX
    else:
        path = resolve_model(name)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
        text = "\n" + AUX_PROMPT + ChatFormat().think_close
        suffix = len(AutoTokenizer.from_pretrained(path).encode(text, add_special_tokens=False))
    model = model.eval().to(device)
    model.set_attn_implementation("sdpa")
    return model, suffix


def measure(model, length: int, repeats: int, device: str, suffix: int) -> dict[str, float]:
    import torch
    from transformers import DynamicCache

    from traac.compression.probe_cache import DEFAULT_PROBE_CHUNK as CHUNK
    from traac.compression.probe_cache import ProbeCache, cached_probe_row
    from traac.compression.scoring import AttentionScorer

    def sync() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    generator = torch.Generator().manual_seed(length)
    probe = torch.randint(0, MODEL["vocab_size"], (length,), generator=generator).tolist()
    held = probe[:-SUFFIX]  # opener + reasoning
    ids = torch.tensor([probe], device=device)
    columns = torch.arange(len(held))
    scorer = AttentionScorer(model, tokenizer=None)
    with torch.no_grad():
        cache = DynamicCache(config=model.config)
        model.base_model(input_ids=ids[:, : len(held)], past_key_values=cache, use_cache=True)

    def full() -> torch.Tensor:
        return scorer.token_scores(ids)[0]

    def closer(tail: int) -> Callable[[], torch.Tensor]:
        cached = held[: len(held) - tail]
        return lambda: cached_probe_row(model, cache, 0, columns, cached, probe)[0]

    @torch.no_grad()
    def build() -> None:
        built = ProbeCache(model, held[:1], 1, CHUNK)
        reasoning = held[1:]
        for end in range(CHUNK, len(reasoning) + 1, CHUNK):
            built.feed([reasoning[:end]])

    reference = full()
    diff = max(float((reference - closer(t)()).abs().max()) for t in (0, CHUNK - 1))
    calls = {"full": full, "tail0": closer(0), "tail31": closer(CHUNK - 1), "build": build}
    for call in calls.values():
        call()  # warm-up
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            times[name].append(seconds(call, sync))
    return {"diff": diff, **{name: statistics.median(t) for name, t in times.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 4096])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    add_model_options(parser, "random")  # random: the model above
    args = parser.parse_args()
    set_threads(args.threads)

    from rich.console import Console
    from rich.table import Table

    model, suffix = load(args.model, args.device)
    table = Table(
        title=f"{args.model}: cached-suffix probe vs full re-forward (S = {suffix} suffix tokens)"
    )
    columns = (
        "T",
        "full (s)",
        "closer, tail 0 (s)",
        "/ full",
        "closer, tail 31 (s)",
        "/ full",
        "build (s)",
        "/ full",
        "max |diff|",
    )
    for name in columns:
        table.add_column(name, justify="right")
    for length in args.lengths:
        r = measure(model, length, args.repeats, args.device, suffix)
        table.add_row(
            str(length),
            f"{r['full']:.3f}",
            f"{r['tail0']:.4f}",
            f"{r['tail0'] / r['full']:.4f}",
            f"{r['tail31']:.4f}",
            f"{r['tail31'] / r['full']:.4f}",
            f"{r['build']:.3f}",
            f"{r['build'] / r['full']:.2f}",
            f"{r['diff']:.1e}",
        )
    console = Console(width=120)
    console.print(table)
    console.print(
        f"machine: {machine()}; device {args.device}, median of {args.repeats}\n{command()}",
        markup=False,
        highlight=False,
    )


if __name__ == "__main__":
    main()
