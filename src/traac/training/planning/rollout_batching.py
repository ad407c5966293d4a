"""`rollout_batching`: TRL's padded generation, or traac's refilled decoding
(`traac.training.trl_adapter.rollouts`), and the settings refill honours, checked with the recipe
before a model loads."""

from __future__ import annotations

from typing import Any

from traac.common.launch import fsdp_launch, zero_stage
from traac.errors import TraacError

ROLLOUT_BATCHINGS = ("padded", "refill")


FSDP_REFUSED = (
    "rollout_batching: refill decodes each process's rows alone, and every FSDP forward is a "
    "collective across processes; set rollout_batching padded"
)


def check_refill(args: Any) -> None:
    """`rollout_batching: refill` only with the settings it honours (a one-line error)."""
    if args.rollout_batching != "refill":
        return
    if args.use_vllm or args.use_transformers_continuous_batching:
        raise TraacError(
            "rollout_batching: refill replaces TRL's padded transformers generation; set "
            "rollout_batching padded with use_vllm or use_transformers_continuous_batching"
        )
    # Each process decodes its rows alone, as many forwards as its longest row takes: no forward
    # may be a collective. ZeRO-3 gathers the policy for the round (`ds3_gather_for_generation`,
    # as TRL generates); FSDP shards every forward.
    if fsdp_launch(args.fsdp):
        raise TraacError(FSDP_REFUSED)
    if zero_stage(args.deepspeed) == 3 and not args.ds3_gather_for_generation:
        raise TraacError(
            "rollout_batching: refill under ZeRO-3 decodes with the policy's parameters gathered; "
            "set ds3_gather_for_generation true, or rollout_batching padded"
        )
    unsupported = {
        "top_k": args.top_k not in (0, None),
        "min_p": args.min_p is not None,
        "repetition_penalty": args.repetition_penalty != 1.0,
        "generation_kwargs": bool(args.generation_kwargs),
    }
    for name, set_ in unsupported.items():
        if set_:
            raise TraacError(
                f"{name}: rollout_batching refill samples with temperature and top_p only; "
                f"unset {name} or set rollout_batching padded"
            )
