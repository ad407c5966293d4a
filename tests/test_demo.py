"""`traac demo --quick` end to end on the quick testbed: every stage runs and the report holds
the per-tier numbers; `traac experiment ablations` reuses the same stages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from traac import cli
from traac.demo import targets, tier_table

RECIPE = Path(__file__).resolve().parents[1] / "recipes" / "testbed.yaml"

pytestmark = pytest.mark.slow


def test_quick_demo_writes_report_summary_plots_and_viewer(quick_testbed, tmp_path):
    out = tmp_path / "demo"
    assert cli.main(["demo", "--quick", "--output", str(out), "--config", str(RECIPE)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    for model in ("base", "traac"):
        rows = summary["models"][model]
        assert set(rows) == {"easy", "medium", "hard", "overall"}
        assert all(0.0 <= r["accuracy"] <= 100.0 and r["mean_length"] > 0 for r in rows.values())
    assert set(summary["stage_seconds"]) == {
        "testbed",
        "evaluate base",
        "train TRAAC",
        "evaluate TRAAC",
        "report",
    }
    report = (out / "report.md").read_text()
    assert "| overall |" in report and "## Targets" in report
    for plot in summary["plots"]:
        assert (out / plot).stat().st_size > 1000
    assert "<html" in (out / "steps.html").read_text().lower()
    # a rerun resumes: nothing is retrained, the same numbers come back
    assert cli.main(["demo", "--quick", "--output", str(out), "--config", str(RECIPE)]) == 0
    assert json.loads((out / "summary.json").read_text())["models"] == summary["models"]


def test_demo_bad_recipe_is_one_line_error(tmp_path, capsys):
    code = cli.main(["demo", "--output", str(tmp_path), "--config", str(tmp_path / "no.yaml")])
    assert code == 2
    assert "no such recipe" in capsys.readouterr().err


def test_targets_and_tier_table():
    summary = {
        "accuracy": 80.0,
        "mean_response_tokens": 100.0,
        "by_difficulty": {
            "easy": {"accuracy": 95.0, "mean_response_tokens": 80.0},
            "medium": {"accuracy": 85.0, "mean_response_tokens": 100.0},
            "hard": {"accuracy": 60.0, "mean_response_tokens": 120.0},
        },
    }
    base = tier_table(summary)
    assert base["overall"] == {"accuracy": 80.0, "mean_length": 100.0}
    trained = {
        "easy": {"accuracy": 95.0, "mean_length": 40.0},  # -50%
        "medium": {"accuracy": 85.0, "mean_length": 70.0},
        "hard": {"accuracy": 61.0, "mean_length": 96.0},  # -20%
        "overall": {"accuracy": 79.5, "mean_length": 69.0},  # -31%
    }
    goals = targets(base, trained)
    assert all(g["met"] for g in goals.values())
    assert goals["easy length cut >= 1.5x hard cut"]["value"] == pytest.approx(2.5)
    trained["hard"]["accuracy"] = 59.0
    assert not targets(base, trained)["hard accuracy >= base"]["met"]
    # easy barely cut while hard grows: no division by a non-positive cut, and not met
    trained["easy"]["mean_length"] = 80.0
    trained["hard"]["mean_length"] = 130.0
    adaptive = targets(base, trained)["easy length cut >= 1.5x hard cut"]
    assert adaptive["value"] is None and not adaptive["met"]
    assert adaptive["measured"] == "easy +0.0%, hard +8.3%"
