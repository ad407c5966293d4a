"""Griffe extension: docstrings in TRL's (doc-builder's) style render as markdown.

`TRAACConfig` documents its fields as TRL documents `GRPOConfig`: a `Parameters:` block of
`name (type, *optional*, defaults to value):` entries, grouped under `> Parameters that ...`
lines. The Google-style parser cannot read that block (and strict builds fail on its warnings),
so before parsing it becomes a markdown list: each group a bold line, each entry a bullet.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ENTRY = re.compile(r"^(?P<names>[\w, ]+) \((?P<kind>.*)\):$")


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
        if obj.docstring is not None:
            obj.docstring.value = convert(obj.docstring.value)
