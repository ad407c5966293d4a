"""Training rollouts through traac's refilled decoding (`rollout_batching: refill`).

TRL's transformers backend pads a batch and decodes it until its longest completion ends: with
think blocks of uneven length, most rows idle for most steps (a 32-rollout SmolLM2 step spent
60 s there on 2 cores). `decode_refilled` drops each row as it ends, so a round costs the tokens
it samples; on a GPU, `decode_rows` decodes the round as one padded batch on the static cache
instead, whose compiled step is not launch-bound (the tokens are the same). The step's sampling,
dynamic sampling's fresh rollouts and the re-answers after compressed think blocks all decode
here; their completions end with the stop token, as TRL's do.

Each row draws from its own seeded stream (`RowSampler`: temperature and top_p, TRL's only
sampling settings this path reproduces; `traac.training.planning.rollout_batching.check_refill`
refuses the others), keyed by the run's seed, the process, the optimizer step, the round within
the step and the row, so a resumed run samples as an uninterrupted one and no two processes share
a stream. Under `bf16` the decoding
runs in the trainer's autocast, as its log-prob forwards do.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from accelerate.utils import is_peft_model
from torch.distributed.fsdp import FSDPModule
from transformers.distributed.fsdp import is_fsdp_managed_module

from traac.common.decoding import RowSampler, decode_rows
from traac.errors import TraacError
from traac.training.planning.rollout_batching import FSDP_REFUSED


class RefillRollouts:
    """One completion per prompt id list, sampled by `decode_refilled` with every row at once."""

    def __init__(
        self,
        seed: int,
        temperature: float,
        top_p: float,
        stop_ids: set[int],
        pad: int,
        rank: int = 0,
    ):
        self.seed = seed
        self.rank = rank  # the process: its rows are numbered from 0 like every other's
        self.temperature = temperature
        self.top_p = top_p
        self.stop_ids = stop_ids
        self.pad = pad
        self.static: bool | None = None  # None: the device decides (`fast_decoding`)
        self._step = -1
        self._round = 0

    def __call__(
        self, model: Any, prompts: list[list[int]], max_new_tokens: int, step: int
    ) -> list[list[int]]:
        """Completions of `prompts` (up to `max_new_tokens`, the stop token kept) at optimizer
        step `step`; call it in the autocast the run's forwards use."""
        if not prompts:
            return []
        if isinstance(model, FSDPModule) or is_fsdp_managed_module(model):  # sharded by hand
            raise TraacError(FSDP_REFUSED)  # (an FSDP launch is refused by `check_refill`)
        if step != self._step:
            self._step, self._round = step, 0
        self._round += 1
        model = model.get_base_model() if is_peft_model(model) else model  # adapters stay on
        seeds = [self.row_seed(step, self._round, row) for row in range(len(prompts))]
        sampler = RowSampler(self.temperature, self.top_p, seeds)
        decoded = decode_rows(
            model,
            prompts,
            sampler,
            max_new_tokens=max_new_tokens,
            stop_ids=self.stop_ids,
            pad_id=self.pad,
            slots=len(prompts),
            keep_stop=True,
            static=self.static,
        )
        return [ids for ids, _ in decoded]

    def row_seed(self, step: int, round_: int, row: int) -> int:
        """The seed of one row's stream: stable across runs, distinct per process, step, round and
        row."""
        state = np.random.SeedSequence([self.seed, self.rank, step, round_, row]).generate_state(1)
        return int(state[0]) & 0x7FFFFFFF


def refill_rollouts(
    args: Any, eos_token_ids: list[int], pad: int, rank: int
) -> RefillRollouts | None:
    """The engine `rollout_batching` asks for: `RefillRollouts`, or None for TRL's own."""
    if args.rollout_batching != "refill":
        return None
    return RefillRollouts(args.seed, args.temperature, args.top_p, set(eos_token_ids), pad, rank)
