"""Dataset specs: ``name?key=value&...``, the one string that names every benchmark and training
set, and its options read as numbers where they are numbers."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl

from traac.errors import TraacError


def split_spec(spec: str) -> tuple[str, dict[str, str]]:
    """``name?key=value&...`` -> (name, params). A spec without ``?`` has no params."""
    if "?" not in spec:
        return spec, {}
    name, query = spec.split("?", 1)
    try:
        params = dict(parse_qsl(query, keep_blank_values=True, strict_parsing=True))
    except ValueError:
        raise TraacError(
            f"dataset {spec!r}: cannot parse {query!r} as key=value&key=value"
        ) from None
    return name, params


def spec_options(
    spec: str, params: dict[str, str], default_size: int | None = None, n: int | None = None
):
    """Typed params: ints and floats parsed, the rest kept as text (reasoning-gym configs)."""
    out: dict[str, Any] = {}
    for key, raw in params.items():
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    for key in ("size", "seed", "n"):
        if key in out and not isinstance(out[key], int):
            raise TraacError(f"dataset {spec!r}: {key}={params[key]!r} is not an integer")
    if default_size is not None:
        out.setdefault("size", default_size)
    if n is not None:
        out.setdefault("n", n)
        unknown = set(out) - {"n", "seed"}
        if unknown:
            raise TraacError(f"dataset {spec!r}: unknown option(s) {sorted(unknown)}; use n, seed")
    return out
