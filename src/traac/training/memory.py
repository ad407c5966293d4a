"""Peak GPU memory per training process, estimated from a model's config before any weight loads.

What `traac train --dry-run` prints, so that the 80 GB question is answered before a GPU hour is
spent. The parameters are counted on the meta device (the model's own modules, no memory); the
rest is arithmetic on the recipe, in GiB (2^30 bytes), each term printed:

- weights: parameters x bytes of the load dtype (`TRAACConfig.load_dtype`), divided over the
  processes under ZeRO-3 or FSDP;
- gradients: trainable parameters x the weights' bytes, divided over the processes from ZeRO-2;
- optimizer: AdamW's two moments per trainable parameter, in the weights' dtype with torch's
  optimizer; DeepSpeed's bf16/fp16 optimizer keeps float32 master weights and moments (12 bytes),
  divided over the processes from ZeRO-1 (and under FSDP);
- reference: a second copy of the weights when TRL keeps a KL reference or TRAAC a frozen copy
  to score with (none with LoRA: the reference is the base with its adapters disabled);
- vLLM: `vllm_gpu_memory_utilization` of the card in colocate mode (none in server mode);
- activations: per_device_train_batch_size sequences of (PROMPT_TOKENS + max_completion_length)
  tokens: the hidden state each layer keeps under activation checkpointing (all of a layer's
  otherwise, about 8 hidden + 3 intermediate values per token), and the completion's logits
  twice (forward and their gradient), in the weights' dtype.

It leaves out the CUDA context, the allocator's fragmentation and NCCL buffers (a few GB):
hence the margin the plan asks for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from transformers import AutoModelForCausalLM

GIB = 1 << 30
PROMPT_TOKENS = 512  # the prompt length assumed per sequence (recipes' problems are shorter)
MARGIN = 0.9  # a plan whose estimate exceeds this share of the card says so
CARD_GIB = 79.6  # an "80 GB" H100 or A100 as CUDA counts it (81,559 MiB on an H100)
LORA_DEFAULT = ("q_proj", "v_proj")  # peft's default targets for Llama/Qwen-like models


@dataclass(frozen=True)
class Sharding:
    """How the training processes split the model: `zero` is DeepSpeed's stage (0: none)."""

    processes: int = 1
    zero: int = 0
    fsdp: bool = False


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes per process, by term (see the module docstring)."""

    terms: dict[str, float]

    @property
    def total(self) -> float:
        return sum(self.terms.values())

    def line(self, card_gib: float = CARD_GIB) -> str:
        parts = ", ".join(f"{name} {value / GIB:.1f}" for name, value in self.terms.items())
        share = self.total / (card_gib * GIB)
        verdict = "fits" if share <= MARGIN else "does NOT fit"
        return (f"about {self.total / GIB:.1f} GiB per process ({parts}; GiB): {share:.0%} of "
                f"a {card_gib:g} GiB card, {verdict} with {1 - MARGIN:.0%} left for the CUDA "
                "context and fragmentation")  # fmt: skip


def count_parameters(model_config: Any, lora: tuple[int, Sequence[str] | None] | None = None
                     ) -> tuple[int, int]:  # fmt: skip
    """(parameters, trainable parameters) of the model `model_config` describes, built on the meta
    device; with `lora` = (rank, target module names or None for peft's default, or
    ["all-linear"]), the trainable ones are the adapters' r x (in + out) per targeted linear."""
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(model_config)
    total = sum(p.numel() for p in model.parameters())
    if lora is None:
        return total, total
    rank, targets = lora
    head = model.get_output_embeddings()
    names = tuple(targets or LORA_DEFAULT)
    trainable = sum(
        rank * (m.in_features + m.out_features)
        for name, m in model.named_modules()
        if isinstance(m, nn.Linear) and m is not head
        and ("all-linear" in names or name.rsplit(".", 1)[-1] in names)
    )  # fmt: skip
    return total, trainable


def estimate(
    parameters: int,
    trainable: int,
    *,
    hidden: int,
    intermediate: int,
    layers: int,
    vocab: int,
    config: Any,
    sharding: Sharding,
    lora: bool,
    card_gib: float = CARD_GIB,
) -> MemoryEstimate:
    """The per-process estimate for a recipe (`config`: a `TRAACConfig`) on a model of that
    shape; every term is the module docstring's."""
    dtype = config.load_dtype or torch.float32
    width = torch.finfo(dtype).bits // 8
    n = sharding.processes
    params_split = n if (sharding.zero >= 3 or sharding.fsdp) else 1
    grads_split = n if (sharding.zero >= 2 or sharding.fsdp) else 1
    states_split = n if (sharding.zero >= 1 or sharding.fsdp) else 1
    state_bytes = 12 if sharding.zero and width < 4 else 2 * width
    terms = {
        "weights": parameters * width / params_split,
        "gradients": trainable * width / grads_split,
        "optimizer": trainable * state_bytes / states_split,
    }
    frozen_copy = config.compresses and config.scoring_model == "reference"
    if not lora and (config.beta > 0 or (frozen_copy and config.scorer == "attention")):
        terms["reference"] = parameters * width / params_split
    if config.use_vllm and config.vllm_mode == "colocate":
        terms["vLLM"] = config.vllm_gpu_memory_utilization * card_gib * GIB
    batch = config.per_device_train_batch_size
    tokens = batch * (PROMPT_TOKENS + config.max_completion_length)
    if config.gradient_checkpointing:
        kept = tokens * hidden * width * layers + tokens * (8 * hidden + 3 * intermediate) * width
    else:
        kept = tokens * (8 * hidden + 3 * intermediate) * width * layers
    logits = 2 * batch * config.max_completion_length * vocab * width
    terms["activations"] = kept + logits
    return MemoryEstimate(terms)


def recipe_estimate(
    model_config: Any, config: Any, script: Any, sharding: Sharding
) -> MemoryEstimate:
    """`estimate` for a parsed recipe (`TRAACConfig`, `TrainScriptArguments`) on the model that
    `model_config` describes (read from its config.json; no weights)."""
    text = model_config.get_text_config()
    lora = (script.lora_r, script.lora_target_modules) if script.use_peft else None
    parameters, trainable = count_parameters(model_config, lora)
    return estimate(
        parameters, trainable, hidden=text.hidden_size, intermediate=text.intermediate_size,
        layers=text.num_hidden_layers, vocab=text.vocab_size, config=config, sharding=sharding,
        lora=script.use_peft,
    )  # fmt: skip
