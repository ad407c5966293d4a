"""TRL's `VLLMClient` (server mode: `trl vllm-serve` on GPUs of its own), faked at the client.

Each method has the real client's parameters (the tests compare them with the installed TRL's)
and answers as the server would, from a fake `LLM` on the model TRL names: generation returns
the n completions of each prompt prompt-major, weight updates stream every announced tensor
into the engine's model. Nothing is sent over a network.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from . import EVENTS, LLM, SamplingParams

SERVED: dict[str, str] = {}  # "model": the path the fake server loads (set by the test)


class FakeVLLMClient:
    def __init__(
        self,
        base_url: str | None = None,
        host: str = "0.0.0.0",
        server_port: int = 8000,
        group_port: int = 51216,
        connection_timeout: float = 0.0,
    ) -> None:
        self.base_url = base_url or f"http://{host}:{server_port}"
        self.engine = LLM(model=SERVED["model"], seed=0)
        self.communicator_ready = False
        EVENTS.append({"call": "VLLMClient", "base_url": self.base_url})

    def get_server_info(self) -> dict:
        return {"model_config": {"logprobs_mode": "processed_logprobs"}}

    def init_communicator(self, device: Any = 0) -> None:
        self.communicator_ready = True

    def generate(
        self,
        prompts: list[str] | list[list[int]],
        features: list[dict | None] | None = None,
        n: int = 1,
        repetition_penalty: float = 1.0,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        min_p: float = 0.0,
        max_tokens: int = 16,
        logprobs: int | None = 0,
        structured_outputs_regex: str | None = None,
        generation_kwargs: dict | None = None,
    ) -> dict[str, list]:
        if features is not None or structured_outputs_regex is not None:
            raise NotImplementedError("vLLM fake server: images and structured outputs")
        params = SamplingParams(
            n=n, repetition_penalty=repetition_penalty, temperature=temperature, top_p=top_p,
            top_k=top_k, min_p=min_p, max_tokens=max_tokens, logprobs=logprobs,
            **(generation_kwargs or {}),
        )  # fmt: skip
        requests = [p if isinstance(p, str) else {"prompt_token_ids": p} for p in prompts]
        outputs = self.engine.generate(requests, params, use_tqdm=False)
        choices = [c for o in outputs for c in o.outputs]  # prompt-major, as the server answers
        return {
            "prompt_ids": [o.prompt_token_ids for o in outputs],
            "completion_ids": [list(c.token_ids) for c in choices],
            "logprobs": [[[lp.logprob for lp in pos.values()] for pos in c.logprobs]
                         for c in choices],
            "logprob_token_ids": [[list(pos) for pos in c.logprobs] for c in choices],
        }  # fmt: skip

    def update_named_params(
        self, metadata: list[tuple[str, str, list[int]]], named_params: Iterator[tuple[str, Any]]
    ) -> None:
        if not self.communicator_ready:
            raise RuntimeError("vLLM fake server: update_named_params before init_communicator")
        names = [name for name, _, _ in metadata]
        streamed = list(named_params)
        if [name for name, _ in streamed] != names:
            raise RuntimeError("vLLM fake server: streamed tensors differ from the metadata")
        self.engine.llm_engine.model_executor.driver_worker.model_runner.model.load_weights(
            streamed
        )

    def reset_prefix_cache(self) -> None:
        self.engine.reset_prefix_cache()

    def close_communicator(self) -> None:
        self.communicator_ready = False
