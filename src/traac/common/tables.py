"""One table type for every report: built once from formatted cells, written as markdown into
files, and drawn by the commands on a terminal (`traac.console.print_table`)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, field

from traac.errors import TraacError


@dataclass(frozen=True)
class Table:
    """Rows of formatted cells under named columns; the first column is left-aligned (labels),
    the others right-aligned (numbers) unless `left` names them."""

    columns: Sequence[str]
    rows: list[Sequence[str]] = field(default_factory=list)
    title: str = ""
    left: frozenset[int] = frozenset({0})

    def __post_init__(self) -> None:
        for row in self.rows:
            if len(row) != len(self.columns):
                raise TraacError(
                    f"table {self.title!r}: a row has {len(row)} cells for "
                    f"{len(self.columns)} columns"
                )

    def add(self, *cells: str) -> None:
        if len(cells) != len(self.columns):
            raise TraacError(
                f"table {self.title!r}: {len(cells)} cells for {len(self.columns)} columns"
            )
        self.rows.append(cells)

    def markdown(self) -> str:
        """GitHub markdown, pipes inside cells escaped."""
        head = "| " + " | ".join(_cell(c) for c in self.columns) + " |"
        rule = "|" + "|".join("---" if k in self.left else "---:" for k in range(len(self.columns)))
        body = ["| " + " | ".join(_cell(c) for c in row) + " |" for row in self.rows]
        return "\n".join([head, rule + "|", *body])

    def html(self) -> str:
        """An HTML `<table>` (cells escaped; number columns get class `num`)."""

        def cells(tag: str, row: Sequence[str]) -> str:
            return "".join(
                f"<{tag}{'' if k in self.left else ' class=num'}>{html.escape(str(c))}</{tag}>"
                for k, c in enumerate(row)
            )

        caption = f"<caption>{html.escape(self.title)}</caption>" if self.title else ""
        body = "".join(f"<tr>{cells('td', row)}</tr>" for row in self.rows)
        return (
            f"<table>{caption}<thead><tr>{cells('th', self.columns)}</tr></thead>"
            f"<tbody>{body}</tbody></table>"
        )


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def fmt(value: float | None, digits: int = 1, suffix: str = "") -> str:
    """A number for a table cell; None (no data) as an en dash."""
    return "–" if value is None else f"{value:.{digits}f}{suffix}"


def signed(value: float | None, digits: int = 1, suffix: str = "") -> str:
    """A change for a table cell, with its sign; None as an en dash."""
    return "–" if value is None else f"{value:+.{digits}f}{suffix}"
