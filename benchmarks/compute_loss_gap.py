"""Why training's compute loss differs from the probe report's: both statistics on the same
candidates, with tau by tier (the probe report) and by pass-rate bin (training).

The candidates are sampled as the first TRAAC step samples them (where the policy is still the
reference that scores them): `--prompts` problems a tier of the RL pool, `--rollouts` samples
each at temperature 1 with up to `--max-new-tokens` tokens; each group's pass rate picks its bin
(`DifficultySettings`), and its right, well-formed rollouts are the candidates. The paper's probe
(attention, all layers and heads, gate 0.8, cap 0.8, no calibration) scores each once; the
eviction rule then runs at each tau. Printed per tier x bin: candidates, their computation
steps and the share evicted (the compute loss) at the tier's tau and at the bin's tau, with
the steps labelled both ways (the compressor's steps, as telemetry labels them; the split
steps matched by offset, as the probe report does) and the count of steps whose labels differ.

    python benchmarks/compute_loss_gap.py                       # RL pool, 256 tokens (training)
    python benchmarks/compute_loss_gap.py --split eval --max-new-tokens 200   # the probe's set
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np
import torch

from _common import add_model_options, command, load, machine
from traac.compression.compression import CompressionResult
from traac.compression.difficulty import DifficultySettings
from traac.compression.factory import build_compressor
from traac.compression.formats import ChatFormat
from traac.compression.segmentation import split_steps
from traac.compression.settings import CompressionSettings
from traac.data.testbed_problems import EVAL_SEED, RL_SEED, make_items
from traac.data.testbed_problems import step_kinds as label_steps
from traac.testbed.measure import generate
from traac.testbed.traces import step_kinds
from traac.verification import verify_many

TIER_TAUS = DifficultySettings().tau  # the probe report's taus by tier are the bins' (0.6/0.4/0.2)


def losses(result: CompressionResult) -> tuple[int, int, int, int]:
    """Compute steps and those evicted, by the compressor's steps' labels (telemetry's); those
    evicted by `step_kinds` matched on offsets (the probe report's); steps whose labels differ."""
    by_offset = dict(zip((s.start for s in split_steps(result.reasoning)),
                         step_kinds(result.reasoning), strict=True))  # fmt: skip
    computes = lost = lost_by_offset = differ = 0
    kinds = label_steps([step.text for step in result.steps])
    for step, keep, kind in zip(result.steps, result.kept, kinds, strict=True):
        if not step.text:
            continue
        other = by_offset.get(step.start, "unknown")
        computes += kind == "compute"
        lost += kind == "compute" and not keep
        lost_by_offset += other == "compute" and not keep
        differ += kind != other
    return computes, lost, lost_by_offset, differ


def simulated_steps(groups: list[list[int]], problems: int, k: int, seed: int) -> str:
    """The spread of the compute loss over steps of `k` problems drawn from these (as a
    training step draws its prompts; a problem with no candidate adds nothing): 10th, 50th and
    90th percentiles of 2,000 draws, at the tier's and at the bin's tau."""
    rng = np.random.default_rng(seed)
    padded = np.array(groups + [[0, 0, 0]] * (problems - len(groups)), dtype=float)
    sums = np.stack([padded[rng.choice(problems, k, replace=False)].sum(0) for _ in range(2000)])
    sums = sums[sums[:, 0] > 0]
    out = []
    for name, col in (("tier", 1), ("bin", 2)):
        q = np.percentile(100 * sums[:, col] / sums[:, 0], [10, 50, 90])
        out.append(f"at the {name}'s tau {q[0]:.1f}% / {q[1]:.1f}% / {q[2]:.1f}%")
    return f"steps of {k} problems (10th / 50th / 90th percentile): " + ", ".join(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_model_options(p, "smollm2-think")
    p.add_argument("--split", choices=("rl", "eval"), default="rl")
    p.add_argument("--prompts", type=int, default=8, help="problems a tier (8)")
    p.add_argument("--rollouts", type=int, default=8, help="samples a problem (8, the recipe's)")
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--step-prompts", type=int, default=4, help="problems a step (4, the recipe's)")
    args = p.parse_args()
    _, model, tokenizer = load(args)
    seed = RL_SEED if args.split == "rl" else EVAL_SEED
    items = make_items("all", args.prompts, seed, args.split)
    torch.manual_seed(args.seed)
    drawn = generate(model, tokenizer, items, args.rollouts, 1.0, args.max_new_tokens, 64)
    verdicts = verify_many([s.item for s in drawn], [s.text for s in drawn])
    difficulty, chat_format = DifficultySettings(), ChatFormat()
    n = args.rollouts
    candidates = []  # (group, tier, bin, reasoning)
    for g in range(len(items)):
        rate = sum(verdicts[g * n : (g + 1) * n]) / n
        bin_ = difficulty.bin_of(rate)
        group = zip(drawn[g * n : (g + 1) * n], verdicts[g * n : (g + 1) * n], strict=True)
        for sample, ok in group:
            parsed = chat_format.parse(sample.text)
            if ok and parsed.well_formed and parsed.reasoning.strip():
                candidates.append((g, items[g].tier, bin_, parsed.reasoning))
    compressor = build_compressor(CompressionSettings(), model, tokenizer, chat_format)
    traces = compressor.score([r for *_, r in candidates])
    rows: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0] * 7)
    groups: dict[int, list[int]] = defaultdict(lambda: [0] * 3)  # compute, lost by tier, by bin
    for (g, tier, bin_, _), trace in zip(candidates, traces, strict=True):
        by_tier = losses(compressor.compress(trace, TIER_TAUS[tier]))
        by_bin = losses(compressor.compress(trace, difficulty.tau_of(bin_)))
        for key in ((tier, bin_), (tier, "any"), ("any", bin_), ("any", "any")):
            row = rows[key]
            row[0] += 1
            row[1] += by_tier[0]  # compute steps (telemetry's labels)
            row[2] += by_tier[1]  # evicted at the tier's tau (telemetry's labels)
            row[3] += by_tier[2]  # evicted at the tier's tau (step_kinds by offset)
            row[4] += by_bin[1]  # evicted at the bin's tau (telemetry's labels)
            row[5] += by_tier[3]  # steps whose two labels differ
            row[6] += trace.uniformity <= compressor.settings.uniformity_gate
        for k, x in enumerate((by_tier[0], by_tier[1], by_bin[1])):
            groups[g][k] += x
    print(machine())
    print(command())
    print(f"{len(drawn)} rollouts, {len(candidates)} candidates")
    print("tier    bin     cand  u<=gate  compute  loss@tier-tau  (by offset)  loss@bin-tau  diff")
    order = ("easy", "medium", "hard", "any")
    for key in sorted(rows, key=lambda k: (order.index(k[0]), order.index(k[1]))):
        c, comp, lt, lo, lb, diff, gated = rows[key]

        def pct(x: int, comp: int = comp) -> str:
            return f"{100 * x / comp:5.1f}%" if comp else "    -"

        print(
            f"{key[0]:7} {key[1]:7} {c:4} {gated:8} {comp:8}  {pct(lt):>13}  {pct(lo):>11}"
            f"  {pct(lb):>12}  {diff:4}"
        )
    print(simulated_steps(list(groups.values()), len(items), args.step_prompts, args.seed))


if __name__ == "__main__":
    main()
