"""Batched sampling behind one small interface, so the evaluation loop never knows the engine.

A `Backend` turns prompts (exact text, chat template already applied) into one `Generation`
each. `TransformersBackend` runs anywhere (CPU or GPU, left-padded batches); `VLLMBackend` is
imported only when chosen. Anything with the same `generate` method slots in, e.g. a backend
that decodes until the think closer or a think budget, compresses the reasoning and lets the
model answer (`traac.evaluation.inference.thinking_backend.ThinkingBackend`).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from traac.common.decoding import (
    DoneCallback,
    RowSampler,
    TokenCallback,
    check_sampling,
    decode_padded,
    fast_decoding,
)
from traac.common.models import (
    adapter_base,
    load_model,
    resolve_dtype,
    resolve_placement,
)
from traac.errors import TraacError
from traac.evaluation.inference.engines import BACKENDS
from traac.evaluation.inference.responses import Generation


@dataclass(frozen=True)
class Sampling:
    """Decoding settings (paper: temperature 1.0, top_p 1.0, no top-k, 10k new tokens)."""

    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 10000
    seed: int = 0

    def __post_init__(self) -> None:
        check_sampling(self.temperature, self.top_p, self.max_new_tokens)


class Backend(Protocol):
    tokenizer: Any
    max_context: int | None  # prompt + response tokens the model can hold (None: unlimited)

    def generate(
        self,
        prompts: Sequence[str],
        sampling: Sampling,
        keys: Sequence[str],
        on_tokens: TokenCallback | None = None,
    ) -> list[Generation]:
        """One generation per prompt. `keys` name each request (item id and sample index):
        backends derive their random seeds from them, so a resumed run draws the same way."""
        ...


def request_seed(seed: int, key: str) -> int:
    """A 31-bit seed for one request, stable across runs and batchings."""
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


class TransformersBackend:
    """`model.generate` on left-padded batches (CPU or GPU). `static`: decode on the static
    cache (None: where the device gains from it, `fast_decoding`)."""

    streams = True  # `generate` hands each response on as it ends (`on_generation`)

    def __init__(self, model: Any, tokenizer: Any, static: bool | None = None) -> None:
        self.model = model
        self.static = static
        self.tokenizer = tokenizer
        self.max_context = getattr(model.config, "max_position_embeddings", None)
        tokenizer.padding_side = "left"
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.stop_ids = stop_ids(model, tokenizer)

    def generate(
        self,
        prompts: Sequence[str],
        sampling: Sampling,
        keys: Sequence[str],
        on_tokens: TokenCallback | None = None,
        on_generation: Callable[[int, Generation], None] | None = None,
    ) -> list[Generation]:
        """`Backend.generate`, and `on_generation(i, generation)` as response i ends (as its
        batch ends, in padded batches), so a run can save it before the call returns. Each
        response is decoded to text once, as it ends (`decode` reports every request once)."""
        ids, sampler = self.prepare(prompts, sampling, keys)
        limit = sampling.max_new_tokens
        ended: dict[int, Generation] = {}

        def done(i: int, tokens: list[int], stopped: bool) -> None:
            ended[i] = self.finish(tokens, stopped, limit)
            if on_generation is not None:
                on_generation(i, ended[i])

        decoded = self.decode(ids, sampler, limit, on_tokens, done)
        return [ended[i] for i in range(len(decoded))]

    def prepare(
        self, prompts: Sequence[str], sampling: Sampling, keys: Sequence[str]
    ) -> tuple[list[list[int]], RowSampler]:
        """The prompts' token ids and a sampler drawing request i from a stream seeded by
        `sampling.seed` and `keys[i]`: what every transformers decoding starts from."""
        ids = [self.tokenizer.encode(p, add_special_tokens=False) for p in prompts]
        seeds = [request_seed(sampling.seed, key) for key in keys]
        sampler = RowSampler(sampling.temperature, sampling.top_p, seeds)
        return ids, sampler

    def decode(
        self,
        prompts: list[list[int]],
        sampler: RowSampler,
        max_new_tokens: int,
        on_tokens: TokenCallback | None,
        on_done: DoneCallback | None = None,
    ) -> list[tuple[list[int], bool]]:
        """Each prompt's sampled tokens (cut before the first stop token) and whether a stop
        token ended them: `model.generate` on one left-padded batch, on the static cache where
        the device gains from it (`fast_decoding`: a GPU)."""
        return decode_padded(
            self.model,
            prompts,
            sampler,
            max_new_tokens=max_new_tokens,
            stop_ids=self.stop_ids,
            pad_id=self.tokenizer.pad_token_id,
            static=fast_decoding(self.model) if self.static is None else self.static,
            on_tokens=on_tokens,
            on_done=on_done,
        )

    def finish(self, tokens: list[int], stopped: bool, limit: int) -> Generation:
        """The generation of `tokens`, which a stop token ended (`stopped`) or `limit` cut."""
        text = self.tokenizer.decode(tokens, skip_special_tokens=False)
        reason = "stop" if stopped or len(tokens) < limit else "length"
        return Generation(text=text, token_ids=tuple(tokens), finish_reason=reason)


def stop_ids(model: Any, tokenizer: Any) -> set[int]:
    """End-of-sequence ids of the model's generation config and of the tokenizer."""
    return eos_ids(getattr(model.generation_config, "eos_token_id", None), tokenizer)


