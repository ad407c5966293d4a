"""Where a real-model TRAAC step's time and memory go: the step as the smollm2-think recipe
shipped it against the recipe's step now, each variant in a child process, in one run.

Each variant trains `--steps` optimizer steps of `recipes/smollm2-think.yaml` (4 prompts x 8
rollouts, 256 new tokens, LoRA r 16) on `--model` (default the plain `smollm2`: speed and memory
do not depend on the fine-tune, and smollm2-think takes 40 minutes to build). Per step it times,
and samples the peak resident memory (RSS, every 10 ms) of:

  generate     the step's 32 rollouts (TRL's padded `generate`, or traac's refilled decoding)
  verify       parsing and verifying rollouts
  score        the attention probe's forwards over the compression candidates
  regenerate   the answers after compressed think blocks
  ref logps    the reference's (and, where TRL needs them, the old policy's) log-probs
  loss fwd     the policy's log-probs with gradients, and the GRPO loss
  backward     the rest of each micro-step: the backward pass
  step         one optimizer step, end to end

Variants (`--variants`): `shipped` is the recipe before its fast path (one 32-rollout
micro-batch, TRL's padded generation, fp32, log-prob forwards at the batch's full width): it
peaked at 22 GB, so it runs only with `--full` (an idle machine with 24 GB); `shipped-chunked`
is the same in 4 micro-batches of 8 (the same step; `gradient_accumulation_steps` 4), small
enough to run beside other jobs; `recipe` is the recipe as it is; `refill-fp32`, `bf16-only`,
`bf16-weights` and `untrimmed` (TRL's full-width log-prob forwards) isolate one change each.
`long` is the step of the long-interleaved regime (its problems, every rollout 467 tokens long,
TRL's padded decoding), beside `recipe` the short one: what a SmolLM2 run of the long study
costs a step. `--exactness` compares per-token log-probs under bf16 autocast (fp32 weights)
and bf16 weights with fp32, on rollouts of the model, and times a forward in each.

    python benchmarks/real_step.py                      # shipped-chunked against recipe
    python benchmarks/real_step.py --full               # shipped against recipe (idle machine)
    python benchmarks/real_step.py --variants recipe,long --steps 2   # the long step
    python benchmarks/real_step.py --exactness
    python benchmarks/real_step.py --generation --rows 32 --tokens 256
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "recipes" / "smollm2-think.yaml"
SHIPPED = {  # the recipe before its fast path
    "per_device_train_batch_size": 32, "gradient_accumulation_steps": 1,
    "rollout_batching": "padded", "bf16": False,
}  # fmt: skip
LONG_TOKENS = 467
VARIANTS: dict[str, dict[str, Any]] = {
    "shipped": SHIPPED,
    "shipped-chunked": {**SHIPPED, "per_device_train_batch_size": 8,
                        "gradient_accumulation_steps": 4},
    "refill-fp32": {"bf16": False},
    "bf16-only": {"rollout_batching": "padded"},
    "bf16-weights": {"model_init_kwargs": '{"dtype": "bfloat16"}'},
    "recipe": {},
    "micro-8": {"per_device_train_batch_size": 8, "gradient_accumulation_steps": 4},
    "checkpointed": {"gradient_checkpointing": True},
    "untrimmed": {},
    # The long-interleaved regime's step (recipes/smollm2-long-interleaved.yaml's problems),
    # every rollout decoded to 467 tokens: the long teacher's mean trace in SmolLM2's tokenizer
    # (docs/testbed.md#long), so no long build is needed to time it.
    "long": {"dataset": "testbed-long:all?n=100", "max_completion_length": LONG_TOKENS,
             "rollout_batching": "padded",
             "generation_kwargs": json.dumps({"min_new_tokens": LONG_TOKENS})},
}  # fmt: skip
# Variants whose log-prob forwards run at the generation batch's full width, as TRL's do
# (traac.training.trl_adapter.padding cuts each chunk to the columns its rows use).
UNTRIMMED = {"shipped", "shipped-chunked", "untrimmed"}
PHASES = ("generate", "verify", "score", "regenerate", "ref logps", "loss fwd", "backward")
RESULT = "RESULT "
PHASE = "PHASE "


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


class Recorder:
    """Seconds and peak RSS per (step, phase); a thread samples RSS every 10 ms into the peak
    of every phase open at the time."""

    def __init__(self) -> None:
        self.seconds: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.peak: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.open: list[tuple[int, str]] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self) -> None:
        while True:
            rss = rss_mb()
            with self.lock:
                for step, name in self.open:
                    self.peak[step][name] = max(self.peak[step][name], rss)
            time.sleep(0.01)

    @contextmanager
    def phase(self, step: int, name: str) -> Iterator[None]:
        key = (step, name)
        with self.lock:
            self.open.append(key)
            self.peak[step][name] = max(self.peak[step][name], rss_mb())
        begin = time.perf_counter()
        try:
            yield
        finally:
            seconds = time.perf_counter() - begin
            self.seconds[step][name] += seconds
            with self.lock:
                self.open.remove(key)
            # streamed, so a run cut short by its timeout still reports its phases
            print(PHASE + json.dumps([step, name, seconds, self.peak[step][name]]), flush=True)


def instrument(recorder: Recorder) -> None:
    """Wrap the trainer's phases (its step clock's, TRL's log-prob, loss and step hooks)."""
    import torch

    from traac.training.telemetry.step_stats import StepClock
    from traac.training.trl_adapter.trainer import TRAACTrainer

    def wrap(name: str, phase: Any) -> None:
        original = getattr(TRAACTrainer, name)

        def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
            label = phase(self, *args) if callable(phase) else phase
            with recorder.phase(self.state.global_step + 1, label):
                return original(self, *args, **kwargs)

        setattr(TRAACTrainer, name, timed)

    def logps_phase(self: Any, *args: Any) -> str:
        return "loss fwd" if torch.is_grad_enabled() else "ref logps"

    original_phase = StepClock.phase

    @contextmanager
    def phase(self: Any, name: str) -> Iterator[None]:
        step = self.trainer.state.global_step + 1
        with recorder.phase(step, name), original_phase(self, name):
            yield

    StepClock.phase = phase  # type: ignore[method-assign]
    wrap("_get_per_token_logps_and_entropies", logps_phase)
    wrap("_prepare_inputs", "prepare")
    wrap("training_step", "micro-step")
    wrap("_inner_training_loop", "train")

    from transformers import TrainerCallback

    class Steps(TrainerCallback):
        def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            recorder.open.append((state.global_step + 1, "step"))
            recorder.seconds[state.global_step + 1]["step"] -= time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            step = state.global_step
            recorder.seconds[step]["step"] += time.perf_counter()
            recorder.open.remove((step, "step"))
            row = [step, "step", recorder.seconds[step]["step"], recorder.peak[step]["step"]]
            print(PHASE + json.dumps(row), flush=True)

    original_init = TRAACTrainer.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        self.add_callback(Steps())

    TRAACTrainer.__init__ = init


