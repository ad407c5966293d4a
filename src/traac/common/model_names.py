"""Model names traac makes itself (`testbed`, `smollm2`, a `.gguf` file, ...) for the layers below
the one that makes them.

`TRAACTrainer(model="testbed-quick")` should mean what `--model testbed-quick` means, but the
trainer sits below the testbed and `traac.pipelines.model_registry`, which build and convert those
models. The package root (`traac/__init__.py`) installs that resolver here when `traac` is
imported, so the trainer resolves a name the one way the commands do without importing upward.

`BUILTIN_MODELS` lists the registry's names (`tests/pipelines/test_model_registry.py` holds them
equal) so that a misspelt one is refused with its correction before anything is imported or
looked up on the hub (`check_model_name`).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from pathlib import Path

from traac.errors import TraacError

BUILTIN_MODELS = ("testbed", "testbed-quick", "testbed-tiny", "testbed-long-trailing",
                  "testbed-long-interleaved", "smollm2-think", "smollm2-think-long-trailing",
                  "smollm2-think-long-interleaved", "smollm2")  # fmt: skip

_resolver: Callable[[str], str] | None = None


def install(resolver: Callable[[str], str]) -> None:
    """Set the function that turns a model name into a loadable directory or hub id."""
    global _resolver
    _resolver = resolver


def resolve_name(model: str) -> str:
    """`model` resolved by the installed resolver (unchanged when none is installed)."""
    return model if _resolver is None else _resolver(model)


def check_model_name(model: str, field: str = "model") -> None:
    """A name that is no built-in model, no path here and no `owner/name` hub id, but is close
    to a built-in name, is a typo: refused with the name meant (a bare hub id such as `gpt2`
    far from every built-in name passes, to be looked up when it loads)."""
    if model in BUILTIN_MODELS or "/" in model or Path(model).expanduser().exists():
        return
    if model.lower().endswith(".gguf"):
        return
    near = difflib.get_close_matches(model.lower(), BUILTIN_MODELS, n=1, cutoff=0.75)
    if near:
        raise TraacError(
            f"{field} {model!r}: no such model or directory; did you mean {near[0]}? (built-in "
            f"models: {', '.join(BUILTIN_MODELS)})"
        )
