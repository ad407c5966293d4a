"""Rewards added to the mode's own: a recipe's `extra_reward_funcs: [module:function, ...]`,
and the `reward_funcs` a Python caller gives `TRAACTrainer` (added too, never in their place).

Each function has TRL's reward signature, `(prompts, completions, **kwargs) -> list[float |
None]` (TRL passes the dataset's columns, `completion_ids` and `trainer_state` as keyword
arguments), and is summed after the mode's rewards (`traac.training.modes`) with its weight in
`extra_reward_weights` (default 1; the mode's own keep weight 1). As TRL's `trl grpo` does for its
`reward_funcs`, a module in the working directory is found too. A path that does not import, a
name that is not a function or a signature TRL cannot call fails at `traac train --dry-run` (and
before the model loads in a real run), naming the path.
"""

from __future__ import annotations

import importlib
import inspect
import math
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from traac.errors import TraacError

RewardFunc = Callable[..., list[float]]
# What TRL's `_calculate_rewards` passes to every reward function (plus one list per column).
_TRL_CALL = {
    "prompts": [], "completions": [], "completion_ids": [], "trainer_state": None,
    "log_extra": None, "log_metric": None, "answer": [],
}  # fmt: skip


def split_path(spec: str) -> tuple[str, str]:
    """`module:function` (or TRL's `module.function`) -> (module, function)."""
    module, sep, name = spec.rpartition(":") if ":" in spec else spec.rpartition(".")
    if not sep or not module or not name.isidentifier():
        raise TraacError(f"extra_reward_funcs: {spec!r} is no module:function path")
    return module, name


def load_reward_func(spec: str) -> RewardFunc:
    """The function `spec` names, checked to be callable the way TRL calls reward functions."""
    module_name, name = split_path(spec)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as err:  # the user's module: any error it raises on import is theirs
        raise TraacError(
            f"extra_reward_funcs: {spec}: cannot import {module_name} ({type(err).__name__}: {err})"
        ) from None
    func = getattr(module, name, None)
    if func is None:
        raise TraacError(f"extra_reward_funcs: {spec}: {module_name} has no {name}")
    if not callable(func) or not hasattr(func, "__name__"):
        raise TraacError(f"extra_reward_funcs: {spec}: is a {type(func).__name__}, not a function")
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        return func  # a builtin without a signature: TRL's call decides
    try:
        signature.bind(**_TRL_CALL)
    except TypeError as err:
        raise TraacError(
            f"extra_reward_funcs: {spec}{signature} cannot take TRL's reward call ({err}); "
            "write it as def f(prompts, completions, **kwargs) -> list[float]"
        ) from None
    return func


def load_extra_rewards(specs: Sequence[str], taken: Sequence[str]) -> list[RewardFunc]:
    """The functions `specs` name; each name must differ from the others and from `taken` (the
    mode's rewards), since TRL logs each reward by its name."""
    names = set(taken)
    out = []
    for spec in specs:
        func = load_reward_func(spec)
        if func.__name__ in names:
            raise TraacError(
                f"extra_reward_funcs: {spec}: the name {func.__name__} is already a reward of "
                "this mode or of the list; rename the function"
            )
        names.add(func.__name__)
        out.append(func)
    return out


def check_extra_weights(specs: Sequence[str], weights: Sequence[float] | None, trl: Any) -> None:
    """`extra_reward_weights`: one finite number per extra function, and not beside TRL's
    `reward_weights` (`trl`), which already weighs every reward."""
    for spec in specs:
        split_path(spec)
    if weights is None:
        return
    if trl is not None:
        raise TraacError("extra_reward_weights: set it or TRL's reward_weights (one weight per "
                         "reward, the mode's first), not both")  # fmt: skip
    if len(weights) != len(specs):
        raise TraacError(f"extra_reward_weights: {len(weights)} weights for {len(specs)} "
                         "extra_reward_funcs; give one per function")  # fmt: skip
    for w in weights:
        if not math.isfinite(w):
            raise TraacError(f"extra_reward_weights: {w} must be a finite number")


def with_extra_rewards(
    funcs: Sequence[RewardFunc], args: Any, given: Any = None
) -> list[RewardFunc]:
    """The mode's reward functions, then `given` (TRAACTrainer's `reward_funcs`: as TRL sums its
    `reward_funcs`, they are added to TRAAC's, never put in their place), then the recipe's
    extra ones. Sets TRL's `args.reward_weights` (unless set) to 1 for the mode's and the given
    and `extra_reward_weights` for the extra ones; a `reward_weights` that does not give one
    weight per reward fails here, naming the rewards in order."""
    given = [] if given is None else list(given) if isinstance(given, (list, tuple)) else [given]
    names = [f.__name__ for f in funcs]
    for func in given:
        name = getattr(func, "__name__", None)  # a reward model (TRL's string or model) has none
        if name in names:
            raise TraacError(f"reward_funcs: {name} is already a reward of mode {args.mode}, "
                             "which traac keeps; pass only the rewards to add")  # fmt: skip
        if name is not None:
            names.append(name)
    extra = load_extra_rewards(args.extra_reward_funcs, names)
    if extra and args.reward_weights is None:
        weights = args.extra_reward_weights or [1.0] * len(extra)
        args.reward_weights = [1.0] * (len(funcs) + len(given)) + [float(w) for w in weights]
    out = [*funcs, *given, *extra]
    if args.reward_weights is not None and len(args.reward_weights) != len(out):
        order = [getattr(f, "__name__", str(f)) for f in out]
        raise TraacError(
            f"reward_weights: {len(args.reward_weights)} weights for {len(out)} rewards "
            f"({', '.join(order)}); give one per reward, in that order"
        )
    return out
