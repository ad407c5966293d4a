"""Model names traac makes itself (`testbed`, `smollm2`, a `.gguf` file, ...) for the layers below
the one that makes them.

`TRAACTrainer(model="testbed-quick")` should mean what `--model testbed-quick` means, but the
trainer sits below the testbed and `traac.pipelines.model_registry`, which build and convert those
models. The package root (`traac/__init__.py`) installs that resolver here when `traac` is
imported, so the trainer resolves a name the one way the commands do without importing upward.
"""

from __future__ import annotations

from collections.abc import Callable

_resolver: Callable[[str], str] | None = None


def install(resolver: Callable[[str], str]) -> None:
    """Set the function that turns a model name into a loadable directory or hub id."""
    global _resolver
    _resolver = resolver


def resolve_name(model: str) -> str:
    """`model` resolved by the installed resolver (unchanged when none is installed)."""
    return model if _resolver is None else _resolver(model)
