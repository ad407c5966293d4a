"""A study's figure: its contrasts drawn from its kept records (`traac records plot`), each
seed-level effect on accuracy and length with the intervals and the verdict `traac records show`
prints, beside the margin the study stated (`traac.evaluation.reports.plots.equivalence_plot`)."""

from __future__ import annotations

from pathlib import Path

from traac.errors import TraacError
from traac.evaluation.harness.seeds import ALPHA, SeedInterval
from traac.evaluation.reports.plots import ContrastBar, equivalence_plot
from traac.pipelines.experiment_results import effect_bounds, stated_margin
from traac.pipelines.records import load, study_tables
from traac.pipelines.variants import COMPARE


def contrast_bars(study: Path) -> tuple[dict[str, list[ContrastBar]], float | None]:
    """The study's contrasts on overall accuracy (with the verdict `show` prints) and length,
    each with its seed-level 90% and 95% intervals, and the study's stated margin; contrasts
    kept with one seed have no interval and are left out."""
    margin = stated_margin(study)
    base, runs = load(study)
    effects = study_tables(base, runs, study.name, order=list(COMPARE)).effects
    panels: dict[str, list[ContrastBar]] = {"Δ accuracy (points)": [], "Δ length (tokens)": []}
    for effect, bounds in zip(effects, effect_bounds(effects, margin), strict=True):
        if bounds.interval.se is None:
            continue
        label = f"{effect.variant} − {effect.baseline}"
        length = effect.result.length["overall"].interval
        panels["Δ accuracy (points)"].append(_bar(label, bounds.interval, bounds.verdict()))
        panels["Δ length (tokens)"].append(_bar(label, length))
    if not panels["Δ accuracy (points)"]:
        raise TraacError(f"records plot: {study} has no contrast kept with two seeds or more; "
                         "keep more seeds first")  # fmt: skip
    return panels, margin


def _bar(label: str, interval: SeedInterval, verdict: str = "") -> ContrastBar:
    ninety, ninety_five = interval.at(1 - 2 * ALPHA), interval.at(1 - ALPHA)
    assert ninety is not None and ninety_five is not None  # two seeds or more: contrast_bars
    return ContrastBar(label, interval.mean, ninety, ninety_five, verdict)


def study_plot(study: Path, path: Path) -> Path:
    """The study's contrasts as a figure (`equivalence_plot`), from its kept records."""
    panels, margin = contrast_bars(study)
    return equivalence_plot(panels, margin, path, f"{study.name}: each contrast, paired by seed")
