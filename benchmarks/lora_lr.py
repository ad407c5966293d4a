"""Which learning rate moves a LoRA policy within a run's length: a few steps of a recipe at each
rate, from the same model and seed, then how far each moved.

For each `--lrs` value, `traac train` runs `--steps` steps of `--config` (a child process each,
a checkpoint saved at the last step) and the script reads back:

  kl          TRL's mean per-token KL to the reference (k3), at the last step
  clip        the share of tokens whose importance ratio GRPO clipped, over the steps
  reward      mean reward, first step and last step
  length      mean completion length, first step and last step
  |dW|/|W|    the adapters' update scaled by alpha / r, over the frozen weights they adapt
              (Frobenius norms summed over every adapted matrix)

The warm-up and the linear decay follow `--schedule-steps` (the length of the run the rate is
for), not the few steps run here, so each step sees the learning rate it would see at the start
of the real run.

    python benchmarks/lora_lr.py --lrs 1e-5,5e-5,2e-4 --steps 5
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from safetensors.torch import load_file

from _common import command, machine

ROOT = Path(__file__).resolve().parents[1]


def run(config: Path, lr: float, steps: int, schedule: int, out: Path, extra: list[str]) -> float:
    argv = [
        sys.executable, "-m", "traac.cli", "train", "--config", str(config),
        "--learning_rate", str(lr), "--max_steps", str(schedule), "--save_steps", str(steps),
        "--output_dir", str(out), "--disable_tqdm", "true", *extra,
    ]  # fmt: skip
    start = time.perf_counter()
    # The schedule is `schedule` steps long; the run stops at its first checkpoint.
    proc = subprocess.Popen(argv, cwd=ROOT)
    checkpoint = out / f"checkpoint-{steps}"
    written = [checkpoint / "trainer_state.json", checkpoint / "traac_state.json"]
    while proc.poll() is None:
        if all(f.is_file() for f in written):
            time.sleep(2)  # the last writes
            proc.kill()  # not SIGTERM: traac would finish the step and checkpoint it
            proc.wait()
            break
        time.sleep(1)
    if not (checkpoint / "trainer_state.json").is_file():
        raise SystemExit(f"lr {lr}: the run ended (code {proc.returncode}) without {checkpoint}")
    return time.perf_counter() - start


def update_ratio(checkpoint: Path, base: Path) -> float:
    """sum |scale * B A| over sum |W| for the adapted weights."""
    adapter = load_file(checkpoint / "adapter_model.safetensors")
    config = json.loads((checkpoint / "adapter_config.json").read_text())
    scale = config["lora_alpha"] / config["r"]
    weights: dict[str, torch.Tensor] = {}
    for file in base.glob("*.safetensors"):
        weights.update(load_file(file))
    delta = total = 0.0
    for key, a in adapter.items():
        if ".lora_A." not in key:
            continue
        b = adapter[key.replace(".lora_A.", ".lora_B.")]
        name = key.split("base_model.model.", 1)[-1].replace(".lora_A.weight", ".weight")
        delta += float((scale * b.float() @ a.float()).norm())
        total += float(weights[name].float().norm())
    return delta / total


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", type=Path, default=ROOT / "recipes" / "smollm2-think.yaml")
    p.add_argument("--lrs", default="1e-5,5e-5,2e-4")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--schedule-steps", type=int, default=60)
    p.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="more train flags")
    args = p.parse_args()
    from traac.pipelines.model_registry import resolve_model
    from traac.pipelines.train import parse

    script, _ = parse(["--config", str(args.config), "--output_dir", "unused"])
    base = Path(resolve_model(script.model_name_or_path))
    print(machine())
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for text in args.lrs.split(","):
            lr = float(text)
            out = Path(tmp) / f"lr-{text}"
            seconds = run(args.config, lr, args.steps, args.schedule_steps, out, args.extra)
            checkpoint = out / f"checkpoint-{args.steps}"
            logs = json.loads((checkpoint / "trainer_state.json").read_text())["log_history"]
            steps = [e for e in logs if "reward" in e]
            clip = [e.get("clip_ratio/region_mean", 0.0) for e in steps]
            rows.append(
                (text, steps[-1].get("kl"), sum(clip) / len(clip), steps[0]["reward"],
                 steps[-1]["reward"], steps[0]["completions/mean_length"],
                 steps[-1]["completions/mean_length"], update_ratio(checkpoint, base),
                 seconds / args.steps)
            )  # fmt: skip
    print(f"\n{args.steps} steps of {args.config.name} per rate, schedule of "
          f"{args.schedule_steps} steps, same seed; {command()}\n")  # fmt: skip
    print(
        "| lr | kl (last step) | clipped | reward first -> last | length first -> last "
        "| \\|dW\\|/\\|W\\| | s/step |\n|---|---:|---:|---:|---:|---:|---:|"
    )
    for lr, kl, clip, r0, r1, l0, l1, ratio, sec in rows:
        kl_text = "–" if kl is None else f"{kl:.2e}"
        print(f"| {lr} | {kl_text} | {clip:.3f} | {r0:.2f} -> {r1:.2f} | {l0:.0f} -> {l1:.0f} "
              f"| {ratio:.2e} | {sec:.0f} |")  # fmt: skip


if __name__ == "__main__":
    main()
