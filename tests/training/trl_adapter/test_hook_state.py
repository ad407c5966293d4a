"""No state crosses TRL's hooks through the trainer: an attribute the project's code writes
during one hook call is read by the project's code only during that same call.

A TRAACTrainer subclass records, while it trains on the quick testbed (sampling, resampling,
compression, an evaluation, a checkpoint, and a resume from it), the innermost hook call each
attribute write and read happens in, and who made it: the project's code (traac's, and this
test's subclasses) or a library's (TRL, transformers, the standard library). A crossing is a
read by the project's code, inside a hook call, of an attribute the project's code last wrote
inside another hook call. What TRL or transformers write themselves (`_metrics`, `state`,
`rollout_func`, ...) is their state, not traac's, and is left out; so are attributes written
outside any hook (`__init__`: configuration). A leaky subclass that parks a value in `train`
and reads it in `_generate_and_score_completions` must be caught, so the check cannot pass by
seeing nothing; on the trainer before the step became a value it finds `_batch`, `last_step`
and `held_out`. It sees attribute assignments, not in-place changes to an object an attribute
holds; the step's containers (rows, prompt ids, the reward windows) are checked by the tests of
the trainer and the rewards instead.
"""

from __future__ import annotations

import sys
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from traac.common.models import load_tokenizer
from traac.data.testbed_problems import make_items
from traac.data.training import items_to_dataset
from traac.training.planning.traac_config import TRAACConfig
from traac.training.trl_adapter.trainer import TRAACTrainer
from traac.training.trl_adapter.trl_api import TRL_HOOKS

pytestmark = pytest.mark.slow
HOOKS = (*TRL_HOOKS, "train")  # every TRL / transformers entry point the trainer overrides
# Code outside the project: TRL, transformers, accelerate, torch, the standard library.
LIBRARIES = tuple({sysconfig.get_paths()[k] for k in ("purelib", "platlib", "stdlib")})
N = 4


@dataclass
class Ledger:
    """Hook calls in progress, and every write and cross-hook read of the trainer's attributes."""

    calls: list[tuple[str, int]] = field(default_factory=list)  # innermost last
    count: int = 0
    seen: set[str] = field(default_factory=set)  # hooks called
    library: set[str] = field(default_factory=set)  # attributes TRL or transformers write
    ours: dict[str, tuple[str, int] | None] = field(default_factory=dict)  # traac's last write
    crossings: set[tuple[str, str, str]] = field(default_factory=set)  # (name, written, read)
    reads: int = 0  # reads by traac's code inside a hook (the check saw the step run)

    def wrote(self, name: str, caller: str) -> None:
        if not caller.startswith(LIBRARIES):
            self.ours[name] = self.calls[-1] if self.calls else None
        else:
            self.library.add(name)

    def read(self, name: str, caller: str) -> None:
        if not (self.calls and not caller.startswith(LIBRARIES) and name in self.ours):
            return
        self.reads += 1
        written = self.ours[name]
        if written is not None and written != self.calls[-1] and name not in self.library:
            self.crossings.add((name, written[0], self.calls[-1][0]))


def tracked(base: type[TRAACTrainer], ledger: Ledger) -> type[TRAACTrainer]:
    """`base` with every hook call and attribute access recorded in `ledger`."""

    def hook(name: str) -> Callable[..., Any]:
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            ledger.count += 1
            ledger.seen.add(name)
            ledger.calls.append((name, ledger.count))
            try:
                return getattr(super(cls, self), name)(*args, **kwargs)
            finally:
                ledger.calls.pop()

        return call

    def __setattr__(self: Any, name: str, value: Any) -> None:
        ledger.wrote(name, sys._getframe(1).f_code.co_filename)
        object.__setattr__(self, name, value)

    def __getattribute__(self: Any, name: str) -> Any:
        ledger.read(name, sys._getframe(1).f_code.co_filename)
        return object.__getattribute__(self, name)

    namespace = {name: hook(name) for name in HOOKS}
    namespace.update(__setattr__=__setattr__, __getattribute__=__getattribute__)
    cls = type(f"Tracked{base.__name__}", (base,), namespace)
    return cls


class Leaky(TRAACTrainer):
    """Parks a value on the trainer in one hook and reads it in another: must be caught."""

    def train(self, *args: Any, **kwargs: Any) -> Any:
        self.parked = True
        return super().train(*args, **kwargs)

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        assert self.parked
        return super()._generate_and_score_completions(inputs)


def run(base: type[TRAACTrainer], model: Path, out: Path, max_steps: int, **kw: Any) -> Ledger:
    ledger = Ledger()
    tokenizer = load_tokenizer(str(model))
    tokenizer.padding_side = "left"
    args = TRAACConfig(
        output_dir=str(out), use_cpu=True, bf16=False, gradient_checkpointing=False,
        report_to="none", disable_tqdm=True, seed=0, max_steps=max_steps,
        per_device_train_batch_size=2 * N, num_generations=N, max_completion_length=64,
        method_args={"scorer": "random"}, dynamic_sampling="resample", max_resample_rounds=1,
        eval_strategy="steps", eval_steps=1, per_device_eval_batch_size=N,
        num_generations_eval=N, save_strategy="steps", save_steps=1,
    )  # fmt: skip
    trainer = tracked(base, ledger)(
        str(model),
        args=args,
        train_dataset=items_to_dataset(make_items("easy", 6, seed=1, split="rl")),
        eval_dataset=items_to_dataset(make_items("easy", 1, seed=2, split="eval")),
        processing_class=tokenizer,
    )
    trainer.train(**kw)
    return ledger


def test_no_attribute_crosses_from_one_hook_call_to_another(
    quick_testbed: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    ledger = run(TRAACTrainer, quick_testbed, out, max_steps=1)
    assert ledger.seen == set(HOOKS) - {"_load_optimizer_and_scheduler"} and ledger.reads > 0
    assert ledger.crossings == set()
    # Resumed from that checkpoint (the restore hook) by a trainer with a leak: only it is found.
    resumed = run(Leaky, quick_testbed, out, max_steps=2, resume_from_checkpoint=True)
    assert "_load_optimizer_and_scheduler" in resumed.seen
    assert resumed.crossings == {("parked", "train", "_generate_and_score_completions")}
