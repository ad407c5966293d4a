"""Griffe extension: docstrings in TRL's (doc-builder's) style render as markdown.

`TRAACConfig` documents its fields as TRL documents `GRPOConfig`: a `Parameters:` block of
`name (type, *optional*, defaults to value):` entries, grouped under `> Parameters that ...`
lines. The Google-style parser cannot read that block (and strict builds fail on its warnings),
so before parsing it becomes a markdown list: each group a bold line, each entry a bullet.

A dataclass whose docstring holds the line `Parameters: its fields' help` documents each field
once, in its `help` (what `--help` prints): that line becomes the list of the fields its own body
declares, in order, each with its type, default and help, read off the imported class.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
from typing import Any

import griffe

ENTRY = re.compile(r"^(?P<names>[\w, ]+) \((?P<kind>.*)\):$")
FROM_HELP = "Parameters: its fields' help"


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


def convert(text: str) -> str:
    """`text` with its `Parameters:` block (4-space indented, doc-builder style) as markdown."""
    lines = text.split("\n")
    if "Parameters:" not in lines:
        return text
    start = lines.index("Parameters:")
    out, i = lines[:start], start + 1
    while i < len(lines) and (not lines[i].strip() or lines[i].startswith("    ")):
        line = lines[i][4:] if lines[i].startswith("    ") else ""
        if line.startswith("> "):
            group = [line[2:]]
            while i + 1 < len(lines) and lines[i + 1].startswith("    > "):
                i += 1
                group.append(lines[i][6:])
            out.append(f"**{' '.join(group)}**")
        elif line and not line.startswith(" "):
            head = line
            while not head.rstrip().endswith("):") and i + 1 < len(lines):
                if not lines[i + 1].startswith("    ") or lines[i + 1].startswith("        "):
                    break
                i += 1
                head += " " + lines[i].strip()
            match = ENTRY.match(head.rstrip())
            if match is None:  # prose inside the block
                out.append(head)
            else:
                names = ", ".join(f"`{n.strip()}`" for n in match["names"].split(","))
                kind = match["kind"].replace("*optional*, ", "").replace("defaults to", "default")
                described = []
                while i + 1 < len(lines) and lines[i + 1].startswith("        "):
                    i += 1
                    described.append(lines[i].strip())
                out.append(f"- {names} ({kind}): {' '.join(described)}")
        else:
            out.append(line.strip())
        i += 1
    return "\n".join([*out, *lines[i:]])


class DocBuilderDocstrings(griffe.Extension):
    """Rewrites each docstring's doc-builder `Parameters:` block before it is parsed."""

    def on_instance(self, *, obj: griffe.Object, **_: Any) -> None:
        if obj.docstring is None:
            return
        text = obj.docstring.value
        if FROM_HELP in text.split("\n"):
            text = text.replace(FROM_HELP, f"**Parameters**\n\n{fields_help(obj.path)}")
        obj.docstring.value = convert(text)
