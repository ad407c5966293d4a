"""A CPU stand-in for exactly the part of vLLM that traac and TRL 1.16 call, installed as the
`vllm` module (`install`), backed by a transformers model. vLLM itself needs CUDA.

What it keeps of vLLM's behaviour, so that a caller that misuses vLLM fails here too:
- `LLM(model=path, ...)` takes only keyword arguments the real `LLM` (and its `EngineArgs`)
  accepts (`signatures.py` reads them off the pinned release); `generate` takes prompts as text
  or `{"prompt_token_ids": ids}`, one `SamplingParams` or one per prompt, and returns
  `RequestOutput`s with `prompt_token_ids` and `outputs` (`CompletionOutput`: text, token_ids
  ending with the stop token, finish_reason, stop_reason, logprobs as `{id: Logprob}` per token,
  processed by temperature as TRL's `logprobs_mode="processed_logprobs"` asks).
- Sleep mode: `sleep(level)` releases the KV cache, and the weights (level 2: discarded, so
  generating needs them woken and every weight loaded again); `wake_up(tags)` brings back
  "weights" and/or "kv_cache"; loading into sleeping weights or generating while asleep raises.
- TRL's colocated weight sync: `llm.llm_engine.model_executor.driver_worker.model_runner.model`
  `.load_weights([(name, tensor)])`, names as vLLM's model expects (unknown names raise), and
  `reset_prefix_cache()`.
- One random stream per engine, seeded by `LLM(seed=...)`: engines given the same seed and the
  same calls (a tensor-parallel group) return the same tokens; a request's own `seed` starts a
  stream of its own.

Everything that reaches it is appended to `EVENTS` (one dict per call), which the tests read.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import torch
from transformers import DynamicCache

from .signatures import accepted

EVENTS: list[dict[str, Any]] = []  # every call that reached the fake, in order
INSTANCES: list[LLM] = []


class SamplingParams:
    """vLLM's per-request settings; only fields of the real class are accepted."""

    def __init__(self, **options: Any) -> None:
        unknown = set(options) - accepted("SamplingParams")
        if unknown:
            raise TypeError(f"SamplingParams got unexpected fields {sorted(unknown)}")
        defaults = {"n": 1, "temperature": 1.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0,
                    "repetition_penalty": 1.0, "max_tokens": 16, "seed": None, "stop": None,
                    "stop_token_ids": None, "logprobs": None, "skip_special_tokens": True,
                    "structured_outputs": None}  # fmt: skip
        self.__dict__.update({**defaults, **options})


@dataclass
class StructuredOutputsParams:
    regex: str | None = None


@dataclass
class Logprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list[int]
    cumulative_logprob: float | None
    logprobs: list[dict[int, Logprob]] | None
    finish_reason: str | None = None
    stop_reason: int | str | None = None


@dataclass
class RequestOutput:
    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput] = field(default_factory=list)
    finished: bool = True


class _Weights:
    """`model_runner.model`: what TRL's colocated sync loads each tensor into."""

    def __init__(self, engine: LLM) -> None:
        self.engine = engine

    def load_weights(self, weights: Any) -> set[str]:
        engine = self.engine
        if not engine.awake["weights"]:
            raise RuntimeError("vLLM fake: load_weights into sleeping weights (wake_up first)")
        params = dict(engine.model.named_parameters())
        loaded = set()
        with torch.no_grad():
            for name, tensor in weights:
                if name not in params:
                    raise KeyError(f"vLLM fake: no weight named {name!r}")
                params[name].copy_(tensor.detach().to(params[name].device, params[name].dtype))
                loaded.add(name)
        engine.loaded |= loaded
        EVENTS.append({"call": "load_weights", "names": sorted(loaded)})
        return loaded


