"""Where the testbed's time goes: the TRAAC GRPO step of `recipes/testbed.yaml` and the testbed's
SFT step, by phase, each variant in a child process; `--against SRC` runs another checkout's
`src` (e.g. the previous commit's worktree) beside this one, alternating, in the same run.

GRPO (`--grpo`, the default): `--steps` optimizer steps of the recipe (4 prompts x 8 rollouts,
160 new tokens, the attention probe), the first `--warmup` of them untimed. Phases, per step:

  generation     the step's 32 rollouts (and any resampled ones)
  verification   parsing and verifying the rollouts (and the compressed copies)
  probe          the attention probe's forwards over the compression candidates
  re-answers     the answers after compressed think blocks
  ref log-probs  the reference model's log-probs (TRL)
  TRL scoring    the rest of TRL's `_prepare_inputs`: tokenizing, rewards, advantages,
                 TRAAC's telemetry and the step's records
  loss forward   the policy's log-probs with gradients and the GRPO loss
  backward       the rest of the micro-step
  optimizer+TRL  the rest of the optimizer step: clipping, AdamW, scheduler, TRL's logging
                 and callbacks

`--whole` (with `--against`) times each checkout's whole `traac train` command instead, as a
user runs it: 1 step and 1 + `--steps` steps of its own recipe, a fresh process each, and the
difference per step. It needs no instrumentation, so it runs checkouts whose package layout the
phases above do not know (a79f189, the step of the Zen 3's 2.2 s).

`--baseline` runs the recipe beside its original configuration in the same checkout, alternating:
`rollout_batching: padded` and no `logprob_rows` (TRL's padded generate and log-prob chunks of
all 32 rows, the step before the speed settings), and prints old / new per phase.

`--long` runs the long-interleaved testbed's step (`recipes/testbed-long-interleaved.yaml`: the
same 32 rollouts, a 512-token cap, on `testbed-long-interleaved`, built first if need be) beside
today's short one in the same checkout, alternating, and prints long / short per phase: what a
study of the long regime costs a step.

SFT (`--sft`): `--sft-steps` steps of the testbed's SFTTrainer, as `traac testbed build` runs
it (batch 32 of the teacher's traces, sorted by length), split into the forward (with the
loss), the backward, the optimizer and the rest (data loading, Trainer's bookkeeping).
`--sft-base smollm2` and `--sft-long POS` time the build `traac testbed build --base smollm2
--long POS` (either alone: that build's) instead, and print the tokens its timed steps read, the
whole build's (unpadded), the peak RSS and the build's SFT time extrapolated by tokens (the
longest batch comes first, so the first step is the dearest and sets the peak).

    python benchmarks/testbed_step.py                          # GRPO and SFT, this checkout
    python benchmarks/testbed_step.py --against /tmp/old/src   # old against new, alternating
    python benchmarks/testbed_step.py --against /tmp/old/src --whole --steps 20 --rounds 3
    python benchmarks/testbed_step.py --grpo --baseline        # padded against the recipe
    python benchmarks/testbed_step.py --long --steps 4         # the long step against the short
    python benchmarks/testbed_step.py --grpo --profile 15      # + cProfile's top 15 functions
    python benchmarks/testbed_step.py --sft --sft-base smollm2 --sft-long interleaved \
        --sft-steps 4 --warmup 1                               # SmolLM2 on the long traces
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import io
import json
import os
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from _common import cpu_name

ROOT = Path(__file__).resolve().parents[1]
RECIPE = Path("recipes") / "testbed.yaml"  # each checkout's own, beside its src
LONG_RECIPE = Path("recipes") / "testbed-long-interleaved.yaml"  # `--long`
RESULT = "RESULT "
# The recipe's speed settings, and what `--baseline` sets them to (TRL's own paths)
SPEED_SETTINGS = {"rollout_batching": "padded", "logprob_rows": None}
# (row of the table, phases of `real_step.Recorder` it sums); None: computed below
GRPO_ROWS = {
    "generation": ("generate", "resample"),
    "verification": ("verify",),
    "probe": ("score",),
    "re-answers": ("regenerate",),
    "ref log-probs": ("ref logps",),
    "TRL scoring": None,
    "loss forward": ("loss fwd",),
    "backward": None,
    "optimizer+TRL": None,
}
SFT_ROWS = ("forward+loss", "backward", "optimizer", "rest")


def grpo_rows(seconds: dict[str, float]) -> dict[str, float]:
    """A step's recorded phases as the table's rows (they sum to the step)."""
    rows = {n: sum(seconds.get(p, 0.0) for p in parts or ()) for n, parts in GRPO_ROWS.items()}
    inside = ("generation", "verification", "probe", "re-answers", "ref log-probs")
    rows["TRL scoring"] = seconds.get("prepare", 0.0) - sum(rows[n] for n in inside)
    rows["backward"] = (
        seconds.get("micro-step", 0.0) - seconds.get("prepare", 0.0) - rows["loss forward"]
    )
    rows["optimizer+TRL"] = seconds["step"] - seconds.get("micro-step", 0.0)
    return rows


def child_grpo(opts: argparse.Namespace) -> dict[str, Any]:
    """The recipe's steps in this process, phase by phase; the trained weights' hash."""
    from real_step import Recorder, instrument
    from traac.pipelines.train import parse, train

    recorder = Recorder()
    instrument(recorder)
    with tempfile.TemporaryDirectory() as out:
        argv = ["--config", str(opts.recipe), "--output_dir", out, "--max_steps", str(opts.steps),
                "--disable_tqdm", "True", "--num_threads", str(opts.threads)]  # fmt: skip
        argv += [x for value in opts.override for x in value.split("=", 1)]
        script, config = parse(argv)
        profiler = cProfile.Profile() if opts.profile else None
        with profiler or _nothing():
            train(script, config)
        weights = hashlib.sha256(Path(out, "model.safetensors").read_bytes()).hexdigest()
    steps = {
        step: grpo_rows(dict(seconds))
        for step, seconds in sorted(recorder.seconds.items())
        if step > opts.warmup and "step" in seconds
    }
    return {"steps": steps, "weights": weights[:16], "profile": _top(profiler, opts.profile)}


def child_sft(opts: argparse.Namespace) -> dict[str, Any]:
    """`--sft-steps` steps of the testbed build's SFT, phase by phase."""
    import torch
    from transformers import TrainerCallback

    from traac.testbed import build
    from traac.testbed.config import default_config

    config = default_config(base=opts.sft_base, long=opts.sft_long)
    seconds: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    tokens: dict[int, int] = defaultdict(int)  # padded tokens each step reads
    state = {"step": 0}

    class Clock(TrainerCallback):
        def on_step_begin(self, args: Any, st: Any, control: Any, **kw: Any) -> None:
            state["step"] = st.global_step + 1
            seconds[state["step"]]["step"] -= time.perf_counter()

        def on_pre_optimizer_step(self, args: Any, st: Any, control: Any, **kw: Any) -> None:
            seconds[state["step"]]["optimizer"] -= time.perf_counter()

        def on_optimizer_step(self, args: Any, st: Any, control: Any, **kw: Any) -> None:
            seconds[state["step"]]["optimizer"] += time.perf_counter()

        def on_step_end(self, args: Any, st: Any, control: Any, **kw: Any) -> None:
            seconds[state["step"]]["step"] += time.perf_counter()

    from trl import SFTTrainer

    def timed(name: str, original: Any) -> Any:
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            begin = time.perf_counter()
            try:
                return original(self, *args, **kwargs)
            finally:
                seconds[state["step"]][name] += time.perf_counter() - begin

        return call

    SFTTrainer.compute_loss = timed("forward+loss", SFTTrainer.compute_loss)
    original_loss = SFTTrainer.compute_loss

    def counted(self: Any, model: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        tokens[state["step"]] += inputs["input_ids"].numel()
        return original_loss(self, model, inputs, *args, **kwargs)

    SFTTrainer.compute_loss = counted
    SFTTrainer.training_step = timed("micro-step", SFTTrainer.training_step)
    original_train = SFTTrainer.train

    def train(self: Any, *args: Any, **kwargs: Any) -> Any:
        self.add_callback(Clock())
        self.args.max_steps = opts.sft_steps
        return original_train(self, *args, **kwargs)

    SFTTrainer.train = train
    torch.manual_seed(config.seed)
    entries, traces = build.teacher_traces(config)
    if config.base is None:
        tokenizer = build.build_tokenizer(build._corpus(entries, traces), config.model.vocab_size)
        model = build._init_model(config, tokenizer)
    else:
        model, tokenizer = build._load_base(config.base, build.NullProgress())
    records = build.sft_records(entries, traces, tokenizer)
    data = build.tokenize_records(records, tokenizer)
    with tempfile.TemporaryDirectory() as out:
        build._train(model, tokenizer, records, config, Path(out), build.NullProgress())
    steps = {}
    for step, row in sorted(seconds.items()):
        if step <= opts.warmup or "step" not in row:
            continue
        micro = row["micro-step"]
        steps[step] = {
            "forward+loss": row["forward+loss"],
            "backward": micro - row["forward+loss"],
            "optimizer": row["optimizer"],
            "rest": row["step"] - micro - row["optimizer"],
        }
    timed_tokens = sum(tokens[step] for step in steps)
    build_tokens = sum(len(ids) for ids in data["input_ids"])  # unpadded: a lower bound
    per_token = sum(sum(row.values()) for row in steps.values()) / max(timed_tokens, 1)
    size = {
        "config": f"{config.name}-{config.hash()}",
        "build steps": -(-config.train.n_traces // config.train.batch_size),
        "timed steps' tokens": timed_tokens,
        "build's tokens": build_tokens,
        "peak RSS GiB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
        "build's SFT, extrapolated min": round(per_token * build_tokens / 60, 1),
    }
    return {"steps": steps, "weights": "", "profile": "", "size": size}


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def _top(profiler: cProfile.Profile | None, n: int) -> str:
    if profiler is None:
        return ""
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(n)
    return text.getvalue()


def baseline_recipe(recipe: Path, folder: Path) -> Path:
    """A copy of `recipe` with its speed settings at TRL's defaults (`--baseline`)."""
    import yaml

    fields = yaml.safe_load(recipe.read_text())
    for name, value in SPEED_SETTINGS.items():
        fields.pop(name, None)
        if value is not None:
            fields[name] = value
    path = folder / "padded.yaml"
    path.write_text(yaml.safe_dump(fields, sort_keys=False))
    return path


def run_child(
    kind: str, src: Path, opts: argparse.Namespace, recipe: Path | None = None
) -> dict[str, Any]:
    recipe = recipe or src.parent / RECIPE
    argv = [sys.executable, __file__, "--child", kind, "--recipe", str(recipe),
            "--steps", str(opts.steps),
            "--warmup", str(opts.warmup), "--sft-steps", str(opts.sft_steps),
            *(["--sft-base", opts.sft_base] if opts.sft_base else []),
            *(["--sft-long", opts.sft_long] if opts.sft_long else []),
            "--threads", str(opts.threads), "--profile", str(opts.profile)]  # fmt: skip
    for value in opts.override:
        argv.append(f"--override={value}")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), str(Path(__file__).parent)]),
           "OMP_NUM_THREADS": str(opts.threads)}  # fmt: skip
    begin = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    lines = [x for x in done.stdout.splitlines() if x.startswith(RESULT)]
    if not lines:
        sys.exit(f"{kind} child on {src} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    result = json.loads(lines[-1][len(RESULT) :])
    result["wall"] = time.perf_counter() - begin
    result["load"] = os.getloadavg()[0]
    return result


def table(kind: str, results: dict[str, list[dict[str, Any]]]) -> None:
    """Per phase: each variant's mean seconds per step and share of the step."""
    names = list(GRPO_ROWS) if kind == "grpo" else list(SFT_ROWS)
    means: dict[str, dict[str, float]] = {}
    for variant, runs in results.items():
        steps = [s for r in runs for s in r["steps"].values()]
        means[variant] = {n: statistics.mean(s[n] for s in steps) for n in names}
        totals = [sum(s.values()) for s in steps]
        means[variant]["step"] = statistics.mean(totals)
        spread = f"median {statistics.median(totals):.3f}, min {min(totals):.3f}"
        hashes = sorted({r["weights"] for r in runs if r["weights"]})
        loads = ", ".join(f"{r['load']:.2f}" for r in runs)
        print(f"{kind} {variant}: {len(steps)} timed steps over {len(runs)} run(s), step "
              f"{spread} s; load at the end of each run {loads}"
              + (f"; weights sha256 {', '.join(hashes)}" if hashes else ""))  # fmt: skip
        for r in runs:
            if r.get("size"):
                print(f"{kind} {variant}: " + ", ".join(f"{k} {v}" for k, v in r["size"].items()))
    header = " | ".join(f"{v} s | {v} share" for v in results)
    pair = " / ".join(results)
    print(f"\n| {kind} phase | {header} |" + (f" {pair} |" if len(results) == 2 else ""))
    print("|---|" + "---:|---:|" * len(results) + ("---:|" if len(results) == 2 else ""))
    for name in [*names, "step"]:
        cells = []
        for variant in results:
            value = means[variant][name]
            cells.append(f"{value:.3f} | {100 * value / means[variant]['step']:.1f}%")
        ratio = ""
        if len(results) == 2:
            old, new = (means[v][name] for v in results)
            ratio = f" {old / new:.2f}x |" if new > 0.0005 else " – |"
        print(f"| {name} | {' | '.join(cells)} |{ratio}")
    if len(results) == 2:
        old, new = (means[v]["step"] for v in results)
        print(f"\n{kind} step: {pair} {old:.3f} s / {new:.3f} s = {old / new:.2f}x (means)")
    print()


def train_seconds(src: Path, steps: int, out: Path) -> float:
    """Wall seconds of `traac train --max-steps STEPS` of `src`'s checkout, from its root with
    its own recipe, in a fresh process (its start and model loading included)."""
    code = "import sys; from traac.cli import main; sys.exit(main())"
    argv = [sys.executable, "-c", code, "train", "--config", str(RECIPE),
            "--max-steps", str(steps), "--output-dir", str(out)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
    begin = time.perf_counter()
    done = subprocess.run(argv, cwd=src.parent, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        sys.exit(f"traac train in {src.parent} failed (exit {done.returncode}):\n"
                 f"{done.stderr[-3000:]}")  # fmt: skip
    return time.perf_counter() - begin


def whole(variants: dict[str, Path], opts: argparse.Namespace, folder: Path) -> None:
    """Per variant and round: (seconds of 1 + `steps` steps - seconds of 1 step) / `steps`."""
    per_step: dict[str, list[float]] = {v: [] for v in variants}
    weights: dict[str, set[str]] = {v: set() for v in variants}
    for r in range(opts.rounds):
        for name, src in variants.items():
            out = folder / f"{name}-{r}"
            one = train_seconds(src, 1, out / "one")
            many = train_seconds(src, 1 + opts.steps, out / "many")
            per_step[name].append((many - one) / opts.steps)
            model = out / "many" / "model.safetensors"
            weights[name].add(hashlib.sha256(model.read_bytes()).hexdigest()[:16])
            print(
                f"  {name}: 1 step {one:.1f} s, {1 + opts.steps} steps {many:.1f} s, "
                f"{per_step[name][-1]:.3f} s a step; load {os.getloadavg()[0]:.2f}",
                flush=True,
            )
    print("\n| checkout | s a step, each round | mean | weights sha256 |\n|---|---|---:|---|")
    for name, values in per_step.items():
        rounds = ", ".join(f"{v:.3f}" for v in values)
        print(f"| {name} | {rounds} | {statistics.mean(values):.3f} | "
              f"{', '.join(sorted(weights[name]))} |")  # fmt: skip
    old, new = (statistics.mean(v) for v in per_step.values())
    print(f"\nwhole step: old / new {old:.3f} s / {new:.3f} s = {old / new:.2f}x (means)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grpo", action="store_true", help="the GRPO step only")
    parser.add_argument("--sft", action="store_true", help="the SFT step only")
    parser.add_argument("--against", type=Path, help="another checkout's src, run beside this")
    parser.add_argument("--baseline", action="store_true",
                        help="the recipe beside its padded original configuration")  # fmt: skip
    parser.add_argument("--steps", type=int, default=6, help="GRPO optimizer steps per run")
    parser.add_argument("--sft-steps", type=int, default=40, help="SFT steps per run")
    parser.add_argument("--sft-base", choices=("smollm2",), help="SFT of this base's build")
    parser.add_argument("--sft-long", choices=("trailing", "interleaved"),
                        help="SFT of this long build (with --sft-base: the base's)")  # fmt: skip
    parser.add_argument("--warmup", type=int, default=1, help="untimed first steps per run")
    parser.add_argument("--rounds", type=int, default=1, help="alternating runs per variant")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the recipe's)")
    parser.add_argument("--override", action="append", default=[],
                        help="a GRPO recipe override, e.g. --override=--beta=0")  # fmt: skip
    parser.add_argument("--long", action="store_true",
                        help="the long testbed's GRPO step beside the short one")  # fmt: skip
    parser.add_argument("--whole", action="store_true",
                        help="with --against: time each checkout's `traac train`")  # fmt: skip
    parser.add_argument("--profile", type=int, default=0, help="print cProfile's top N (GRPO)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--recipe", type=Path, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.child:
        import torch

        torch.set_num_threads(opts.threads)
        run = child_grpo if opts.child == "grpo" else child_sft
        print(RESULT + json.dumps(run(opts)), flush=True)
        return
    if sum(map(bool, (opts.against, opts.baseline, opts.long))) > 1:
        parser.error("one of --against, --baseline and --long")
    if opts.long and opts.sft:
        parser.error("--long times the GRPO step only")
    if (opts.sft_base or opts.sft_long) and not opts.sft:
        parser.error("--sft-base and --sft-long choose the SFT step's build: add --sft")
    if opts.whole and not opts.against:
        parser.error("--whole times two checkouts: give --against OLD/src")
    if opts.whole and (opts.sft or opts.profile):
        parser.error("--whole times the GRPO training command only, without a profile")
    if opts.baseline and opts.sft:
        parser.error("--baseline times the GRPO step only (the SFT step has no speed settings)")
    with tempfile.TemporaryDirectory(prefix="testbed_step-") as folder:
        variants: dict[str, tuple[Path, Path | None]] = {"new": (ROOT / "src", None)}
        if opts.against:
            variants = {"old": (opts.against.resolve(), None), "new": (ROOT / "src", None)}
        if opts.baseline:
            padded = baseline_recipe(ROOT / RECIPE, Path(folder))
            variants = {"padded": (ROOT / "src", padded), "recipe": (ROOT / "src", None)}
            opts.grpo = True
        if opts.long:
            variants = {"long": (ROOT / "src", ROOT / LONG_RECIPE), "short": (ROOT / "src", None)}
            opts.grpo = True
        header(variants, opts)
        if opts.whole:
            whole({name: src for name, (src, _) in variants.items()}, opts, Path(folder))
            return
        compare(variants, opts)


def header(variants: dict[str, tuple[Path, Path | None]], opts: argparse.Namespace) -> None:
    """The machine, the command and each variant's checkout, before any figure."""
    load = "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    print(f"machine: {cpu_name()}, {os.cpu_count()} cores, {opts.threads} torch thread(s), "
          f"load average {load} at the start")  # fmt: skip
    print("command: python " + " ".join(["benchmarks/testbed_step.py", *sys.argv[1:]]))
    for name, (src, recipe) in variants.items():
        commit = subprocess.run(["git", "-C", str(src), "log", "-1", "--format=%h %s"],
                                capture_output=True, text=True).stdout.strip()  # fmt: skip
        other = (
            f", {recipe.relative_to(ROOT)}"
            if opts.long and recipe
            else (f", the recipe with {SPEED_SETTINGS}" if recipe else "")
        )
        print(f"{name}: {src} ({commit[:70] or 'not a git checkout'}){other}")  # fmt: skip


def compare(variants: dict[str, tuple[Path, Path | None]], opts: argparse.Namespace) -> None:
    """Each variant's (src, recipe or None: its checkout's) children, alternating, and tables."""
    kinds = ["grpo"] * (not opts.sft) + ["sft"] * (not opts.grpo)
    for kind in kinds:
        results: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
        for _ in range(opts.rounds):
            for name, (src, recipe) in variants.items():
                results[name].append(run_child(kind, src, opts, recipe))
                print(f"  {kind} {name}: {results[name][-1]['wall']:.0f} s in all", flush=True)
        table(kind, results)
        for name, runs in results.items():
            for r in runs:
                if r["profile"]:
                    print(f"cProfile, {kind} {name}:\n{r['profile']}")


if __name__ == "__main__":
    main()
