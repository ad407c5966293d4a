"""What the commands show a person: rich on a terminal, plain lines everywhere else.

Only `traac.commands` imports this module; the library reports through `traac.common.progress`
and `logging`, and returns tables (`traac.common.tables.Table`) for the commands to draw.
Progress and logs go to stderr, so a command's stdout stays for its results.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from rich.cells import cell_len
from rich.console import Console
from rich.logging import RichHandler
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.progress import Progress as RichBars
from rich.table import Column
from rich.table import Table as RichTable
from rich.text import Text

from traac.common.progress import LogProgress, Progress
from traac.common.tables import Table
from traac.compression.compression import CompressionResult, StepRecord

PREVIEW_CHARS = 60


def make_console(stderr: bool = True, record: bool = False) -> Console:
    return Console(stderr=stderr, record=record)


def setup_logging(console: Console | None = None) -> None:
    """traac's own log lines on stderr: rich on a terminal, plain `time level message` else."""
    root = logging.getLogger("traac")
    if root.handlers:
        return
    console = console or make_console()
    if console.is_terminal:
        handler: logging.Handler = RichHandler(console=console, show_path=False, markup=False)
    else:
        handler = _Stderr()
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    root.propagate = False


class _Stderr(logging.StreamHandler):
    """A stream handler on whatever `sys.stderr` is when it writes (tools and tests swap it)."""

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


class RichProgress:
    """`traac.common.progress.Progress` drawn as rich bars (one live display at a time)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._bars: RichBars | None = None
        self._open = 0

    @contextlib.contextmanager
    def _live(self) -> Iterator[RichBars]:
        if self._bars is None:
            # On a narrow screen the counts and times stay whole and the info text wraps:
            # rich would otherwise cut every column to '5…'.
            def whole() -> Column:
                return Column(no_wrap=True, overflow="ignore")

            self._bars = RichBars(
                TextColumn("{task.description}", table_column=whole()),
                BarColumn(bar_width=20),
                MofNCompleteColumn(table_column=whole()),
                TimeElapsedColumn(table_column=whole()),
                TimeRemainingColumn(table_column=whole()),
                TextColumn("{task.fields[info]}", table_column=Column(overflow="fold", ratio=1)),
                console=self.console,
            )
            self._bars.start()
        self._open += 1
        try:
            yield self._bars
        finally:
            self._open -= 1
            if not self._open:
                self._bars.stop()
                self._bars = None

    @contextlib.contextmanager
    def task(self, description: str, total: int | None, completed: int = 0) -> Iterator[Any]:
        with self._live() as bars:
            # `info` from the start: on a terminal add_task draws the bars at once
            task_id = bars.add_task(description, total=total, completed=completed, info="")
            yield _RichTask(bars, task_id)

    @contextlib.contextmanager
    def phase(self, description: str) -> Iterator[None]:
        with self.console.status(description):
            yield


class _RichTask:
    def __init__(self, bars: RichBars, task_id: Any) -> None:
        self.bars = bars
        self.task_id = task_id
        self.bars.update(task_id, info="")

    def advance(self, n: int = 1) -> None:
        self.bars.advance(self.task_id, n)

    def update(self, *, completed: int | None = None, info: str | None = None) -> None:
        fields: dict[str, Any] = {}
        if completed is not None:
            fields["completed"] = completed
        if info is not None:
            fields["info"] = info
        self.bars.update(self.task_id, **fields)


def make_progress(console: Console | None = None) -> Progress:
    """Bars on a terminal; off one (nohup, a scheduler, `| tee`), steady plain log lines."""
    console = console or make_console()
    setup_logging(console)
    return RichProgress(console) if console.is_terminal else LogProgress()


def print_table(console: Console, table: Table) -> None:
    """A `Table` drawn to the console's width (`fit_table`)."""
    for part in fit_table(table, console.width):
        console.print(part)


def print_blocks(console: Console, blocks: Sequence[str | Table]) -> None:
    """A report as the console shows it: its lines as plain text, its tables drawn to fit
    (the same blocks make the markdown file)."""
    for block in blocks:
        if isinstance(block, Table):
            print_table(console, block)
        else:
            console.print(block, markup=False, highlight=False)


# Rich's box with its outer edge; then, before a table is split, without it (the edge's rules
# and outer padding give the numbers four more columns).
_STYLES: tuple[dict[str, bool], ...] = ({}, {"show_edge": False, "pad_edge": False})


def _frame(style: dict[str, bool], n: int) -> int:
    """Columns taken by rules and padding around `n` columns: one space each side of a cell
    and one rule between cells (and at both edges, unless `style` drops them)."""
    return 3 * n + 1 if not style else 3 * n - 3


