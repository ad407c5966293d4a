"""Labels for the reasoning steps of a data source whose format names its steps' roles, for
telemetry only (the method never reads them).

The testbed's teacher writes each step in a known shape (compute, conclude, re-check), so its
problems' steps can be labelled; most data cannot. The training step sits below the testbed,
so the testbed's data module registers its labeller here under its data source, and telemetry
asks for the labeller of each group's source: the step never imports the testbed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

# Step texts, in order -> one label per step.
Labeller = Callable[[Sequence[str]], list[str]]

_labellers: dict[str, Labeller] = {}


def register(data_source: str, labeller: Labeller) -> None:
    """Label the steps of `data_source`'s reasoning with `labeller` from now on."""
    _labellers[data_source] = labeller


def labeller_for(data_source: str) -> Labeller | None:
    """The labeller registered for `data_source`, or None: its steps carry no labels."""
    return _labellers.get(data_source)