def child(variant: str, opts: argparse.Namespace) -> None:
    """One variant's steps, in this process; prints its figures as one JSON line."""
    from traac.pipelines.train import parse, train

    if variant in UNTRIMMED:
        from traac.training.trl_adapter.trainer import TRAACTrainer

        del TRAACTrainer._get_per_token_logps_and_entropies  # TRL's own, at full width
    recorder = Recorder()
    instrument(recorder)
    overrides = {"model_name_or_path": opts.model, "max_steps": opts.steps,
                 "dataset": opts.dataset, "num_threads": opts.threads, "disable_tqdm": True,
                 **VARIANTS[variant]}  # fmt: skip
    with tempfile.TemporaryDirectory() as out:
        argv = ["--config", str(RECIPE), "--output_dir", out]
        for key, value in overrides.items():
            argv += [f"--{key}", str(value)]
        script, config = parse(argv)
        train(script, config)
        metrics = Path(out, "metrics.jsonl").read_text().splitlines()
    tokens = [json.loads(line).get("traac/all/response_tokens") for line in metrics]
    steps = {}
    for step, seconds in sorted(recorder.seconds.items()):
        if step < 1 or "step" not in seconds:
            continue
        row = dict(seconds)
        row["backward"] = row.get("micro-step", 0) - row.get("prepare", 0) - row.get("loss fwd", 0)
        peaks = dict(recorder.peak[step])
        peaks["backward"] = peaks.get("micro-step", 0)
        steps[step] = {"seconds": row, "peak_mb": peaks}
    settings = {k: getattr(config, k) for k in ("per_device_train_batch_size",
                "gradient_accumulation_steps", "rollout_batching", "bf16")}  # fmt: skip
    settings["load_dtype"] = str(config.load_dtype)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result = {"variant": variant, "settings": settings, "steps": steps, "peak_rss_mb": peak,
              "response_tokens": tokens}  # fmt: skip
    print(RESULT + json.dumps(result), flush=True)


