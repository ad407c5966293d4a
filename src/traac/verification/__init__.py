"""Is a response right? Answer extraction and the four verifiers, time-bounded and never executing
model output.

One job per module, bottom to top:

- `answers`: the final answer (text after the last think closer), its boxes, last line, option
  letter or free text;
- `screening`: what may reach a scorer that evaluates (allow-lists read on the syntax tree);
- `task_answers`: each reasoning-gym task's answer brought into the shape its scorer reads;
- `sandbox`: the audit hook and resource limits a worker runs under;
- `zygote` and `pool`: the warmed-up zygote, the workers forked from it, and the caller's pool
  with its hard deadline per check;
- `verifiers`: `verify_math`, `verify_choice`, `verify_text`, `verify_task`, the `VERIFIERS`
  registry that picks one by `Item.verifier`, and `verify_many`, the batch form for evaluation
  and training;
- `votes`: which samples of one problem the verifier calls one answer (maj@k's vote groups).

Model output is never executed: screening first, then workers under the sandbox.
"""

from traac.verification.answers import (
    MAX_ANSWER_CHARS,
    answer_text,
    boxed_answers,
    extract_answer,
    extract_choice,
    extract_text,
    last_boxed,
)
from traac.verification.verifiers import (
    DEFAULT_TIMEOUT,
    VERIFIERS,
    task_score,
    verify_answers,
    verify_choice,
    verify_item,
    verify_many,
    verify_math,
    verify_task,
    verify_text,
)
from traac.verification.workers import (
    VerifierPool,
    configure_pool,
    default_workers,
    get_pool,
    shutdown_pool,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "MAX_ANSWER_CHARS",
    "VERIFIERS",
    "VerifierPool",
    "answer_text",
    "boxed_answers",
    "configure_pool",
    "default_workers",
    "extract_answer",
    "extract_choice",
    "extract_text",
    "get_pool",
    "last_boxed",
    "shutdown_pool",
    "task_score",
    "verify_answers",
    "verify_choice",
    "verify_item",
    "verify_many",
    "verify_math",
    "verify_task",
    "verify_text",
]
