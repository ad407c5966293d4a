"""The report's files, among them one self-contained HTML page: the tables, the plots (PNG
inlined as data URIs) and the step viewer's examples, so that the page travels as one file.

Examples come from runs made with `--compress-tau`: their samples record each step's score and
whether it was kept (`ThinkingSample.record_fields`), so the page shows what the
probe pruned without loading a model. All text from runs is escaped: model output is untrusted.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from traac.common.outputs import output_dir, write_text
from traac.compression.compression import CompressionResult
from traac.evaluation.inference.responses import recorded_compression
from traac.evaluation.reports.plots import CAPTIONS, write_plots
from traac.evaluation.reports.report import Model, ReportTable, Run, build_report, report_tables
from traac.evaluation.reports.viewer import PAGE_STYLE, VIEWER_STYLE, render_traces

EXAMPLES_PER_RUN = 2

STYLE = """
body { max-width: 72rem; }
h2 { font-size: 1.15rem; margin-top: 2rem; border-bottom: 1px solid #ddd; }
nav a { margin-right: 1rem; }
p.caption { margin: 1.2rem 0 0.4rem; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: 0.85rem; }
th, td { border: 1px solid #ccc; padding: 0.2rem 0.5rem; text-align: left; white-space: nowrap; }
th { background: #f3f3f3; white-space: normal; vertical-align: bottom; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 1.5rem 0; }
figcaption { margin-bottom: 0.4rem; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
"""


@dataclass(frozen=True)
class Plot:
    """A plot file with its heading and the sentence that says what to look for."""

    path: Path
    heading: str
    text: str


def step_examples(
    models: Sequence[Model], per_run: int = EXAMPLES_PER_RUN
) -> list[tuple[str, CompressionResult]]:
    """(title, compression) of a few samples of every run with test-time compression, those
    that lost steps first."""
    out = []
    for model in models:
        for run in sorted([*model.runs.values(), *model.budget_runs], key=_run_order):
            found = []
            for record in run.records():
                result = recorded_compression(record.extra)
                if result is not None:
                    verdict = "right" if record.correct else "wrong"
                    title = f"{model.name} · {_run_label(run)} · {record.id} #{record.sample}"
                    found.append((f"{title} · {verdict}", result))
            found.sort(key=lambda example: not example[1].compressed)
            out += found[:per_run]
    return out


def _run_order(run: Run) -> tuple[str, int, float]:
    return run.dataset, run.think_budget or 0, run.compress_tau or 0.0


def _run_label(run: Run) -> str:
    label = run.dataset
    if run.think_budget is not None:
        label += f" · think budget {run.think_budget}"
    if run.compress_tau is not None:
        label += f" · compress tau {run.compress_tau:g}"
    return label


def render_report_page(
    tables: Sequence[ReportTable],
    plots: Sequence[Plot],
    examples: Sequence[tuple[str, CompressionResult]],
    notes: Sequence[str] = (),
) -> str:
    """The whole page."""
    parts = [f"<p>{html.escape(n)}</p>" for n in notes]
    parts.append('<h2 id="tables">Tables</h2>')
    for entry in tables:
        parts.append(f'<p class="caption" id="{entry.key}">{html.escape(entry.caption)}</p>')
        parts.append(f'<div class="scroll">{entry.table.html()}</div>')
    parts.append('<h2 id="plots">Plots</h2>')
    for plot in plots:
        data = base64.b64encode(plot.path.read_bytes()).decode("ascii")
        parts.append(
            f"<figure><figcaption><b>{html.escape(plot.heading)}.</b> "
            f"{html.escape(plot.text)}</figcaption>"
            f'<img src="data:image/png;base64,{data}" alt="{html.escape(plot.heading)}">'
            "</figure>"
        )
    parts.append('<h2 id="steps">Step viewer</h2>')
    if examples:
        parts.append(
            "<p>Samples of runs with test-time compression: each step of the reasoning shaded "
            "by the probe's score (its rank within the trace), pruned steps struck through.</p>"
        )
        parts.append(render_traces([r for _, r in examples], [t for t, _ in examples]))
    else:
        parts.append(
            "<p>No run here was made with <code>--compress-tau</code>, so there are no pruned "
            "steps to show.</p>"
        )
    nav = "".join(f'<a href="#{k}">{k}</a>' for k in ("tables", "plots", "steps"))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>traac evaluation report</title><style>{PAGE_STYLE}{STYLE}{VIEWER_STYLE}</style>"
        f"</head><body><h1>traac evaluation report</h1><nav>{nav}</nav>\n"
        + "\n".join(parts)
        + "\n</body></html>\n"
    )


def write_report(models: Sequence[Model], output: Path) -> list[Path]:
    """report.md, the plots and report.html (the same tables and plots, with step examples) into
    `output`; the paths written."""
    output_dir(output)
    markdown = output / "report.md"
    write_text(markdown, build_report(models), "--output")
    pngs = write_plots(models, output)
    plots = [Plot(p, *CAPTIONS[p.name]) for p in pngs]
    page = output / "report.html"
    html = render_report_page(report_tables(models), plots, step_examples(models))
    write_text(page, html, "--output")
    return [markdown, *pngs, page]