def exactness(opts: argparse.Namespace) -> None:
    """Per-token log-probs of the model's own rollouts in fp32, bf16 autocast and bf16 weights;
    the differences, and a forward's time in each."""
    import torch

    from traac.common.decoding import RowSampler, decode_refilled
    from traac.common.models import load_model, load_tokenizer
    from traac.data.training import load_training_items
    from traac.pipelines.model_registry import resolve_model

    torch.manual_seed(0)
    path = resolve_model(opts.model)
    model, tokenizer = load_model(path, device="cpu"), load_tokenizer(path)
    items = load_training_items(opts.dataset)[: opts.rows]
    prompts = [
        tokenizer.apply_chat_template([{"role": "user", "content": it.question}],
                                      add_generation_prompt=True, tokenize=False)
        for it in items
    ]  # fmt: skip
    ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    stop = {tokenizer.eos_token_id}
    sampler = RowSampler(1.0, 1.0, range(len(ids)))
    pad = tokenizer.pad_token_id
    done = decode_refilled(model, ids, sampler, max_new_tokens=opts.tokens, stop_ids=stop,
                           pad_id=pad, slots=len(ids), keep_stop=True)  # fmt: skip
    seqs = [p + c for p, (c, _) in zip(ids, done, strict=True)]
    width = max(map(len, seqs))
    x = torch.full((len(seqs), width), tokenizer.pad_token_id)
    mask = torch.zeros_like(x)
    scored = torch.zeros_like(x, dtype=torch.bool)  # completion tokens
    for r, (s, p) in enumerate(zip(seqs, ids, strict=True)):
        x[r, : len(s)], mask[r, : len(s)] = torch.tensor(s), 1
        scored[r, len(p) : len(s)] = True

    def logps(m: Any, autocast: bool) -> tuple[torch.Tensor, float]:
        begin = time.perf_counter()
        with torch.no_grad(), torch.autocast("cpu", torch.bfloat16, enabled=autocast):
            logits = m(input_ids=x, attention_mask=mask).logits[:, :-1].float()
            lp = logits.log_softmax(-1).gather(-1, x[:, 1:, None])[..., 0]
        return lp[scored[:, 1:]], time.perf_counter() - begin

    reference, seconds = logps(model, False)
    rows = {"fp32": (reference, seconds), "bf16 autocast": logps(model, True)}
    rows["bf16 weights"] = logps(model.to(torch.bfloat16), True)
    n = int(scored.sum())
    print(f"{len(seqs)} rollouts of {opts.model}, {n} completion tokens, width {width}")
    print("| precision | forward s | max abs dlogp | mean abs dlogp | mean abs (ratio - 1) |")
    print("|---|---:|---:|---:|---:|")
    for name, (lp, seconds) in rows.items():
        d = (lp.float() - reference).abs()
        ratio = (lp.float() - reference).exp().sub(1).abs().mean()
        print(f"| {name} | {seconds:.2f} | {d.max():.4f} | {d.mean():.5f} | {ratio:.5f} |")


