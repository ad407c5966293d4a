"""Griffe extension: a dataclass documents each field once, in its `help` (what `--help` prints).

A class whose docstring holds the line `Parameters: its fields' help` has that line replaced by a
markdown list of the fields its own body declares, in order, each with its type, default and
help, read off the imported class (`TRAACConfig`, the one such page: TRL would write each field
twice, in the class docstring and in its help).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import logging
from typing import Any

import griffe

FROM_HELP = "Parameters: its fields' help"
# peft imports bitsandbytes, which logs a missing optional package on AVX512-BF16 CPUs; kept out
# of the build's output, as `traac.cli` keeps it out of the commands'
logging.getLogger("bitsandbytes.backends.cpu.ops").setLevel(logging.ERROR)


def fields_help(path: str) -> str:
    """The markdown list of the fields the dataclass at `path` declares in its own body."""
    module, _, name = path.rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    lines = []
    for f in (fields[name] for name in inspect.get_annotations(cls) if name in fields):
        factory = f.default_factory
        default = factory() if factory is not dataclasses.MISSING else f.default
        lines.append(f"- `{f.name}` (`{f.type}`, default `{default!r}`): {f.metadata['help']}")
    return "\n".join(lines)


class FieldsFromHelp(griffe.Extension):
    """Writes the field list into each docstring that asks for it, before it is parsed."""

    def on_instance(self, *, obj: griffe.Object, **_: Any) -> None:
        if obj.docstring is not None and FROM_HELP in obj.docstring.value.split("\n"):
            fields = f"**Parameters**\n\n{fields_help(obj.path)}"
            obj.docstring.value = obj.docstring.value.replace(FROM_HELP, fields)
