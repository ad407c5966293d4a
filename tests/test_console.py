"""Console tables at 80 columns: the demo's and the report's, drawn to a fixed-width console,
keep every header word and every number whole, each under its row's label, each line <= 80."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from traac.common.tables import Table
from traac.compression.compression import CompressionResult, StepRecord
from traac.compression.segmentation import Step
from traac.console import RichProgress, fit_table, print_blocks, print_steps, print_table
from traac.evaluation.harness.results import summary_table
from traac.evaluation.harness.runner import EvalSettings, run_eval
from traac.evaluation.reports.report import budget_table, load_models, report_blocks
from traac.pipelines.demo import BinCompression, comparison_table, compression_table
from traac.pipelines.stages import TierRow

WIDTH = 80
BOX = "│┃"


def render(draw, width: int = WIDTH) -> str:
    """What a log file (a non-terminal console of that width) receives."""
    console = Console(file=io.StringIO(), width=width, force_terminal=False, color_system=None)
    draw(console)
    return console.file.getvalue()


def assert_fits(text: str, width: int = WIDTH) -> None:
    lines = text.splitlines()
    assert all(len(line) <= width for line in lines), max(lines, key=len)
    assert "…" not in text  # nothing cut


def assert_legible(table: Table, width: int = WIDTH) -> None:
    """`table` drawn alone at `width`: fits, every header word whole, and in each part each
    row is drawn as its labels then some of its cells in order (every number whole, on its
    row's line), the parts together holding each cell once."""
    text = render(lambda c: print_table(c, table), width)
    assert_fits(text, width)
    lines = text.splitlines()
    header_words = {w for line in lines if "┃" in line for w in line.strip(BOX).split() if w != "┃"}
    rows = [[c.strip() for c in line.strip().strip(BOX).split("│")] for line in lines]
    rows = [r for line, r in zip(lines, rows, strict=True) if "│" in line]
    labels = sorted(table.left)
    for k in range(len(rows) - 1, 0, -1):  # a wrapped label: its words go back to its row
        if not any(rows[k][len(labels) :]):
            rows[k - 1][: len(labels)] = [
                f"{a} {b}".strip() for a, b in zip(rows[k - 1], rows[k], strict=False)
            ][: len(labels)]
            del rows[k]
    for column in table.columns:
        assert set(column.split()) <= header_words, column
    assert rows and len(rows) % len(table.rows) == 0  # each part draws every row
    for k, row in enumerate(table.rows):
        cells = [str(c) for c in row]
        drawn = rows[k :: len(table.rows)]  # this row in each part
        for r in drawn:
            assert r[: len(labels)] == [cells[j] for j in labels], (r, cells)
            it = iter(cells)
            assert all(c in it for c in r), (r, cells)
        assert sum(len(r) - len(labels) for r in drawn) == len(cells) - len(labels), drawn


def make_budget_runs(root: Path) -> list[Path]:
    """Two models with a run without a budget and runs at two budgets, truncating and
    compressing, on one small tiered set: scored responses, as `traac eval --responses` and
    `--think-budget B [--compress-tau 0.4]` write them."""
    items = [
        {"id": f"{t}{k}", "question": f"{k}+{k}?", "answer": str(2 * k), "difficulty": t}
        for t in ("easy", "medium", "hard")
        for k in range(2)
    ]
    dataset = root / "testbed-all.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in items))
    dirs = []
    for model, wrong in (("base", 2), ("TRAAC", 1)):
        runs = [("all", None, None)] + [
            (f"budget-{b}-{tau or 'truncate'}", b, tau) for b in (11, 22) for tau in (None, 0.4)
        ]
        for name, budget, tau in runs:
            responses = root / f"{model}-{name}.jsonl"
            answers = [str(2 * (i % 2)) if i >= wrong else "-1" for i in range(len(items))]
            responses.write_text(
                "".join(
                    json.dumps({"id": it["id"], "response": f"<think>a b c</think> \\boxed{{{a}}}"})
                    + "\n"
                    for it, a in zip(items, answers, strict=True)
                )
            )
            out = root / model / name
            run_eval(EvalSettings(dataset=str(dataset), responses=str(responses)), out)
            run = json.loads((out / "run.json").read_text())
            run["settings"].update(think_budget=budget, compress_tau=tau)
            (out / "run.json").write_text(json.dumps(run))
        dirs.append(root / model)
    return dirs


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return load_models(make_budget_runs(tmp_path_factory.mktemp("runs")))


def test_the_demos_tables_read_at_80_columns(models):
    tiers = ("easy", "medium", "hard", "overall")
    base = {t: TierRow(10.0 * k, 51.3 - k) for k, t in enumerate(tiers)}
    traac = {t: TierRow(12.5 * k, 40.25 - k) for k, t in enumerate(tiers)}
    bins = {
        "easy": BinCompression(12, 0.5, 1.25, 20.0),
        "hard": BinCompression(4, None, None, None),
    }
    tables = [comparison_table(base, traac), compression_table(bins), budget_table(models)]
    assert len(tables[2].columns) == 10  # the sweep: wider than 80 columns at its natural width
    for table in tables:
        assert_legible(table)
    assert len(fit_table(tables[2], WIDTH)) == 2  # split in two, each with Model and Dataset
    assert len(fit_table(tables[2], 200)) == 1  # a wide screen shows it whole
    assert render(lambda c: print_table(c, tables[2])).count("Model ┃ Dataset ") == 2


def test_the_reports_tables_read_at_80_columns(models):
    blocks = report_blocks(models)
    tables = [b for b in blocks if isinstance(b, Table)]
    assert [len(t.columns) for t in tables][:2] == [5, 5]
    for table in tables:
        assert_legible(table)
    text = render(lambda c: print_blocks(c, blocks))
    assert_fits(text)
    assert "Think budget sweep" in text


def test_a_table_that_fits_is_drawn_as_before():
    """A table narrower than the screen is drawn as rich draws it unfitted."""
    table = Table(["tier", "Acc (%)", "think tokens"], [["easy", "50.0", "101"]], title="a title")
    plain = RichTable(title=Text("a title"), title_justify="left")
    for k, column in enumerate(table.columns):
        plain.add_column(Text(column), justify="left" if k == 0 else "right")
    plain.add_row(*map(Text, table.rows[0]))
    assert render(lambda c: print_table(c, table)) == render(lambda c: c.print(plain))


def test_evals_table_loses_its_edge_before_it_splits(models):
    """`traac eval`'s summary table (8 columns) is a little too wide for 80 columns with the
    box's outer edge: drawn without it, whole, rather than in two parts."""
    summary = next(iter(models[0].runs.values())).summary
    table = summary_table(summary)
    assert len(table.columns) == 8 and len(table.rows) > 1
    (drawn,) = fit_table(table, WIDTH)
    assert not drawn.show_edge
    assert_legible(table)
    assert fit_table(table, 120)[0].show_edge  # a wide screen: the full box


def test_the_step_table_reads_at_80_columns():
    """`compress` and `generate`'s step table: numbers and status whole, the text wrapped."""
    texts = ["First, 17 * 23 = 391 because 17 * 20 = 340 and 17 * 3 = 51. " * 2, "Wait, check."]
    steps = [Step(t, 0, len(t)) for t in texts]
    result = CompressionResult(
        "".join(texts), steps, np.array([0.123456, 1e-05]), [True, False], 0.5, 0.5, texts[0],
        40, 30,
    )  # fmt: skip
    records = [
        StepRecord(k, s.start, s.end, 20 + k, float(v), kept, s.text)
        for k, (s, v, kept) in enumerate(zip(steps, result.scores, result.kept, strict=True))
    ]
    text = render(lambda c: print_steps(c, "a trace", result, records, "probe"))
    assert all(len(line) <= WIDTH for line in text.splitlines())  # the preview ends in '…'
    for cell in ("0.1235", "1e-05", "kept", "evicted", "20", "21", "[opener]", "closer]"):
        assert cell in text.split(), cell
    assert "step ┃ tokens ┃  score ┃ status" in text


def test_progress_bars_keep_counts_and_times_whole_at_80_columns():
    """The demo's training bar: rich would cut '58/150' to '5…'; the info text wraps instead."""
    console = Console(file=io.StringIO(), width=WIDTH, force_terminal=False, color_system=None)
    progress = RichProgress(console)
    with progress.task("traac steps", total=150, completed=58) as task:
        task.update(info="loss 0.000488  reward 4.38  length 45.2")
        with progress.task("testbed: sampling, T=1.0", total=1800, completed=958):
            pass
    text = console.file.getvalue()  # the bars as the display left them
    assert_fits(text)
    for whole in ("58/150", "958/1800", "0:00:00", "-:--:--", "0.000488", "4.38", "45.2"):
        assert whole in text.split(), whole
