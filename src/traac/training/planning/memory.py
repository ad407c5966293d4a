"""Peak GPU memory per training process, estimated from a model's config before any weight loads.

What `traac train --dry-run` prints, so that the 80 GB question is answered before a GPU hour is
spent. The parameters are counted on the meta device (the model's own modules, no memory); the
rest is arithmetic on the recipe, in GiB (2^30 bytes). What a process holds throughout:

- weights: parameters x bytes of the load dtype (`TRAACConfig.load_dtype`), divided over the
  processes under ZeRO-3 or FSDP;
- optimizer: AdamW's two moments per trainable parameter, in the weights' dtype with torch's
  optimizer (LoRA's adapters are float32: peft keeps them so under a bf16 base);
  DeepSpeed's bf16/fp16 optimizer keeps float32 master weights and moments (12 bytes), divided
  over the processes from ZeRO-1 (and under FSDP);
- reference: a second copy of the weights when TRL keeps a KL reference or TRAAC a frozen copy
  to score with (none with LoRA: the reference is the base with its adapters disabled);
- vLLM: `vllm_gpu_memory_utilization` of the card in colocate mode (none in server mode).

and on top, the largest of the passes a step makes one after the other (the peak is the
persistent terms plus the largest phase, not their sum):

- generation (transformers, not vLLM): the KV cache of the generation round's rows
  (per_device_train_batch_size x steps_per_generation) at PROMPT_TOKENS +
  max_completion_length, and one layer's again (the dynamic cache grows by concatenation);
  re-answers after compressed think blocks decode fewer, shorter rows;
- log-prob passes (old policy, reference; no gradient): one micro-batch's logits over the
  completion in the weights' dtype, their temperature-scaled copy and one row's log-softmax
  (TRL's `selective_log_softmax`; its fused Triton kernel, where it runs, needs less);
- scorer: the probe's forward (no gradient), a batch of 8 traces: one layer's transient
  activations and the probe's rows per layer;
- training: the gradients, the activations the forward keeps for the backward
  (`layer_activation_bytes` per token and layer, measured; one hidden state per layer under
  activation checkpointing plus one layer's whole), and the completion's logits twice (forward
  and their gradient).

The per-layer activation bytes were read off the saved tensors of a Qwen3 layer's forward (torch's
`MemTracker` on the CPU; tests/training/planning/test_memory.py checks each phase against it at
small shapes). The estimate leaves out the CUDA context, the allocator's fragmentation and NCCL
buffers (a few GB): hence the margin the plan asks for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from transformers import AutoModelForCausalLM

from traac.common.scoring_model import names_reference

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
    """Bytes per process: the terms held throughout, and per phase of a step what it adds."""

    terms: dict[str, float]
    phases: dict[str, dict[str, float]]

    @property
    def peak_phase(self) -> str:
        return max(self.phases, key=lambda name: sum(self.phases[name].values()))

    @property
    def total(self) -> float:
        return sum(self.terms.values()) + sum(self.phases[self.peak_phase].values())

    def line(self, card_gib: float = CARD_GIB) -> str:
        held = ", ".join(f"{name} {value / GIB:.1f}" for name, value in self.terms.items())
        phases = ", ".join(
            f"{name} {sum(parts.values()) / GIB:.1f}" for name, parts in self.phases.items()
        )
        peak = self.peak_phase
        parts = " + ".join(f"{name} {v / GIB:.1f}" for name, v in self.phases[peak].items())
        share = self.total / (card_gib * GIB)
        verdict = "fits" if share <= MARGIN else "does NOT fit"
        return (f"about {self.total / GIB:.1f} GiB per process (held: {held}; at most one "
                f"phase on top: {phases}; peak in {peak}: {parts}; GiB): {share:.0%} of a "
                f"{card_gib:g} GiB card, {verdict} with {1 - MARGIN:.0%} left for the CUDA "
                "context and fragmentation")  # fmt: skip


@dataclass(frozen=True)
class Shape:
    """What sizes the activations and the KV cache: widths per token, heads and layers."""

    hidden: int
    intermediate: int
    layers: int
    vocab: int
    heads: int
    kv_heads: int
    head_dim: int

    @classmethod
    def of(cls, text: Any) -> Shape:
        """The shape of a (text) model config."""
        head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
        kv_heads = getattr(text, "num_key_value_heads", None) or text.num_attention_heads
        return cls(text.hidden_size, text.intermediate_size, text.num_hidden_layers,
                   text.vocab_size, text.num_attention_heads, kv_heads, head_dim)  # fmt: skip


def layer_activation_bytes(
    shape: Shape, width: int, lora: tuple[int, Sequence[str] | None] | None = None
) -> float:
    """Bytes one decoder layer keeps per token for its backward, SDPA attention, weights of
    `width` bytes. Measured on Qwen3 layers (saved tensors on the CPU, SDPA; the fit is exact
    over six shapes in float32 and bfloat16): 6 hidden, 4 intermediate, 4 query and 4 key-value
    values in the weights' dtype; under bf16/fp16 the RMS norms' float32 copies add 4 bytes a
    hidden value and 2 a query or key-value one; and a float32 scalar per norm, per query head
    (q norm, SDPA's log-sum-exp) and per key-value head.

    With `lora` = (rank, targets) the frozen linears keep no inputs for weight gradients but
    each adapter keeps its dropout's output and mask and its rank-wide product (measured in
    bf16 for peft's default targets, q_proj and v_proj, and for all-linear; any other list
    is counted as all-linear, an upper bound)."""
    q, kv = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    kept = width * (6 * shape.hidden + 4 * shape.intermediate + 4 * q + 4 * kv)
    upcast = 4 * shape.hidden + 2 * (q + kv) if width < 4 else 0
    scalars = 4 * (2 + 2 * shape.heads + shape.kv_heads)
    if lora is None:
        return kept + upcast + scalars
    rank, targets = lora
    if targets is None or sorted(targets) == sorted(LORA_DEFAULT):
        adapters = width * (4 * shape.hidden - shape.intermediate - q - kv) + 2 * width * rank * 2
    else:
        linears = 7  # q, k, v, o, gate, up, down
        adapters = width * (16 * shape.hidden + 3 * shape.intermediate + 3 * q - kv)
        adapters += 2 * width * rank * linears
    return kept + upcast + scalars + adapters


def kv_cache_bytes(shape: Shape, rows: int, tokens: int, width: int) -> float:
    """A KV cache of `rows` sequences of `tokens`: keys and values per layer."""
    return rows * tokens * shape.layers * 2 * shape.kv_heads * shape.head_dim * width


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


SCORER_BATCH = 8  # traces per probe forward (`AttentionScorer`'s batch_size)


def estimate(
    parameters: int,
    trainable: int,
    shape: Shape,
    *,
    config: Any,
    sharding: Sharding,
    lora: tuple[int, Sequence[str] | None] | None,
    card_gib: float = CARD_GIB,
    prompt_tokens: int = PROMPT_TOKENS,
) -> MemoryEstimate:
    """The per-process estimate for a recipe (`config`: a `TRAACConfig`) on a model of that
    shape; every term is the module docstring's. `lora`: (rank, target modules) of a LoRA
    run, None for full fine-tuning; `prompt_tokens`: the prompt length assumed per sequence."""
    dtype = config.load_dtype or torch.float32
    width = torch.finfo(dtype).bits // 8
    n = sharding.processes
    params_split = n if (sharding.zero >= 3 or sharding.fsdp) else 1
    grads_split = n if (sharding.zero >= 2 or sharding.fsdp) else 1
    states_split = n if (sharding.zero >= 1 or sharding.fsdp) else 1
    trainable_width = 4 if lora else width  # peft keeps adapters in float32
    state_bytes = 12 if sharding.zero and width < 4 else 2 * trainable_width
    terms = {
        "weights": (parameters * width + (trainable * 4 if lora else 0)) / params_split,
        "optimizer": trainable * state_bytes / states_split,
    }
    probe = config.traac_settings  # read only where the mode compresses
    frozen_copy = config.compresses and names_reference(probe.scoring_model)
    if not lora and (config.beta > 0 or (frozen_copy and probe.scorer_kind.attention)):
        terms["reference"] = parameters * width / params_split
    if config.use_vllm and config.vllm_mode == "colocate":
        terms["vLLM"] = config.vllm_gpu_memory_utilization * card_gib * GIB
    batch = config.per_device_train_batch_size
    completion = config.max_completion_length
    tokens = prompt_tokens + completion
    layer = layer_activation_bytes(shape, width, lora)
    if config.gradient_checkpointing:
        kept = batch * tokens * (shape.hidden * width * shape.layers + layer)
    else:
        kept = batch * tokens * layer * shape.layers
    logits = batch * completion * shape.vocab * width
    phases = {
        "training": {
            "gradients": trainable * trainable_width / grads_split,
            "activations": kept,
            "logits": 2 * logits,
        },
        # TRL's selective_log_softmax: the temperature-scaled copy, then one row at a time
        "log-prob passes": {"logits": logits, "log-softmax": logits + completion * shape.vocab * 4},
    }
    if not config.use_vllm:
        steps = getattr(config, "steps_per_generation", None) or 1
        rows = batch * steps
        # transformers' dynamic cache grows by concatenation: one layer's is briefly held twice
        cache = kv_cache_bytes(shape, rows, tokens, width) * (1 + 1 / shape.layers)
        phases["generation"] = {"KV cache": cache}
    if config.compresses and probe.scorer_kind.attention:
        phases["scorer"] = {
            "activations": SCORER_BATCH * tokens * layer,
            "probe rows": SCORER_BATCH * tokens * shape.layers * shape.heads * 4,
        }
    return MemoryEstimate(terms, phases)


def recipe_estimate(
    model_config: Any, config: Any, script: Any, sharding: Sharding
) -> MemoryEstimate:
    """`estimate` for a parsed recipe (`TRAACConfig`, `TrainScriptArguments`) on the model that
    `model_config` describes (read from its config.json; no weights)."""
    lora = (script.lora_r, script.lora_target_modules) if script.use_peft else None
    parameters, trainable = count_parameters(model_config, lora)
    shape = Shape.of(model_config.get_text_config())
    return estimate(parameters, trainable, shape, config=config, sharding=sharding, lora=lora)
