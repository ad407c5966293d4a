"""Tiny random models and a character-level tokenizer for the tests.

Built in memory in well under a second, so no test downloads anything; what differs between
tests (special tokens, merges, context length, attention sharpness) is a parameter here.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from tokenizers import AddedToken, Tokenizer, decoders, models
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
    PreTrainedTokenizerFast,
    Qwen3Config,
    Qwen3ForCausalLM,
)

ARCHS = {"qwen3": (Qwen3Config, Qwen3ForCausalLM), "llama": (LlamaConfig, LlamaForCausalLM)}
SPECIALS = ("<pad>", "<unk>", "<think>", "</think>")
CHARS = sorted(set(string.printable))
VOCAB_SIZE = len(SPECIALS) + len(CHARS)  # of the default char_tokenizer()


def char_tokenizer(
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


def tiny_model(
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


def save_tiny(path: Path, tokenizer: PreTrainedTokenizerFast, **model_options: Any) -> Path:
    """A model directory loadable like a hub model: `tokenizer` and `tiny_model(**model_options)`
    sized to it."""
    tiny_model(vocab_size=len(tokenizer), **model_options).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
