"""LoRA and QLoRA: the recipe fields, and what the trainer needs to train adapters.

The field names are TRL's `ModelConfig` (and open-r1's); the LoRA and bitsandbytes configs are
built by TRL's own `get_peft_config` / `get_quantization_config`, and TRL's `GRPOTrainer`
wraps the policy (`get_peft_model`) and loads the quantized base. With adapters the KL
reference is the policy with its adapters disabled (TRL's rule), and so is TRAAC's reference
scoring model (`as_reference`): the base weights are held once.

QLoRA follows TRL: the base is loaded in 4 (or 8) bits through `quantization_config` and the
adapters are trained in bfloat16 (TRL casts them); bitsandbytes needs a CUDA GPU, which is
checked before any weight is read (`check_quantization`).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from accelerate.utils import is_peft_model
from trl import ModelConfig, get_peft_config, get_quantization_config
from trl.trainer.utils import use_adapter

from traac.errors import TraacError

QLORA_EXTRA = "pip install 'traac[qlora]'"


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
        metadata={"help": "QLoRA: load the base in 4 bits (nf4); needs use_peft, a CUDA GPU "
                  f"and bitsandbytes ({QLORA_EXTRA})."},
    )  # fmt: skip
    load_in_8bit: bool = field(
        default=False,
        metadata={"help": "Load the base in 8 bits; needs use_peft, a CUDA GPU and bitsandbytes."},
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
        if self.load_in_4bit and self.load_in_8bit:
            raise TraacError("load_in_4bit and load_in_8bit: choose one")
        if self.quantized and not self.use_peft:
            raise TraacError(
                f"{self.quantization_field}: a quantized base trains only adapters; "
                "set use_peft: true"
            )
        if self.quantized and use_vllm:
            # TRL starts vLLM with bitsandbytes quantization and pushes the merged 4-bit tensors
            # without their quantization state at the first weight sync (TRL issue 4973); 8-bit
            # it refuses after loading the model.
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
        has it, or the base is not quantized)."""
        if not self.quantized:
            return None
        if not torch.cuda.is_available():
            return (f"{self.quantization_field}: bitsandbytes quantization needs a CUDA GPU and "
                    "none is visible here; run on a GPU machine, or drop it to train LoRA on "
                    "a full-precision base")  # fmt: skip
        if importlib.util.find_spec("bitsandbytes") is None:
            return f"{self.quantization_field}: bitsandbytes is not installed; {QLORA_EXTRA}"
        return None

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


def scoring_view(model: Any) -> Any:
    """The transformers model inside a PEFT wrapper (its LoRA layers live in it, so forwards
    through it use the adapters unless they are disabled); any other model as it is."""
    return model.get_base_model() if is_peft_model(model) else model


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
