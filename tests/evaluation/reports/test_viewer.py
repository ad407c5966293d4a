from html.parser import HTMLParser

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traac.compression.compression import CompressionResult
from traac.compression.segmentation import Step, split_steps
from traac.evaluation.reports.viewer import render_html


def result_for(reasoning: str, scores, kept, u=0.5, e=0.2) -> CompressionResult:
    steps = split_steps(reasoning)
    assert len(steps) == len(scores) == len(kept)
    text = "".join(s.text for s, k in zip(steps, kept, strict=True) if k)
    return CompressionResult(
        reasoning, steps, np.asarray(scores, float), list(kept), u, e, text, 40, 25
    )


class Spans(HTMLParser):
    """Collects (class, style, title, text) of each step span and all section headings."""

    def __init__(self):
        super().__init__()
        self.spans, self.headings, self._open, self._in_h2 = [], [], None, False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "span" and "step" in attrs.get("class", ""):
            self._open = [attrs["class"], attrs["style"], attrs["title"], ""]
        self._in_h2 = tag == "h2"

    def handle_endtag(self, tag):
        if tag == "span" and self._open is not None:
            self.spans.append(tuple(self._open))
            self._open = None
        if tag == "h2":
            self._in_h2 = False

    def handle_data(self, data):
        if self._open is not None:
            self._open[3] += data
        if self._in_h2:
            self.headings.append(data)


def parse(page: str) -> Spans:
    parser = Spans()
    parser.feed(page)
    return parser


def test_steps_coloured_by_rank_and_evicted_struck_through():
    reasoning = "First add 2 and 2. Wait, is it 4? Hmm, yes. So the answer is 4."
    result = result_for(reasoning, [0.9, 0.1, 0.3, 0.6], [True, False, False, True])
    page = render_html([result])
    spans = parse(page).spans
    assert "".join(s[3] for s in spans) == reasoning
    assert [("evicted" in s[0]) for s in spans] == [False, True, True, False]
    assert "hsl(120," in spans[0][1] and "hsl(0," in spans[1][1]  # highest green, lowest red
    assert spans[1][2] == "step 1: score 0.1, evicted"
    assert "u = 0.500" in page and "e = 0.200" in page and "tokens 40 &rarr; 25" in page
    assert "steps kept 2/4" in page


def test_untrusted_text_and_titles_are_escaped():
    reasoning = 'So <script>alert("x")</script> & done. Wait <img src=x onerror=alert(1)>'
    result = result_for(reasoning, [0.5, 0.4], [True, False])
    page = render_html([result], titles=["<b>t</b>"])
    assert "<script>" not in page and "<img" not in page and "<b>t</b>" not in page
    parsed = parse(page)
    assert "".join(s[3] for s in parsed.spans) == reasoning
    assert parsed.headings == ["<b>t</b>"]


def test_several_traces_default_titles_and_title_count():
    a = result_for("So a.", [1.0], [True])
    b = result_for("Wait b. Now c.", [0.2, 0.2], [True, True])
    page = render_html([a, b])
    assert parse(page).headings == ["Trace 1", "Trace 2"]
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page
    with pytest.raises(ValueError, match="one title per result"):
        render_html([a, b], titles=["only one"])


def test_empty_steps_are_skipped_and_ties_share_a_colour():
    # scope `probe` yields an empty first step when the reasoning itself opens with a phrase
    steps = [Step("", 0, 0), *split_steps("Now x. Now y.")]
    result = CompressionResult(
        "Now x. Now y.", steps, np.array([0.9, 0.3, 0.3]), [True] * 3, 1.0, 0.0, "", 6, 6
    )
    spans = parse(render_html([result])).spans
    assert [s[3] for s in spans] == ["Now x. ", "Now y."]
    assert spans[0][1] == spans[1][1]
    assert spans[0][2].startswith("step 1:")


@settings(max_examples=50, deadline=None)
@given(st.text(min_size=1, max_size=80), st.data())
def test_page_text_round_trips_any_reasoning(reasoning, data):
    n = len(split_steps(reasoning))
    scores = data.draw(st.lists(st.floats(0, 1), min_size=n, max_size=n))
    kept = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    parsed = parse(render_html([result_for(reasoning, scores, kept)]))
    normalise = lambda s: s.replace("\r\n", "\n").replace("\r", "\n")  # noqa: E731
    assert normalise("".join(s[3] for s in parsed.spans)) == normalise(reasoning)
