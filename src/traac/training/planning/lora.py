"""LoRA and QLoRA: the recipe fields, and what the trainer needs to train adapters.

The field names are TRL's `ModelConfig` (and open-r1's); the LoRA and bitsandbytes configs are
built by TRL's own `get_peft_config` / `get_quantization_config`, and TRL's `GRPOTrainer`
wraps the policy (`get_peft_model`) and loads the quantized base. With adapters the KL
reference is the policy with its adapters disabled (TRL's rule), and so is TRAAC's reference
scoring model (`as_reference`): the base weights are held once.

QLoRA follows TRL: the base is loaded in 4 (or 8) bits through `quantization_config` and the
adapters are trained in bfloat16 (TRL casts them). bitsandbytes runs on a CUDA GPU, and on the
CPU from release 0.50; what this machine lacks is checked before any weight is read
(`check_quantization`).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from accelerate.utils import is_peft_model
from packaging.version import Version
from trl import ModelConfig, get_peft_config, get_quantization_config
from trl.trainer.utils import use_adapter

from traac.errors import TraacError

QLORA_EXTRA = "pip install 'traac[qlora]'"
CPU_BITSANDBYTES = Version("0.50")  # the release LoRA steps on 4-bit weights were run with on CPUs


@dataclass
class LoraArguments:
    """Train LoRA adapters instead of every weight (TRL's `ModelConfig` names)."""

    use_peft: bool = field(
        default=False,
        metadata={"help": "Train LoRA adapters on a frozen base; the output is an adapter "
                  "directory that every command takes as --model."},
    )  # fmt: skip
    lora_r: int = field(default=16, metadata={"help": "LoRA rank."})
    lora_alpha: int = field(default=32, metadata={"help": "LoRA alpha (scale alpha / r)."})
    lora_dropout: float = field(default=0.05, metadata={"help": "Dropout on the LoRA input."})
    lora_target_modules: list[str] | None = field(
        default=None,
        metadata={"help": "Module names to adapt (e.g. q_proj v_proj), or all-linear; unset: "
                  "peft's default for the architecture."},
    )  # fmt: skip
    load_in_4bit: bool = field(
        default=False,
        metadata={"help": "QLoRA: load the base in 4 bits (nf4); needs use_peft and bitsandbytes "
                  f"({QLORA_EXTRA}; on a CPU without CUDA, 0.50 or later)."},
    )  # fmt: skip
    load_in_8bit: bool = field(
        default=False,
        metadata={"help": "Load the base in 8 bits; needs use_peft and bitsandbytes (as 4 bits)."},
    )

    def __post_init__(self) -> None:
        if isinstance(self.lora_target_modules, str):  # a YAML scalar: one module name
            self.lora_target_modules = [self.lora_target_modules]

    def check_lora(self, use_vllm: bool = False) -> None:
        """Each LoRA field's value, in one line naming the field (no GPU needed); `use_vllm`:
        the recipe's, which a quantized base cannot generate with."""
        if self.lora_r < 1:
            raise TraacError(f"lora_r: {self.lora_r}; the LoRA rank is a positive integer")
        if self.lora_alpha <= 0:
            raise TraacError(f"lora_alpha: {self.lora_alpha}; must be positive")
        if not 0.0 <= self.lora_dropout < 1.0:
            raise TraacError(f"lora_dropout: {self.lora_dropout}; must be in [0, 1)")
        if self.lora_target_modules is not None and not all(
            m.strip() for m in self.lora_target_modules
        ):
            raise TraacError("lora_target_modules: an empty module name; list module names")
        if "lm_head" in (self.lora_target_modules or []):
            # TRL computes log-probabilities from lm_head's weight directly: an adapter there
            # would never train, and TRL refuses it once the model is loaded
            raise TraacError("lora_target_modules: lm_head cannot take an adapter in GRPO; leave "
                             "it out (all-linear already does)")  # fmt: skip
        if self.load_in_4bit and self.load_in_8bit:
            raise TraacError("load_in_4bit and load_in_8bit: choose one")
        if self.quantized and not self.use_peft:
            raise TraacError(
                f"{self.quantization_field}: a quantized base trains only adapters; "
                "set use_peft: true"
            )
        if self.quantized and use_vllm:
            # TRL starts vLLM with bitsandbytes quantization and pushes the merged 4-bit
            # tensors without their quantization state at the first weight sync
            # (huggingface/trl#4973); 8-bit it refuses after loading the model.
            raise TraacError(
                f"{self.quantization_field} with use_vllm: TRL cannot sync a quantized base into "
                "vLLM; set use_vllm: false (QLoRA generates with transformers) or drop "
                f"{self.quantization_field}"
            )

    @property
    def quantized(self) -> bool:
        return self.load_in_4bit or self.load_in_8bit

    @property
    def quantization_field(self) -> str:
        return "load_in_4bit" if self.load_in_4bit else "load_in_8bit"

    def gpu_requirement(self) -> str | None:
        """The one line saying what a quantized base needs that this machine lacks (None: it
        has it, or the base is not quantized). Without CUDA, bitsandbytes quantizes on the CPU
        from `CPU_BITSANDBYTES` on (4 and 8 bits: load, generate, train adapters)."""
        if not self.quantized:
            return None
        if importlib.util.find_spec("bitsandbytes") is None:
            return f"{self.quantization_field}: bitsandbytes is not installed; {QLORA_EXTRA}"
        installed = Version(importlib.metadata.version("bitsandbytes"))
        if torch.cuda.is_available() or installed >= CPU_BITSANDBYTES:
            return None
        return (f"{self.quantization_field}: bitsandbytes {installed} quantizes on a CUDA GPU "
                f"only and none is visible here; pip install 'bitsandbytes>={CPU_BITSANDBYTES}' "
                "for the CPU, or drop it to train LoRA on a full-precision base")  # fmt: skip

    def check_quantization(self) -> None:
        """Before any weight is read: a quantized base on a machine that cannot load it."""
        problem = self.gpu_requirement()
        if problem is not None:
            raise TraacError(problem)

    def model_config(self, dtype: Any) -> ModelConfig:
        """These fields as TRL's `ModelConfig` (`dtype`: the compute dtype of a quantized
        base, as TRL uses the model's)."""
        return ModelConfig(
            use_peft=self.use_peft,
            lora_r=self.lora_r,
            lora_alpha=self.lora_alpha,
            lora_dropout=self.lora_dropout,
            lora_target_modules=self.lora_target_modules,
            load_in_4bit=self.load_in_4bit,
            load_in_8bit=self.load_in_8bit,
            dtype=dtype,
        )

    def trainer_kwargs(self, bf16: bool) -> dict[str, Any]:
        """`peft_config` and `quantization_config` for `GRPOTrainer` (TRL's builders); empty
        without `use_peft`. A 4-bit base computes in bfloat16 under bf16, else float32."""
        if not self.use_peft:
            return {}
        config = self.model_config(torch.bfloat16 if bf16 else torch.float32)
        return {
            "peft_config": get_peft_config(config),
            "quantization_config": get_quantization_config(config),
        }

    def summary(self) -> str:
        """The plan's line: what trains, on what base."""
        if not self.use_peft:
            return "off (every weight trains)"
        modules = " ".join(self.lora_target_modules or ["peft's default for the architecture"])
        base = "full-precision"
        if self.quantized:
            base = "4-bit (QLoRA)" if self.load_in_4bit else "8-bit"
        return (f"r {self.lora_r}, alpha {self.lora_alpha}, dropout {self.lora_dropout} on "
                f"{modules}; {base} base, also the reference (adapters disabled); saves an "
                "adapter directory")  # fmt: skip


def keep_4bit_trainable(model: Any) -> None:
    """Keep bitsandbytes from repacking 4-bit weights for inference on the CPU. On a CPU with
    AVX512-BF16, bitsandbytes 0.50 repacks a weight at its layer's first forward in eval mode
    without gradients (the probe's, an evaluation's); the layer then passes no gradient to its
    input, and the adapters beneath it stop learning (a TRAAC step's gradient norm: 0.0)."""
    for module in model.modules():
        if getattr(module, "support_avx512bf16_for_cpu", False):
            module.support_avx512bf16_for_cpu = False


@contextmanager
def as_reference(model: Any, active: bool = True) -> Iterator[None]:
    """Forwards of a PEFT `model` as TRL computes the KL reference: through the `ref` adapter
    TRL copies from an adapter the policy came with, else with the adapters disabled (the base
    weights alone). A no-op for a model without adapters, or with `active` False."""
    if not (active and is_peft_model(model)):
        yield
        return
    with use_adapter(model, "ref" if "ref" in model.peft_config else None):
        yield