class LLM:
    """vLLM's offline engine, on a transformers model (float32, CPU)."""

    def __init__(
        self,
        model: str,
        *,
        tokenizer: str | None = None,
        trust_remote_code: bool = False,
        tensor_parallel_size: int = 1,
        dtype: str = "auto",
        quantization: str | None = None,
        seed: int = 0,
        gpu_memory_utilization: float = 0.92,
        **engine_args: Any,
    ) -> None:
        from traac.common.models import load_model, load_tokenizer

        unknown = set(engine_args) - accepted("LLM.__init__")
        if unknown:
            raise TypeError(f"LLM got unexpected keyword arguments {sorted(unknown)}")
        if quantization is not None:
            raise NotImplementedError(f"vLLM fake: quantization={quantization!r}")
        self.options = {
            "seed": seed,
            "dtype": dtype,
            "tensor_parallel_size": tensor_parallel_size,
            "gpu_memory_utilization": gpu_memory_utilization,
            **engine_args,
        }
        self.model = load_model(model, device=torch.device("cpu"), dtype=torch.float32)
        self.tokenizer = load_tokenizer(tokenizer or model)
        self.generator = torch.Generator().manual_seed(seed)
        self.sleep_mode = bool(engine_args.get("enable_sleep_mode", False))
        self.awake = {"weights": True, "kv_cache": True}
        self.loaded = {name for name, _ in self.model.named_parameters()}  # valid weights
        self.calls: list[int] = []  # requests per generate call
        runner = SimpleNamespace(model=_Weights(self))
        self.llm_engine = SimpleNamespace(
            model_executor=SimpleNamespace(driver_worker=SimpleNamespace(model_runner=runner)),
            model_config=SimpleNamespace(max_model_len=engine_args.get("max_model_len")),
        )
        INSTANCES.append(self)
        EVENTS.append({"call": "LLM", "model": model, **self.options})

    # ---------------------------------------------------------------- sleep mode

    def sleep(self, level: int = 1, mode: str = "abort") -> None:
        if not self.sleep_mode:
            raise RuntimeError("vLLM fake: sleep() needs LLM(enable_sleep_mode=True)")
        self.awake = {"weights": False, "kv_cache": False}
        if level == 2:
            self.loaded = set()  # level 2 discards the weights: they must be loaded again
        EVENTS.append({"call": "sleep", "level": level})

    def wake_up(self, tags: list[str] | None = None) -> None:
        for tag in tags or ["weights", "kv_cache"]:
            self.awake[tag] = True
        EVENTS.append({"call": "wake_up", "tags": tags})

    def reset_prefix_cache(
        self, reset_running_requests: bool = False, reset_connector: bool = False
    ) -> bool:
        EVENTS.append({"call": "reset_prefix_cache"})
        return True

    # ---------------------------------------------------------------- generation

    def generate(
        self,
        prompts: Any,
        sampling_params: Any = None,
        use_tqdm: bool = True,
        lora_request: Any = None,
    ) -> list[RequestOutput]:
        if not all(self.awake.values()):
            raise RuntimeError(f"vLLM fake: generate while asleep ({self.awake})")
        missing = {n for n, _ in self.model.named_parameters()} - self.loaded
        if missing:
            raise RuntimeError(f"vLLM fake: generate with {len(missing)} weights never loaded")
        prompts = list(prompts) if isinstance(prompts, list | tuple) else [prompts]
        params = sampling_params or SamplingParams()
        params = list(params) if isinstance(params, list | tuple) else [params] * len(prompts)
        ids = [
            p["prompt_token_ids"]
            if isinstance(p, dict)
            else self.tokenizer.encode(p, add_special_tokens=False)
            for p in prompts
        ]
        self.calls.append(len(prompts))
        outputs = [
            RequestOutput(str(k), None if isinstance(p, dict) else p, list(i), self._sample(i, s))
            for k, (p, i, s) in enumerate(zip(prompts, ids, params, strict=True))
        ]
        EVENTS.append({
            "call": "generate",
            "prompts": [list(i) for i in ids],
            "max_tokens": [s.max_tokens for s in params],
            "n": [s.n for s in params],
            "completions": [[c.token_ids for c in o.outputs] for o in outputs],
        })  # fmt: skip
        return outputs

    def _sample(self, prompt: list[int], params: Any) -> list[CompletionOutput]:
        if params.top_k not in (0, -1) or params.min_p or params.repetition_penalty != 1.0:
            raise NotImplementedError("vLLM fake: top_k, min_p and repetition_penalty")
        generator = self.generator
        if params.seed is not None:
            generator = torch.Generator().manual_seed(params.seed)
        stops = set(params.stop_token_ids or []) | {self.tokenizer.eos_token_id}
        configured = self.model.generation_config.eos_token_id
        stops |= set(configured if isinstance(configured, list) else [configured]) - {None}
        return [self._one(prompt, params, generator, stops, k) for k in range(params.n)]

    def _one(
        self, prompt: list[int], params: Any, generator: torch.Generator, stops: set, index: int
    ) -> CompletionOutput:
        out: list[int] = []
        logprobs: list[dict[int, Logprob]] = []
        text, finish, reason = "", "length", None
        step, cache = list(prompt), DynamicCache(config=self.model.config)
        with torch.no_grad():
            while len(out) < params.max_tokens:
                logits = self.model(torch.tensor([step]), past_key_values=cache, use_cache=True)
                logits = logits.logits[0, -1].float()
                if params.temperature == 0:
                    token = int(logits.argmax())
                    processed = logits
                else:
                    processed = logits / params.temperature
                    probs = torch.softmax(processed, dim=-1)
                    if params.top_p < 1:
                        probs = _nucleus(probs, params.top_p)
                    token = int(torch.multinomial(probs, 1, generator=generator))
                if params.logprobs is not None:
                    lp = torch.log_softmax(processed, dim=-1)
                    rank = int((lp > lp[token]).sum()) + 1
                    logprobs.append({token: Logprob(float(lp[token]), rank)})
                out.append(token)
                step = [token]
                if token in stops:
                    finish, reason = "stop", token
                    text = self.tokenizer.decode(out[:-1], skip_special_tokens=False)
                    break
                text = self.tokenizer.decode(out, skip_special_tokens=False)
                hit = next((s for s in params.stop or [] if s in text), None)
                if hit is not None:
                    finish, reason, text = "stop", hit, text[: text.index(hit)]
                    break
        return CompletionOutput(
            index, text, out, None, logprobs if params.logprobs is not None else None,
            finish, reason,
        )  # fmt: skip


