"""Which model scores the steps, said one way for the trainer and every command.

A scoring model is `reference` (in training: the frozen initial policy, TRL's KL reference),
`policy` (the model trained, or a command's own `--model`), or any other model named as `--model`
is (a name traac knows, a `.gguf` file, a directory, a hub id): a foreign scorer, frozen, that reads
the steps through its own tokenizer (they map to it by character offsets). `check_scoring_model`
is its one check and `resolve_scoring_model` its one resolution: where a name becomes a path and
a tokenizer. Loading the weights stays with the caller (sharded as TRL's reference model in
training, placed on the command's devices at test time).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from traac.common.model_names import resolve_name
from traac.errors import TraacError

REFERENCE = "reference"
POLICY = "policy"
SCORING_MODELS = (REFERENCE, POLICY)  # or any other model name or path: a foreign scorer


def is_foreign(name: str | None) -> bool:
    """Whether `name` is a model of its own (neither unset, the reference nor the policy)."""
    return name is not None and name not in SCORING_MODELS


def names_policy(name: str | None) -> bool:
    """Whether `name` is `policy`: the model trained scores itself, no frozen model loads."""
    return name == POLICY


def names_reference(name: str | None) -> bool:
    """Whether `name` is `reference`: in training, the frozen initial policy scores."""
    return name == REFERENCE


def check_scoring_model(
    name: str | None, scorer: str, field: str = "scoring_model", reads_policy: bool = False
) -> None:
    """A scoring model is named, and a foreign one goes with a scorer that reads it: a scorer
    that `reads_policy` (confidence, step entropy: `traac.compression.settings.ScorerKind.policy`)
    reads the policy's own sampling distribution."""
    if name is None:
        return
    if not isinstance(name, str) or not name.strip():
        raise TraacError(
            f"{field}: {name!r} is empty; choose reference, policy or a model name or path"
        )
    if is_foreign(name) and reads_policy:
        raise TraacError(
            f"{field}: {name!r} with scorer {scorer}; the {scorer} scorer reads the policy's "
            "own distribution, so score with the policy (reference or policy in a recipe, no "
            f"{field} on a command) or choose another scorer"
        )


@dataclass(frozen=True)
class ScoringModel:
    """A resolved scoring model: a foreign model's loadable `path` and its `tokenizer`, or
    neither (`path` None: the policy, or in training the reference, scores, with the policy's
    tokenizer)."""

    path: str | None = None
    tokenizer: Any = None

    @property
    def foreign(self) -> bool:
        return self.path is not None


def resolve_scoring_model(
    name: str | None,
    *,
    policy_path: str | None = None,
    resolve: Callable[[str], str] = resolve_name,
) -> ScoringModel:
    """The scoring model `name` stands for. A foreign name is resolved as `--model` is
    (`resolve`: the registry of model names) and its tokenizer loaded (a bad name fails here, in
    one line); unset, `reference`, `policy`, or a name that resolves to `policy_path` (a
    command's own model) leave the policy to score."""
    if name is None or not is_foreign(name):
        return ScoringModel()
    path = resolve(name)
    if path == policy_path:
        return ScoringModel()
    from traac.common.models import load_tokenizer  # torch: only where a tokenizer loads

    return ScoringModel(path, load_tokenizer(path))
