"""`traac eval --otb-scoring official`, sample by sample, against the official OptimalThinkingBench
code itself (facebookresearch/RAM `projects/otb`, read at f0be196), imported from a checkout:

- underthinking: the official `evals/underthink_eval.eval_underthink` on each (item, response)
  against traac's `task_credit` (the first box, the touch-ups, reasoning-gym's `score_answer`
  and its floor for what traac keeps from an evaluating scorer);
- overthinking: the official judge's input (`evals/overthink_eval._postprocess_response`)
  against traac's `judge_input` on hand-made responses (the LLM judge itself is not run: traac
  checks that input with its own verifier, docs/evaluation.md).

The responses are 14 forms per item (right, bare, escaped once and twice, doubled, unboxed,
wrong, an empty box, a box in the think block, an equation, ...). Writes one line per sample
(task, item, response, official score, traac's score) to --output and prints the counts and the
largest difference. The official module is imported, never copied; overthink_eval imports an
LLM client at its top, so its two pure functions are read from its syntax tree.

    git clone https://github.com/facebookresearch/RAM /tmp/RAM  # then: git checkout f0be196
    PYTHONPATH=src python benchmarks/otb_official_agreement.py --otb /tmp/RAM/projects/otb
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import sys
from pathlib import Path
from typing import Any

from _common import machine
from traac.data.datasets import load_items
from traac.evaluation.harness.otb_official import judge_input, task_credit

JUDGE_PROBES = [
    "<think>x</think> \\boxed{B}, or maybe \\boxed{C}",
    "<think>x</think> \\boxed{B} " + "y" * 2000 + " \\boxed{C}",
    "<think>x</think> \\boxed{C}</think> \\boxed{B}",
    "<think> " + "z" * 3000 + " \\boxed{B}",
    "<think>x</think> The answer is B.",
    "no think at all \\boxed{\\frac{1}{2}}",
    "<think>a</think>" + "w" * 2500,
    "<think>a</think>\\boxed{}",
]


def forms(gold: str, other: str) -> list[str]:
    """The responses each item is scored on."""
    return [
        f"<think>x</think> \\boxed{{{gold}}}", gold, f"\\boxed{{{gold}\\\\ }}",
        f"\\boxed{{{gold}\\ }}", f"\\boxed{{{gold} {gold}}}", f"no box here {gold}",
        f"\\boxed{{{other}}}", "\\boxed{}", f"<think>\\boxed{{{other}}}</think> \\boxed{{{gold}}}",
        "(10-8)*8+8=24", f"\\boxed{{{gold.lower()}}}", f"\\boxed{{ {gold} }}",
        f"\\boxed{{{gold}}}}}", "I cannot solve it.",
    ]  # fmt: skip


def official_judge_input(otb: Path) -> Any:
    """The official `_postprocess_response`, with the `_extract_boxed` it calls."""
    tree = ast.parse((otb / "evals" / "overthink_eval.py").read_text())
    wanted = {"_extract_boxed", "_postprocess_response"}
    body = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in wanted]
    namespace: dict[str, Any] = {}
    exec(compile(ast.Module(body, []), "overthink_eval", "exec"), namespace)
    return namespace["_postprocess_response"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--otb", type=Path, required=True, help="RAM's projects/otb directory")
    parser.add_argument("--dataset", default="otb-underthink?n=6", help="underthinking items")
    parser.add_argument("--per-task", type=int, default=6, help="items of each task scored")
    parser.add_argument("--output", type=Path, default=Path("otb_official_probe.jsonl"))
    args = parser.parse_args()
    import pandas as pd

    sys.path.insert(0, str(args.otb / "evals"))
    from underthink_eval import eval_underthink

    by_task: dict[str, list] = {}
    for item in load_items(args.dataset):
        by_task.setdefault(item.entry["metadata"]["source_dataset"], []).append(item)
    rng, rows, worst = random.Random(0), [], 0.0
    for task, items in by_task.items():
        for item in items[: args.per_task]:
            other = rng.choice(items).answer
            meta = json.dumps(item.entry["metadata"], default=str)
            for response in forms(item.answer, other):
                row = pd.Series(
                    {"metadata": meta, "answer": item.entry["answer"], "response": response}
                )
                official, ours = float(eval_underthink(row)), task_credit(response, item)
                worst = max(worst, abs(official - ours))
                rows.append({"task": task, "id": item.id, "response": response,
                             "official": official, "traac": ours})  # fmt: skip
    args.output.write_text("".join(json.dumps(r) + "\n" for r in rows))
    postprocess = official_judge_input(args.otb)
    differ = sum(postprocess(r) != judge_input(r, "</think>")[0] for r in JUDGE_PROBES)
    print(machine())
    print(f"underthinking: {len(rows)} samples, {len(by_task)} tasks, {args.dataset}; "
          f"largest |official - traac| {worst:.2e}; "
          f"{sum(abs(r['official'] - r['traac']) >= 5e-5 for r in rows)} differ at 4 decimals "
          f"(per sample: {args.output})")  # fmt: skip
    print(f"judge input: {len(JUDGE_PROBES)} responses, {differ} differ")
    print("command: PYTHONPATH=src python " + " ".join(sys.argv))


if __name__ == "__main__":
    main()