def _nucleus(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """The smallest set of most likely tokens whose mass reaches `top_p`, renormalised."""
    ordered, order = probs.sort(descending=True)
    keep = ordered.cumsum(0) - ordered < top_p
    kept = torch.zeros_like(probs).scatter_(0, order[keep], ordered[keep])
    return kept / kept.sum()


def reset() -> None:
    """Forget every engine and call (between runs of one process)."""
    EVENTS.clear()
    INSTANCES.clear()


def module() -> ModuleType:
    """This package as the `vllm` module, with its `vllm.sampling_params` submodule."""
    this = sys.modules[__name__]
    this.sampling_params = SimpleNamespace(
        SamplingParams=SamplingParams, StructuredOutputsParams=StructuredOutputsParams
    )
    return this


def install(setitem: Any = None) -> list[tuple[Any, str, Any]]:
    """Make `import vllm` and TRL's vLLM backend (colocate mode, and server mode through
    `client.FakeVLLMClient`) use this fake; returns what it replaced, for `uninstall`.
    `setitem(mapping, key, value)` (pytest's `monkeypatch.setitem`) records the sys.modules
    changes for undoing; without it they stay."""
    import trl.generation.vllm_generation as backend

    from .client import FakeVLLMClient

    vllm = module()
    put = setitem or (lambda mapping, key, value: mapping.__setitem__(key, value))
    put(sys.modules, "vllm", vllm)
    put(sys.modules, "vllm.sampling_params", vllm.sampling_params)
    replaced = []
    for name, value in {
        "is_vllm_available": lambda min_version=None: True,
        "LLM": LLM,
        "SamplingParams": SamplingParams,
        "StructuredOutputsParams": StructuredOutputsParams,
        "RequestOutput": RequestOutput,
        "VLLMClient": FakeVLLMClient,
    }.items():
        replaced.append((backend, name, getattr(backend, name, None)))
        setattr(backend, name, value)
    return replaced


def uninstall(replaced: list[tuple[Any, str, Any]]) -> None:
    for owner, name, value in replaced:
        if value is None:
            delattr(owner, name)
        else:
            setattr(owner, name, value)


HERE = Path(__file__).resolve().parent
