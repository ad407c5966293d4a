"""Rewards added to the mode's own: a recipe's `extra_reward_funcs: [module:function, ...]`,
and the `reward_funcs` a Python caller gives `TRAACTrainer` (added too, never in their place).

Each function has TRL's reward signature, `(prompts, completions, **kwargs) -> list[float | None]`
(TRL passes the dataset's columns, `completion_ids` and `trainer_state` as keyword arguments), and
is summed after the mode's rewards (`traac.training.methods.registry`) with its weight in
`extra_reward_weights` (default 1; the mode's own keep weight 1). As TRL's `trl grpo` does for its
`reward_funcs`, a module in the working directory is found too. A path that does not import, a name
that is not a function or a signature TRL cannot call fails at `traac train --dry-run` (and before
the model loads in a real run), naming the path.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from traac.errors import TraacError

RewardFunc = Callable[..., list[float]]
# What TRL's `_calculate_rewards` passes to every reward function (plus one list per column).
_TRL_CALL = {
    "prompts": [], "completions": [], "completion_ids": [], "trainer_state": None,
    "log_extra": None, "log_metric": None, "answer": [],
}  # fmt: skip


def split_path(spec: str, what: str = "extra_reward_funcs") -> tuple[str, str]:
    """`module:function` (or TRL's `module.function`) -> (module, function)."""
    module, sep, name = spec.rpartition(":") if ":" in spec else spec.rpartition(".")
    if not sep or not module or not name.isidentifier():
        raise TraacError(f"{what}: {spec!r} is no module:function path")
    return module, name


def load_reward_func(spec: str, what: str = "extra_reward_funcs") -> RewardFunc:
    """The function `spec` names, checked to be callable the way TRL calls reward functions
    (`what`: the argument that named it)."""
    module_name, name = split_path(spec, what)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as err:  # the user's module: any error it raises on import is theirs
        raise TraacError(
            f"{what}: {spec}: cannot import {module_name} ({type(err).__name__}: {err})"
        ) from None
    func = getattr(module, name, None)
    if func is None:
        raise TraacError(f"{what}: {spec}: {module_name} has no {name}")
    if not callable(func) or not hasattr(func, "__name__"):
        raise TraacError(f"{what}: {spec}: is a {type(func).__name__}, not a function")
    check_signature(func, f"{what}: {spec}")
    return func


def check_signature(func: Any, where: str) -> None:
    """A reward function TRL's reward call binds to (`_TRL_CALL`), else one line naming it."""
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        return  # a builtin without a signature: TRL's call decides
    try:
        signature.bind(**_TRL_CALL)
    except TypeError as err:
        raise TraacError(
            f"{where}{signature} cannot take TRL's reward call ({err}); "
            "write it as def f(prompts, completions, **kwargs) -> list[float]"
        ) from None


# TRL's reward functions a caller may name, as `trl grpo --reward_funcs` names them (its
# registry's factory with fixed lengths, get_soft_overlong_punishment, left out: call it).
TRL_REWARDS = ("accuracy_reward", "reasoning_accuracy_reward", "think_format_reward")
_ACCEPTED = (
    "a reward function f(prompts, completions, **kwargs) -> list[float], a reward model "
    f"(a model object or a local model directory), one of TRL's rewards by name "
    f"({', '.join(TRL_REWARDS)}), a module:function path, or a list of these"
)


def given_rewards(reward_funcs: Any) -> list[Any]:
    """`TRAACTrainer`'s `reward_funcs` as TRL takes them, checked before any model loads: a
    name of TRL's rewards or a `module:function` path becomes its function; a string must
    otherwise be a local model directory or a hub id already in the local cache (TRL would
    download anything else as a reward model, at length, or fail on the network); anything
    else must be callable. One line naming the entry and what the argument accepts."""
    import torch.nn as nn

    if reward_funcs is None:
        return []
    given = list(reward_funcs) if isinstance(reward_funcs, (list, tuple)) else [reward_funcs]
    out = []
    for at, func in enumerate(given):
        where = "reward_funcs" if len(given) == 1 else f"reward_funcs[{at}]"
        if isinstance(func, str):
            out.append(_named_reward(func, where))
        elif isinstance(func, nn.Module):
            out.append(func)
        elif callable(func):
            check_signature(func, f"{where}: {getattr(func, '__name__', type(func).__name__)}")
            out.append(func)
        else:
            kind = type(func).__name__
            article = "an" if kind[:1].lower() in "aeiou" else "a"
            raise TraacError(f"{where}: {func!r} is {article} {kind}; pass {_ACCEPTED}")
    return out


def _named_reward(name: str, where: str) -> Any:
    """A string entry of `reward_funcs`: TRL's reward, a function by path, or a reward model
    that is here already."""
    if name in TRL_REWARDS:
        import trl.rewards

        return getattr(trl.rewards, name)
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise TraacError(f"{where}: {name} holds no config.json, so it is no reward model; "
                             f"pass {_ACCEPTED}")  # fmt: skip
        return name
    if ":" in name:
        return load_reward_func(name, where)
    from huggingface_hub import try_to_load_from_cache

    try:
        cached = try_to_load_from_cache(name, "config.json")
    except ValueError:  # not a hub id at all
        cached = None
    if isinstance(cached, str):
        return name
    near = difflib.get_close_matches(name, TRL_REWARDS, n=1)
    meant = f" (did you mean {near[0]}?)" if near else ""
    raise TraacError(
        f"{where}: {name!r} is no reward TRL names{meant}, no local model directory and no hub "
        f"model in the local cache; pass {_ACCEPTED} (a hub reward model: download it first, "
        "`hf download ID`, and pass its directory)"
    )


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
