"""The `traac experiment compare` variants that change one thing of TRAAC at a time, to find
why it falls behind the length reward on a real model (docs/results.md#smollm2-think-full-length),
and the contrasts the report pairs them by: each against TRAAC as the recipe has it.

Each name is short enough to type: `--variants "TRAAC, answer-only copies"`. A recipe's pinned
fields stay (a preset fills only unset ones), so the authors' preset names its first-half probe
and its copies trained on in full explicitly: `recipes/smollm2-think.yaml` pins every layer, and
a recipe may mask the copies' think blocks (`copy_loss: answer_only`).
"""

from __future__ import annotations

from typing import Any


def traac(**settings: Any) -> dict[str, Any]:
    """The paper's TRAAC, whatever the recipe's preset: its copies trained on in full (traac's
    own default masks their think blocks, `preset: traac`), with its compression `settings`
    changed (its block, `traac`). Every TRAAC variant changes one thing of it."""
    return {"mode": "traac", "traac": {"copy_loss": "full", **settings}}


TRAAC = traac()

ISOLATING: dict[str, dict[str, Any]] = {
    # The copies' re-answers trained on, their think blocks masked (beyond the paper).
    "TRAAC, answer-only copies": traac(copy_loss="answer_only"),
    # The authors' code (docs/method.md#presets), with the first half of the layers probed.
    "TRAAC, authors preset": {**traac(probe_layers="first_half"), "preset": "authors"},
    "TRAAC, first-half probe": traac(probe_layers="first_half"),
    "TRAAC, all-correct pool": traac(copy_pool="all_correct"),
    "TRAAC, double tags": traac(copy_tags="double"),
    # DLER's optimiser one change at a time ("TRAAC, dynamic sampling" resamples).
    "TRAAC, batch-scaled rewards": {**TRAAC, "scale_rewards": "batch"},
    "TRAAC, token-mean loss": {**TRAAC, "loss_type": "dapo"},
    # The authors' oracle (as in the ablations: the same run, shared in the store).
    "TRAAC, early exit (oracle)": traac(compression="early_exit"),
}
ISOLATING_CONTRASTS: tuple[tuple[str, str, str], ...] = (
    ("copies' think blocks masked from the loss", "TRAAC", "TRAAC, answer-only copies"),
    ("the authors' code, first-half probe", "TRAAC", "TRAAC, authors preset"),
    ("first half of the layers probed", "TRAAC", "TRAAC, first-half probe"),
    ("every right rollout re-answered", "TRAAC", "TRAAC, all-correct pool"),
    ("the authors' double tags", "TRAAC", "TRAAC, double tags"),
    ("rewards scaled over the batch", "TRAAC", "TRAAC, batch-scaled rewards"),
    ("token-mean loss", "TRAAC", "TRAAC, token-mean loss"),
    ("the oracle early exit, not attention", "TRAAC", "TRAAC, early exit (oracle)"),
)