def generation(opts: argparse.Namespace) -> None:
    """The step's sampling alone, on the same prompts: TRL's padded `generate` and the refilled
    engine, each in fp32 and under bf16 (weights and autocast), alternating `--repeats` times."""
    import torch

    from traac.common.decoding import RowSampler, decode_refilled
    from traac.common.models import load_model, load_tokenizer
    from traac.data.training import load_training_items
    from traac.pipelines.model_registry import resolve_model

    path = resolve_model(opts.model)
    tokenizer = load_tokenizer(path)
    items = load_training_items(opts.dataset)[: opts.rows // 8]
    texts = [
        tokenizer.apply_chat_template([{"role": "user", "content": it.question}],
                                      add_generation_prompt=True, tokenize=False)
        for it in items for _ in range(8)
    ]  # fmt: skip
    ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    stop, pad = {tokenizer.eos_token_id}, tokenizer.pad_token_id
    width = max(map(len, ids))
    x = torch.tensor([[pad] * (width - len(i)) + i for i in ids])
    mask = torch.arange(width)[None] >= torch.tensor([width - len(i) for i in ids])[:, None]
    models = {"fp32": load_model(path, device="cpu"),
              "bf16": load_model(path, device="cpu", dtype=torch.bfloat16)}  # fmt: skip

    def padded(m: Any) -> int:
        out = m.generate(input_ids=x, attention_mask=mask.long(), do_sample=True,
                         max_new_tokens=opts.tokens, pad_token_id=pad,
                         eos_token_id=list(stop))  # fmt: skip
        return int((out[:, width:] != pad).sum())

    def refill(m: Any) -> int:
        sampler = RowSampler(1.0, 1.0, range(len(ids)))
        done = decode_refilled(m, ids, sampler, max_new_tokens=opts.tokens, stop_ids=stop,
                               pad_id=pad, slots=len(ids), keep_stop=True)  # fmt: skip
        return sum(len(c) for c, _ in done)

    for _ in range(opts.repeats):
        for engine, run in (("padded", padded), ("refill", refill)):
            for precision, m in models.items():
                torch.manual_seed(0)
                begin = time.perf_counter()
                with (
                    torch.inference_mode(),
                    torch.autocast("cpu", torch.bfloat16, enabled=precision == "bf16"),
                ):
                    tokens = run(m)
                seconds = time.perf_counter() - begin
                print(f"{engine} {precision}: {len(ids)} rollouts, {tokens} tokens, "
                      f"{seconds:.1f} s, load {os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip


def machine() -> str:
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = next((x.split(":", 1)[1].strip() for x in lscpu.splitlines()
                  if x.startswith("Model name")), "?")  # fmt: skip
    bf16 = "avx512_bf16" in lscpu
    load = "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    return f"{model}, {os.cpu_count()} cores, avx512_bf16 {'yes' if bf16 else 'no'}; load {load}"


def others() -> str:
    """The busiest other processes (what else was running)."""
    ps = subprocess.run(["ps", "-eo", "pid,pcpu,rss,args", "--sort=-pcpu"], capture_output=True,
                        text=True).stdout.splitlines()[1:7]  # fmt: skip
    mine = [x for x in ps if x.split()[0] != str(os.getpid())][:5]
    return "\n".join(f"  {x.strip()[:120]}" for x in mine)


def report(results: list[dict[str, Any]]) -> None:
    print("| phase | " + " | ".join(r["variant"] for r in results) + " | ratio |")
    print("|---|" + "---:|" * (len(results) + 1))
    for name in (*PHASES, "step"):
        cells, values = [], []
        for r in results:
            ss = [s["seconds"].get(name, 0.0) for s in r["steps"].values()]
            pk = max((s["peak_mb"].get(name, 0.0) for s in r["steps"].values()), default=0)
            values.append(sum(ss) / max(len(ss), 1))
            cells.append(" / ".join(f"{x:.1f}" for x in ss) + f" s, {pk / 1024:.1f} GB")
        ratio = values[0] / values[-1] if values[-1] else float("nan")
        print(f"| {name} | " + " | ".join(cells) + f" | {ratio:.2f}x |")
    for r in results:
        tokens = ", ".join(f"{t:.0f}" for t in r.get("response_tokens") or [] if t is not None)
        print(f"{r['variant']}: {r['settings']}; peak RSS {r['peak_rss_mb'] / 1024:.2f} GB; "
              f"mean response tokens a step: {tokens or '?'}")  # fmt: skip


def partial(variant: str, stdout: str) -> dict[str, Any]:
    """A variant cut short: the phases it finished, from the lines its child streamed."""
    steps: dict[int, dict[str, dict[str, float]]] = {}
    for line in stdout.splitlines():
        if line.startswith(PHASE):
            step, name, seconds, peak = json.loads(line[len(PHASE) :])
            row = steps.setdefault(step, {"seconds": defaultdict(float), "peak_mb": {}})
            row["seconds"][name] += seconds
            row["peak_mb"][name] = max(row["peak_mb"].get(name, 0.0), peak)
    peak = max((p for r in steps.values() for p in r["peak_mb"].values()), default=0.0)
    return {"variant": f"{variant} (cut short)", "settings": VARIANTS[variant],
            "steps": {k: v for k, v in steps.items() if k >= 1}, "peak_rss_mb": peak}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--dataset", default="testbed:all?n=100")
    parser.add_argument("--steps", type=int, default=2, help="optimizer steps per variant")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--variants", default="shipped-chunked,recipe")
    parser.add_argument("--full", action="store_true", help="shipped (22 GB peak) vs recipe")
    parser.add_argument("--exactness", action="store_true")
    parser.add_argument("--generation", action="store_true", help="the sampling alone")
    parser.add_argument("--repeats", type=int, default=1, help="--generation: rounds")
    parser.add_argument("--rows", type=int, default=8, help="--exactness, --generation: rollouts")
    parser.add_argument("--tokens", type=int, default=200, help="--exactness: their length cap")
    parser.add_argument("--timeout", type=float, help="seconds per variant (then: partial)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", str(opts.threads))
    if opts.child:
        return child(opts.child, opts)
    print(f"machine: {machine()}; torch threads {opts.threads}")
    print(f"other processes:\n{others()}")
    print("command: python " + " ".join(["benchmarks/real_step.py", *sys.argv[1:]]))
    if opts.exactness:
        return exactness(opts)
    if opts.generation:
        return generation(opts)
    variants = ["shipped", "recipe"] if opts.full else opts.variants.split(",")
    results = []
    for variant in variants:
        if variant not in VARIANTS:
            sys.exit(f"--variants: {variant} is not one of {', '.join(VARIANTS)}")
        argv = [sys.executable, __file__, "--child", variant, "--model", opts.model,
                "--steps", str(opts.steps), "--threads", str(opts.threads),
                "--dataset", opts.dataset]  # fmt: skip
        begin = time.perf_counter()
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=opts.timeout)
            stdout, code, err = done.stdout, done.returncode, done.stderr
        except subprocess.TimeoutExpired as cut:
            stdout, code, err = (cut.stdout or b"").decode(), "timeout", ""
        lines = [x for x in stdout.splitlines() if x.startswith(RESULT)]
        if lines:
            results.append(json.loads(lines[-1][len(RESULT) :]))
        else:
            print(f"{variant}: exit {code}, partial phases below\n{err[-1500:]}")
            results.append(partial(variant, stdout))
        print(f"{variant}: {time.perf_counter() - begin:.0f} s in all; load "
              "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg()), flush=True)  # fmt: skip
    if results:
        report(results)


if __name__ == "__main__":
    main()
