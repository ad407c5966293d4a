"""Plot styling: every series of a plot stays distinguishable."""

from __future__ import annotations

from pathlib import Path

from traac.evaluation.reports.plots import _styles, pareto_plot


def test_styles_stay_distinct_past_the_palette() -> None:
    styles = _styles(25)
    pairs = [(tuple(color), marker) for color, marker in styles]
    assert len(set(pairs)) == 25
    assert {marker for _, marker in styles[:10]} == {styles[0][1]}  # one marker while colours last
    assert styles[10][0] == styles[0][0] and styles[10][1] != styles[0][1]


def test_pareto_plot_draws_a_dozen_variants(tmp_path: Path) -> None:
    variants = {
        f"v{i}": {"easy": (20.0 + i, 0.5, 90.0 - i, 1.0), "overall": (30.0 + i, None, 70.0, None)}
        for i in range(12)
    }
    path = pareto_plot(variants, tmp_path / "p.png", title="t")
    assert path.stat().st_size > 0