def eos_ids(configured: int | Sequence[int] | None, tokenizer: Any) -> set[int]:
    """`configured` (a generation config's eos_token_id) and the tokenizer's eos id."""
    ids: set[int] = set()
    for value in (configured, tokenizer.eos_token_id):
        if isinstance(value, int):
            ids.add(value)
        elif value:
            ids.update(int(v) for v in value)
    if not ids:
        raise TraacError("the model and tokenizer define no end-of-sequence token")
    return ids


@dataclass(frozen=True)
class VLLMSettings:
    """vLLM engine settings `traac eval` passes to `vllm.LLM`, checked before any model loads.

    `max_model_len`: prompt + response tokens per request (None: the model's own context);
    `gpu_memory_utilization`: the share of each GPU vLLM may take for weights and KV cache.
    """

    tensor_parallel_size: int = 1
    max_model_len: int | None = None
    gpu_memory_utilization: float = 0.9

    def __post_init__(self) -> None:
        tp = self.tensor_parallel_size
        if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
            raise TraacError(f"--tensor-parallel-size {tp}: must be a whole number >= 1 (GPUs)")
        length = self.max_model_len
        if length is not None and (isinstance(length, bool) or length < 1):
            raise TraacError(f"--max-model-len {length}: must be at least 1 token")
        share = self.gpu_memory_utilization
        if not (math.isfinite(share) and 0 < share <= 1):
            raise TraacError(
                f"--gpu-memory-utilization {share}: must lie in (0, 1] (e.g. 0.9 of each GPU)"
            )

    def engine_args(self) -> dict[str, Any]:
        """Keyword arguments of `vllm.LLM` (the model's own context where none is given)."""
        args: dict[str, Any] = {
            "tensor_parallel_size": self.tensor_parallel_size,
            "gpu_memory_utilization": self.gpu_memory_utilization,
        }
        if self.max_model_len is not None:
            args["max_model_len"] = self.max_model_len
        return args


def load_vllm(model_path: str, seed: int, settings: VLLMSettings, dtype: str | None) -> Any:
    """A `vllm.LLM` for the model (imported only here: vLLM is an optional extra)."""
    if adapter_base(model_path) is not None:  # vLLM would take the adapter for a whole model
        raise TraacError(
            f"--backend vllm: {model_path} is a LoRA adapter; merge it into its base first "
            "(peft's merge_and_unload, then save_pretrained) or use --backend transformers"
        )
    try:
        from vllm import LLM
    except ImportError as err:
        raise TraacError(
            "--backend vllm needs vLLM on a CUDA machine: pip install 'traac[vllm]' "
            "(or use --backend transformers)"
        ) from err
    return LLM(model=model_path, seed=seed, dtype=dtype or "auto", **settings.engine_args())


def vllm_params(
    sampling: Sampling,
    seed: int,
    max_tokens: int,
    *,
    stop: Sequence[str] = (),
    stop_token_ids: Sequence[int] = (),
) -> Any:
    """One request's `vllm.SamplingParams`: its own seed, special tokens kept in the text
    (think tags may be special tokens), optional stop strings (left out of the text) and stop
    ids (beside the model's end of sequence)."""
    from vllm import SamplingParams

    return SamplingParams(
        temperature=sampling.temperature,
        top_p=sampling.top_p,
        top_k=-1,
        max_tokens=max_tokens,
        seed=seed,
        stop=list(stop) or None,
        stop_token_ids=list(stop_token_ids) or None,
        skip_special_tokens=False,
    )


class VLLMBackend:
    """vLLM's offline engine (GPUs); per-request seeds make samples reproducible. It takes the
    request list in large calls (`batch_all`; see `runner.CALL_REQUESTS`): vLLM schedules it
    itself, keeping its batch full."""

    batch_all = True

    def __init__(self, llm: Any, tokenizer: Any, max_context: int | None = None) -> None:
        self.llm = llm
        self.tokenizer = tokenizer
        self.max_context = max_context  # --max-model-len; None: vLLM checks its own

    def generate(
        self,
        prompts: Sequence[str],
        sampling: Sampling,
        keys: Sequence[str],
        on_tokens: TokenCallback | None = None,
    ) -> list[Generation]:
        params = [
            vllm_params(sampling, request_seed(sampling.seed, key), sampling.max_new_tokens)
            for key in keys
        ]
        outputs = self.llm.generate(list(prompts), params, use_tqdm=False)
        results = []
        for out in outputs:
            completion = out.outputs[0]
            reason = "length" if completion.finish_reason == "length" else "stop"
            ids = tuple(completion.token_ids)
            if ids and reason == "stop" and ids[-1] == self.tokenizer.eos_token_id:
                ids = ids[:-1]
            results.append(Generation(text=completion.text, token_ids=ids, finish_reason=reason))
            if on_tokens:
                on_tokens(len(ids))
        return results


def make_backend(
    name: str,
    model: str,
    tokenizer: Any,
    *,
    device: str | None = None,
    dtype: str | None = None,
    seed: int = 0,
    device_map: str | None = None,
    vllm: VLLMSettings | None = None,
) -> Backend:
    """The named backend for a resolved model path (device and dtype checked first)."""
    if name == "vllm":
        settings = vllm or VLLMSettings()
        llm = load_vllm(model, seed, settings, dtype)
        return VLLMBackend(llm, tokenizer, settings.max_model_len)
    if name != "transformers":
        raise TraacError(f"backend {name!r}: use one of {', '.join(BACKENDS)}")
    target, device_map = resolve_placement(device, device_map)
    lm = load_model(model, device=target, dtype=resolve_dtype(dtype, target), device_map=device_map)
    return TransformersBackend(lm, tokenizer)