def fit_table(table: Table, width: int) -> list[RichTable]:
    """A `Table` as rich tables no wider than `width` (cells are data, never markup).

    Headers wrap between words, never inside one; a number is never cut or wrapped, so each
    stays under its header. A table too wide even so loses its outer edge, then is split
    into parts of about as many columns, each repeating the label columns (`Table.left`) so
    every row of numbers keeps its label. A table that fits is drawn as rich draws it.
    """
    columns = [str(c) for c in table.columns]
    cells = [[str(row[k]) for row in table.rows] for k in range(len(columns))]
    least = [_least_width(columns[k], cells[k], k in table.left) for k in range(len(columns))]
    whole = [max([cell_len(columns[k]), *map(cell_len, cells[k])]) for k in range(len(columns))]
    labels = [k for k in range(len(columns)) if k in table.left]
    values = [k for k in range(len(columns)) if k not in table.left]
    for style in _STYLES:
        parts = _parts(labels, values, least, width, style)
        if len(parts) == 1:
            break
    out = []
    for n, part in enumerate(parts, start=1):
        shown = sorted(labels + part)
        widths = _share(width - _frame(style, len(shown)), shown, labels, least, whole)
        title = table.title + (f" (part {n} of {len(parts)})" if len(parts) > 1 else "")
        rich = RichTable(
            title=Text(title.strip()) if title.strip() else None, title_justify="left", **style
        )
        for k in shown:
            label = k in table.left
            rich.add_column(
                Text(columns[k]),
                justify="left" if label else "right",
                width=widths[k],
                overflow="fold" if label else "ellipsis",
            )
        for row in table.rows:
            rich.add_row(*(Text(str(row[k])) for k in shown))
        out.append(rich)
    return out


def _least_width(header: str, cells: Sequence[str], label: bool) -> int:
    """The narrowest a column may be: its longest header word, and its longest cell (a
    number) or longest word (a label, which may wrap)."""
    words = [*header.split(), *(w for c in cells for w in c.split())] if label else header.split()
    texts = words if label else [*words, *cells]
    return max([1, *map(cell_len, texts)])


def _parts(
    labels: list[int], values: list[int], least: list[int], width: int, style: dict[str, bool]
) -> list[list[int]]:
    """The value columns in runs that fit beside the labels at their least widths: as few
    runs as fit, of about as many columns each (at least one column each)."""

    def fits(part: list[int]) -> bool:
        shown = labels + part
        return sum(least[k] for k in shown) + _frame(style, len(shown)) <= width

    def pack(cap: int) -> list[list[int]]:
        parts: list[list[int]] = []
        for k in values:
            if parts and len(parts[-1]) < cap and fits([*parts[-1], k]):
                parts[-1].append(k)
            else:
                parts.append([k])
        return parts or [[]]

    greedy = pack(len(values))
    even = pack(-(-len(values) // len(greedy)))
    return even if len(even) == len(greedy) else greedy


def _share(
    room: int, shown: list[int], labels: list[int], least: list[int], whole: list[int]
) -> dict[int, int]:
    """Each column's width: its least, then the room left to columns it lets read on one
    line, labels first (a wrapped label makes a row two lines), then the headers that need
    least; what remains widens the labels."""
    widths = {k: least[k] for k in shown}
    spare = room - sum(widths.values())
    for k in sorted(shown, key=lambda k: (k not in labels, whole[k] - least[k])):
        if whole[k] - widths[k] <= spare:
            spare -= whole[k] - widths[k]
            widths[k] = whole[k]
    for k in labels:
        grow = max(0, min(whole[k] - widths[k], spare))
        widths[k] += grow
        spare -= grow
    return widths


def print_steps(
    console: Console,
    title: str,
    result: CompressionResult,
    steps: Sequence[StepRecord],
    scope: str,
) -> None:
    """The step table of one compressed trace (score, kept or evicted, a preview), then u, e
    and the token counts."""
    table = RichTable(title=Text(title), title_justify="left")
    for column in ("step", "tokens", "score"):  # numbers are never wrapped; the text is
        table.add_column(column, justify="right", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("text", overflow="fold")
    for step in steps:
        preview = Text(step.text.replace("\n", "⏎"))
        if len(preview) > PREVIEW_CHARS:
            preview = Text(preview.plain[: PREVIEW_CHARS - 1] + "…")
        if scope == "probe":  # the edge steps' scores also cover the probe's own text
            if step.index == 0:
                preview = Text("[opener] ", style="dim") + preview
            if step.index == len(steps) - 1:
                preview.append(" [+ auxiliary prompt, closer]", style="dim")
        status = Text("kept", style="green") if step.kept else Text("evicted", style="red")
        table.add_row(str(step.index), str(step.tokens), f"{step.score:.4g}", status, preview)
    console.print(table)
    console.print(Text(result.summary_line()))


def print_lines(console: Console, lines: Sequence[str]) -> None:
    """Plain lines (model text included) with no markup interpretation."""
    for line in lines:
        console.print(line, markup=False, highlight=False)
