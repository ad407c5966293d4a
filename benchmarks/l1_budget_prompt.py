"""What L1-Max's budget instruction does to a model that never saw one: accuracy, think-block
format and length on held-out testbed problems, with the plain prompt and with "Think for
maximum N tokens." appended (`traac.training.methods.l1_max.l1_max_prompt`, as L1-Max training
writes its prompts).

The testbed's SFT data has no budget instruction, so this measures how far out of distribution
L1-Max's training prompts are before any RL step, and, given a trained L1-Max model, whether it
learned to read them (docs/peer_methods.md, "L1-Max on the testbed").

    OMP_NUM_THREADS=1 python benchmarks/l1_budget_prompt.py [--model testbed] \
        [--budgets 16 64 160] [--per-tier 20] [--samples 4]
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import torch

from _common import add_model_options, command, generate_batches, load, machine
from traac.compression.formats import ChatFormat
from traac.data.datasets import load_items
from traac.testbed.tokenizer import render_prompts
from traac.training.methods.l1_max import l1_max_prompt
from traac.verification import verify_item

TIERS = ("easy", "medium", "hard")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_model_options(parser, "testbed", threads=1)
    parser.add_argument("--dataset", default="testbed:all?n=100&seed=2026")  # the compare's
    parser.add_argument("--budgets", type=int, nargs="*", default=[16, 64, 160])
    parser.add_argument("--per-tier", type=int, default=20)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    _, model, tokenizer = load(args)
    skipped = {tokenizer.pad_token_id, tokenizer.eos_token_id}
    by_tier = defaultdict(list)
    for item in load_items(args.dataset):
        by_tier[item.tier].append(item)
    items = [item for tier in TIERS for item in by_tier[tier][: args.per_tier]]
    fmt = ChatFormat()
    print("| prompt | tier | Acc (%) | think block well formed (%) | Len (tokens) |")
    print("|---|---|---:|---:|---:|")
    for budget in [None, *args.budgets]:
        torch.manual_seed(args.seed)
        questions = [
            i.question if budget is None else l1_max_prompt(i.question, budget) for i in items
        ]
        rows = defaultdict(list)
        outputs = generate_batches(
            model, tokenizer, render_prompts(tokenizer, questions), 20,
            do_sample=True, temperature=1.0, top_p=1.0,
            max_new_tokens=args.max_new_tokens, num_return_sequences=args.samples,
        )  # fmt: skip
        for k, ids in enumerate(outputs):
            item = items[k // args.samples]
            text = tokenizer.decode(ids, skip_special_tokens=True)
            ok = verify_item(item, text)
            n = sum(t not in skipped for t in ids)
            rows[item.tier].append((ok, fmt.parse(text).well_formed, n))
        rows["all"] = [r for tier in TIERS for r in rows[tier]]
        label = "plain" if budget is None else f"max {budget}"
        for tier in (*TIERS, "all"):
            r = rows[tier]
            acc = 100 * sum(ok for ok, _, _ in r) / len(r)
            wf = 100 * sum(w for _, w, _ in r) / len(r)
            length = sum(n for *_, n in r) / len(r)
            print(f"| {label} | {tier} | {acc:.1f} | {wf:.1f} | {length:.1f} |")
    print(f"\nmachine: {machine()}\n{command()}")


if __name__ == "__main__":
    main()
