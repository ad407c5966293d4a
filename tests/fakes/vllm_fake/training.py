"""TRAAC training on the vLLM fake: what the tests add around it, and a launcher for
`accelerate launch` (several processes, each installing the fake before traac starts).

    accelerate launch --config-file recipes/accelerate/cpu_2proc.yaml \\
        tests/fakes/vllm_fake/training.py RUNS.json

RUNS.json lists runs, each {"model": path, "out": folder, "argv": traac CLI arguments}; the runs
go one after another in the same processes, and each process writes what reached its fake to
`out/vllm-rank{R}.json` ({"rc": exit status, "events": EVENTS}).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # run as a script: import the package, not this folder's modules
    sys.path[0] = str(Path(__file__).resolve().parents[1])

import vllm_fake
from vllm_fake import client


def verdicts(items: Any, responses: list[str], **kwargs: Any) -> list[bool]:
    """Weight-independent verdicts: wrong whenever the answer is even (those groups are all
    wrong, so dynamic sampling resamples them), else right when the response has an odd
    number of characters (mixed groups, whose right rollouts are compressed)."""
    return [
        int(i.answer) % 2 == 1 and len(r) % 2 == 1 for i, r in zip(items, responses, strict=True)
    ]


def record_steps(patch: Callable[[Any, str, Any], None] = setattr) -> None:
    """Judge by `verdicts`, and append one event per TRAAC step after its generation calls:
    this process's prompts (after resampling) and the re-answer prompts it owes, each a
    prompt followed by a compression's think block, as `last_step` records them. `patch`
    makes the two changes (pytest's `monkeypatch.setattr`, to undo them after a test)."""
    import traac.training.step.driver as driver
    import traac.training.trl_adapter.trainer as trainer

    patch(driver, "verify_many", verdicts)
    real = trainer.TRAACTrainer.traac_step

    def traac_step(self: Any, rows: Any, prompt_ids: list[list[int]], *args: Any) -> Any:
        out = real(self, rows, prompt_ids, *args)
        prompt_ids = out.prompt_ids  # after resampling
        offset = self.accelerator.process_index * len(rows)
        used = [c for g in self.last_step.groups for c in g.compressions if c.used]
        vllm_fake.EVENTS.append({
            "call": "traac_step",
            "prompts": [list(p) for p in prompt_ids],
            "reanswers": [prompt_ids[c.origin - offset] + c.prefix_ids for c in used
                          if offset <= c.origin < offset + len(rows)],
            "all_reanswers": len(used),
            "resampled_rows": sum(g.resampled > 0 for g in self.last_step.groups
                                  for r in g.originals if offset <= r.origin < offset + len(rows)),
            "resample_rounds": self.last_step.resample_rounds,
            "empty_think": self.tokenizer(
                self.chat_format.answer_prefix(""), add_special_tokens=False
            )["input_ids"],
        })  # fmt: skip
        return out

    patch(trainer.TRAACTrainer, "traac_step", traac_step)


def main(runs_file: str) -> int:
    from traac.cli import main as traac

    vllm_fake.install()
    record_steps()
    worst = 0
    for run in json.loads(Path(runs_file).read_text()):
        vllm_fake.reset()
        client.SERVED["model"] = run["model"]
        rc = traac(run["argv"])
        worst = max(worst, rc)
        rank = int(os.environ.get("RANK", "0"))
        record = {"rc": rc, "events": vllm_fake.EVENTS}
        (Path(run["out"]) / f"vllm-rank{rank}.json").write_text(json.dumps(record))
    return worst


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
