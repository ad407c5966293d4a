"""Load a causal LM and its tokenizer by local path or hub id.

Every command accepts the same model, device and dtype arguments, checked before any weight is
read; errors are one line naming the model and the fix. (Names such as `testbed` and
`smollm2`, and `.gguf` files, are resolved to a directory first, by
`traac.pipelines.model_registry.resolve_model`.) A model may carry the prompt style it was
trained with (`traac_prompt_style` in its `config.json`), which evaluation and generation use
unless told otherwise. A LoRA adapter directory (what `traac train` with `use_peft` saves:
`adapter_config.json` naming its base) is a model too: its config and prompt style
are its base's, and it loads as the base with the adapter merged in.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import json
from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from traac.common.threads import set_threads
from traac.errors import TraacError, first_line

PROMPT_STYLE_KEY = "traac_prompt_style"
ADAPTER_CONFIG = "adapter_config.json"  # peft's name for an adapter's config
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# accelerate's ways of spreading a model over the visible devices (`device_map`).
DEVICE_MAPS = ("auto", "balanced", "balanced_low_0", "sequential")


def resolve_model_path(model: str) -> str:
    """A local model directory (checked) or a hub id."""
    if not model.strip():
        raise TraacError("model: empty; pass a model directory, a hub id or testbed")
    path = Path(model).expanduser()
    if path.exists():
        if not path.is_dir():
            raise TraacError(f"model {model!r} is a file; pass the model's directory")
        if (path / ADAPTER_CONFIG).is_file():
            adapter_base(str(path))  # the base must be loadable too
        elif not (path / "config.json").exists():
            raise TraacError(f"model {model!r}: no config.json in that directory")
        return str(path)
    if model.startswith((".", "/", "~")) or model.count("/") > 1:
        raise TraacError(f"model {model!r}: no such directory")
    return model  # a hub id; loading says if it is unreachable


def adapter_base(model: str) -> str | None:
    """The base model of a LoRA adapter directory (checked like any `--model`), else None."""
    config = Path(model).expanduser() / ADAPTER_CONFIG
    if not config.is_file():
        return None
    try:
        base = json.loads(config.read_text()).get("base_model_name_or_path")
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
        raise TraacError(f"model {model!r}: {ADAPTER_CONFIG} is not a JSON mapping") from None
    if not isinstance(base, str) or not base:
        raise TraacError(f"model {model!r}: {ADAPTER_CONFIG} names no base_model_name_or_path")
    try:
        return resolve_model_path(base)
    except TraacError as err:
        raise TraacError(f"adapter {model!r}: its base: {err}") from None


# The weight files `save_pretrained` writes (one file, or an index naming its shards), and peft's.
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
ADAPTER_WEIGHT_FILES = ("adapter_model.safetensors", "adapter_model.bin")
# A tokenizer's vocabulary, in any of the forms transformers saves (a directory with none of them
# loads a tokenizer that maps text to nothing, and generation fails far from the cause).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt", "spiece.model",
                   "sentencepiece.bpe.model")  # fmt: skip


def missing_model_files(directory: str | Path) -> str | None:
    """What keeps `directory` from loading as a model, in words (None: a readable config and
    every weight file it needs, or an adapter's config and weights). Reads no weights."""
    path = Path(directory)
    if (path / ADAPTER_CONFIG).is_file():
        names, config = ADAPTER_WEIGHT_FILES, ADAPTER_CONFIG
    else:
        names, config = WEIGHT_FILES, "config.json"
    try:
        json.loads((path / config).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return f"no {config}"
    except (json.JSONDecodeError, UnicodeDecodeError):
        return f"{config} is not JSON"
    for name in names:
        if (path / name).is_file() and (path / name).stat().st_size > 0:
            return None
        index = path / f"{name}.index.json"
        if index.is_file():
            shards = set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values())
            absent = sorted(s for s in shards if not (path / s).is_file())
            return f"{index.name} names absent shards ({', '.join(absent)})" if absent else None
    return f"no weights ({' or '.join(names)}, or a sharded index)"


def load_config(model: str) -> Any:
    """The model's config (no weights); a broken config.json is one line naming it."""
    path = adapter_base(model) or resolve_model_path(model)
    try:
        return AutoConfig.from_pretrained(path)
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise TraacError(f"model {model!r}: cannot read its config ({first_line(err)})") from None


def prompt_style_of(model: str) -> str | None:
    """The prompt style a local model was trained with, if it says (never loads weights)."""
    path = Path(adapter_base(model) or resolve_model_path(model)) / "config.json"
    if not path.is_file():
        return None
    try:
        style = json.loads(path.read_text()).get(PROMPT_STYLE_KEY)
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
        return None
    return style if isinstance(style, str) else None


def resolve_device(name: str | None, flag: str = "--device") -> torch.device:
    """`auto`/None: cuda if a GPU is visible, else cpu; a named device must exist here."""
    if name in (None, "", "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        raise TraacError(f"{flag} {name!r}: not a device; use cpu, cuda, cuda:N or auto") from None
    if device.type == "cuda":
        count = torch.cuda.device_count()
        if not count:
            raise TraacError(f"{flag} {name}: no CUDA GPU is visible here; use {flag} cpu")
        if device.index is not None and device.index >= count:
            raise TraacError(f"{flag} {name}: only {count} GPU(s) visible (cuda:0..{count - 1})")
    elif device.type != "cpu" and not _backend_available(device.type):
        raise TraacError(f"{flag} {name}: the {device.type} backend is not available here")
    return device


def resolve_placement(
    device: str | None, device_map: str | None
) -> tuple[torch.device, str | None]:
    """Where a model goes, checked before any weight is read: one device (`--device`), or
    spread by accelerate over the visible devices (`--device-map`: one of DEVICE_MAPS, or a
    single device) for a model that does not fit one. Returns the device its inputs go to
    (a map's first device; the GPU when a strategy has one) and the map, if any. On a
    CPU-only machine every strategy places the whole model on the CPU."""
    if device_map is None:
        return resolve_device(device), None
    if device not in (None, "", "auto"):
        raise TraacError(
            f"--device {device} and --device-map {device_map}: pass one (the map places the "
            "model itself)"
        )
    if device_map in DEVICE_MAPS:
        if importlib.util.find_spec("accelerate") is None:
            raise TraacError(f"--device-map {device_map} needs accelerate: pip install accelerate")
        return resolve_device(None), device_map
    try:
        torch.device(device_map)
    except (RuntimeError, TypeError):
        raise TraacError(
            f"--device-map {device_map!r}: use one of {', '.join(DEVICE_MAPS)} or a device "
            "(cpu, cuda:N)"
        ) from None
    first = resolve_device(device_map, "--device-map")
    return first, str(first)


def input_device(model: Any) -> torch.device:
    """Where a model's inputs go: its input embeddings' device (the first of a split model)."""
    return model.get_input_embeddings().weight.device


def cache_kwargs(module: Any, cache: Any) -> dict[str, Any]:
    """A KV cache as the keyword a model's forward takes it by: `cache` from transformers 5.24
    (where `past_key_values` is deprecated, to go in 5.40), `past_key_values` before."""
    return {_cache_keyword(type(module)): cache}


@functools.cache
def _cache_keyword(module_type: type) -> str:
    takes = inspect.signature(module_type.forward).parameters
    return "cache" if "cache" in takes else "past_key_values"


def _backend_available(kind: str) -> bool:
    backend = getattr(torch, kind, None) or getattr(torch.backends, kind, None)
    return bool(getattr(backend, "is_available", lambda: False)())


def resolve_dtype(name: str | None, device: torch.device) -> torch.dtype:
    """`None`: bfloat16 on a GPU, float32 elsewhere; else one of DTYPES."""
    if name is None:
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if name not in DTYPES:
        raise TraacError(f"--dtype {name!r}: use one of {', '.join(DTYPES)}")
    return DTYPES[name]


def load_tokenizer(model: str) -> Any:
    """The model's tokenizer (an adapter directory's own if it holds one, else its base's)."""
    path = resolve_model_path(model)
    base = adapter_base(path)
    if base is not None and not (Path(path) / "tokenizer_config.json").is_file():
        path = base
    local = Path(path).expanduser()
    if (
        local.is_dir()
        and not any((local / name).is_file() for name in TOKENIZER_FILES)
        and not any(local.glob("*.tiktoken"))
    ):
        raise TraacError(
            f"model {model!r}: no tokenizer files in {path} ({', '.join(TOKENIZER_FILES[:3])}, "
            "...); save the tokenizer there too (tokenizer.save_pretrained)"
        )
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise TraacError(
            f"model {model!r}: cannot load its tokenizer ({first_line(err)})"
        ) from None
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_model(
    model: str,
    *,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
    num_threads: int | None = None,
    device_map: str | None = None,
) -> Any:
    """The model in eval mode on `device` (auto), in `dtype` (see `resolve_dtype`); with a
    `device_map` (see `resolve_placement`), spread by accelerate as it loads. An adapter
    directory loads as its base with the adapter merged in (inference at the base's speed)."""
    path = resolve_model_path(model)
    base = adapter_base(path)
    if device_map is None:
        target = device if isinstance(device, torch.device) else resolve_device(device)
    else:
        target = resolve_placement(None, device_map)[0]
    placement = {} if device_map is None else {"device_map": device_map}
    try:
        lm = AutoModelForCausalLM.from_pretrained(
            base or path, dtype=dtype or resolve_dtype(None, target), **placement
        )
        if base is not None:
            lm = merge_adapter(lm, path)
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise TraacError(f"model {model!r}: cannot load it ({first_line(err)})") from None
    set_threads(num_threads)
    return (lm if device_map is not None else lm.to(target)).eval()


def merge_adapter(lm: Any, adapter: str) -> Any:
    """`lm` with the LoRA adapter saved in `adapter` folded into its weights (peft)."""
    from peft import PeftModel  # imported only when an adapter is loaded

    return PeftModel.from_pretrained(lm, adapter).merge_and_unload()
