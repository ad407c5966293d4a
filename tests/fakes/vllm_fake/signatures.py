"""The parameters of the vLLM calls the fake stands in for, read from vLLM's own source.

At test time they come from the installed vLLM where there is one, else from
`signatures.json` beside this file, written from the wheel of the release the `vllm` extra of
pyproject.toml pins (its highest allowed version). Regenerate it after changing that pin:

    python tests/fakes/vllm_fake/signatures.py      # pip download --no-deps, nothing installed

The source is parsed (`ast`), never imported: vLLM cannot be imported without CUDA.
"""

from __future__ import annotations

import ast
import datetime
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from functools import cache
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
LIST = HERE / "signatures.json"
PYPROJECT = HERE.parents[2] / "pyproject.toml"

# name -> (file in the vllm package, class, method or None for the class's fields).
SOURCES: dict[str, tuple[str, str, str | None]] = {
    "LLM.__init__": ("vllm/entrypoints/llm.py", "LLM", "__init__"),
    "LLM.generate": ("vllm/entrypoints/llm.py", "LLM", "generate"),
    "LLM.sleep": ("vllm/entrypoints/llm.py", "LLM", "sleep"),
    "LLM.wake_up": ("vllm/entrypoints/llm.py", "LLM", "wake_up"),
    "LLM.reset_prefix_cache": ("vllm/entrypoints/llm.py", "LLM", "reset_prefix_cache"),
    "EngineArgs": ("vllm/engine/arg_utils.py", "EngineArgs", None),
    "SamplingParams": ("vllm/sampling_params.py", "SamplingParams", None),
    "StructuredOutputsParams": ("vllm/sampling_params.py", "StructuredOutputsParams", None),
    "RequestOutput.__init__": ("vllm/outputs.py", "RequestOutput", "__init__"),
    "CompletionOutput": ("vllm/outputs.py", "CompletionOutput", None),
    "Logprob": ("vllm/logprobs.py", "Logprob", None),
    # TRL's colocated sync calls the model's own loader (Qwen3 stands for every architecture).
    "Qwen3ForCausalLM.load_weights": (
        "vllm/model_executor/models/qwen3.py", "Qwen3ForCausalLM", "load_weights"
    ),
}  # fmt: skip


def parameters(source: str, cls: str, method: str | None) -> list[str]:
    """A method's parameter names (without self; `**` marks a **kwargs), or a class's fields."""
    tree = ast.parse(source)
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    if method is None:
        return [
            s.target.id
            for s in node.body
            if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
        ]
    fn = next(n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == method)
    args = [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs]
    return args[1:] + (["**"] if fn.args.kwarg else [])


def read(reader: Callable[[str], str]) -> dict[str, list[str]]:
    """Every entry of SOURCES, each file read through `reader(path in the package)`."""
    return {name: parameters(reader(path), cls, m) for name, (path, cls, m) in SOURCES.items()}


def pinned_version() -> str:
    """The vLLM release the `vllm` extra pins: its `==` or its `<=` bound."""
    text = PYPROJECT.read_text()
    spec = re.search(r'^vllm = \["vllm([^"]*)"', text, re.M)
    if spec is None:
        raise ValueError("pyproject.toml: no vllm extra")
    bound = re.search(r"(?:==|<=)\s*([0-9][0-9.]*)", spec.group(1))
    if bound is None:
        raise ValueError(f"the vllm extra ({spec.group(1)}) pins no highest version")
    return bound.group(1)


@cache
def load() -> dict:
    """{"vllm": version, "from": where, "signatures": {name: parameters}}: the installed vLLM's
    (read from its files) if there is one, else the list kept beside this file."""
    try:
        dist = metadata.distribution("vllm")
    except metadata.PackageNotFoundError:
        return json.loads(LIST.read_text())
    signatures = read(lambda path: Path(dist.locate_file(path)).read_text())
    return {"vllm": dist.version, "from": "installed", "signatures": signatures}


def accepted(name: str) -> set[str]:
    """The keyword names the real call takes; `LLM.__init__` passes the rest to EngineArgs."""
    sigs = load()["signatures"]
    names = set(sigs[name]) - {"**"}
    if name == "LLM.__init__":
        names |= set(sigs["EngineArgs"])
    return names


def generate(wheel: Path | None = None) -> dict:
    """The list from `wheel` (downloaded for the pinned version when None), written to LIST."""
    version = pinned_version()
    with tempfile.TemporaryDirectory() as tmp:
        if wheel is None:
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", f"vllm=={version}",
                 "-d", tmp, "--quiet"],
                check=True,
            )  # fmt: skip
            wheel = next(Path(tmp).glob("vllm-*.whl"))
        with zipfile.ZipFile(wheel) as archive:
            signatures = read(lambda path: archive.read(path).decode())
    listing = {
        "vllm": version,
        "from": wheel.name,
        "generated": datetime.date.today().isoformat(),
        "regenerate": "python tests/fakes/vllm_fake/signatures.py",
        "signatures": signatures,
    }
    LIST.write_text(json.dumps(listing, indent=1) + "\n")
    return listing


if __name__ == "__main__":
    done = generate(Path(sys.argv[1]) if len(sys.argv) > 1 else None)
    print(f"{LIST}: vLLM {done['vllm']} ({done['from']}), {len(done['signatures'])} entries")
