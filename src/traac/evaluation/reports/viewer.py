"""A self-contained HTML page showing what compression did, step by step (the paper's Figure 2).

Each step is shaded by its score, green for the highest and red for the lowest of its trace;
evicted steps are struck through. Colours follow the score's rank within the trace rather than
its raw value, because with step scope `probe` the first and last steps (attention sinks, the
auxiliary prompt) hold most of the mass and would leave every other step the same red; the exact
score is in each step's tooltip. All model text is escaped: it is untrusted.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np

from traac.compression.compression import CompressionResult

PAGE_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 60rem; color: #222;
       padding: 0 1rem; }
h1 { font-size: 1.3rem; }
"""
# The viewer's own rules, scoped to `.viewer` so that a page embedding it keeps its own look.
VIEWER_STYLE = """
.viewer section { border: 1px solid #ccc; border-radius: 6px; padding: 0.8rem 1rem;
                  margin: 1.2rem 0; }
.viewer h2 { font-size: 1.05rem; margin: 0 0 0.4rem; }
.viewer .summary { font-size: 0.9rem; color: #444; margin-bottom: 0.6rem; }
.viewer .trace { white-space: pre-wrap; overflow-wrap: anywhere;
                 font-family: ui-monospace, monospace; font-size: 0.85rem; line-height: 1.6; }
.viewer .step { border-radius: 3px; padding: 0 1px; }
.viewer .evicted { text-decoration: line-through; opacity: 0.75; }
.viewer .legend span { display: inline-block; padding: 0 0.5rem; margin-right: 0.3rem; }
"""


def _shade(rank: float) -> str:
    """Background for a rank in [0, 1]: red (0) through yellow to green (1)."""
    return f"hsl({round(120 * rank)}, 70%, 82%)"


def _ranks(scores: np.ndarray) -> np.ndarray:
    """Each score's rank in [0, 1] within its trace (ties share the mean rank; one step: 1)."""
    n = len(scores)
    if n <= 1:
        return np.ones(n)
    order = np.argsort(scores, kind="stable")
    ranks = np.empty(n)
    ranks[order] = np.arange(n)
    for value in np.unique(scores):  # ties: the same colour
        same = scores == value
        ranks[same] = ranks[same].mean()
    return ranks / (n - 1)


def _trace(result: CompressionResult, title: str) -> str:
    ranks = _ranks(np.asarray(result.scores, dtype=np.float64))
    spans = []
    for k, (step, score, kept, rank) in enumerate(
        zip(result.steps, result.scores, result.kept, ranks, strict=True)
    ):
        if not step.text:
            continue
        classes = "step" if kept else "step evicted"
        tip = f"step {k}: score {float(score):.4g}, {'kept' if kept else 'evicted'}"
        spans.append(
            f'<span class="{classes}" style="background:{_shade(rank)}" title="{tip}">'
            f"{html.escape(step.text)}</span>"
        )
    body = "".join(spans) if spans else html.escape(result.reasoning)
    summary = (
        f"u = {result.uniformity:.3f} &middot; e = {result.eviction_fraction:.3f} &middot; "
        f"steps kept {sum(result.kept)}/{len(result.kept)} &middot; "
        f"tokens {result.tokens_before} &rarr; {result.tokens_after}"
    )
    return (
        f"<section><h2>{html.escape(title)}</h2>"
        f'<div class="summary">{summary}</div>'
        f'<div class="trace">{body}</div></section>'
    )


def render_traces(results: Sequence[CompressionResult], titles: Sequence[str] | None = None) -> str:
    """The legend and one section per trace, in a `<div class="viewer">` (style: `VIEWER_STYLE`),
    for a page of its own or embedded in another; `titles` default to "Trace 1", "Trace 2", ..."""
    if titles is None:
        titles = [f"Trace {i + 1}" for i in range(len(results))]
    if len(titles) != len(results):
        raise ValueError("render_html: one title per result is required")
    legend = (
        '<div class="legend">step score (rank within its trace): '
        f'<span style="background:{_shade(0.0)}">lowest</span>'
        f'<span style="background:{_shade(0.5)}">middle</span>'
        f'<span style="background:{_shade(1.0)}">highest</span>'
        '<span class="evicted">evicted</span></div>'
    )
    sections = "\n".join(_trace(r, t) for r, t in zip(results, titles, strict=True))
    return f'<div class="viewer">{legend}\n{sections}\n</div>'


def render_html(
    results: Sequence[CompressionResult], titles: Sequence[str] | None = None, note: str = ""
) -> str:
    """One page for several compressed traces; `titles` default to "Trace 1", "Trace 2", ...;
    `note` (plain text) says under which rule they were pruned."""
    paragraph = f'<p class="rule">{html.escape(note)}</p>' if note else ""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        "<title>traac compression</title>"
        f"<style>{PAGE_STYLE}{VIEWER_STYLE}</style></head><body>"
        f"<h1>traac: attentive compression</h1>{paragraph}"
        f"{render_traces(results, titles)}\n</body></html>\n"
    )
