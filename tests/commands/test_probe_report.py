"""`traac probe-report` on hand-labelled responses: the inputs, their labels and so the
redundant share are fixed whatever weights the quick testbed has; the model only scores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from traac.cli import main as cli_main

pytestmark = pytest.mark.slow

REASONING = (
    "First, {a} + {b} = {c}.\nSo the answer is {c}.\nWait, let me double-check: {a} + {b} = {c}."
    "\nLet me verify: {c} - {b} = {a}.\nSo the answer is {c}."
)
LABELS = ["compute", "conclude", "recheck", "recheck", "restate"]


def labelled(path: Path) -> Path:
    rows = [
        {"id": f"q{a}", "question": f"What is {a} + {b}?", "answer": str(a + b),
         "reasoning": REASONING.format(a=a, b=b, c=a + b), "labels": LABELS, "tier": tier}
        for a, b, tier in [(3, 4, "easy"), (5, 2, "easy"), (6, 1, "medium")]
    ]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_every_scorer_and_layer_set_is_reported(
    quick_testbed: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "probe.json"
    argv = ["probe-report", "--model", str(quick_testbed), "--input",
            str(labelled(tmp_path / "in.jsonl")), "--json", str(out)]  # fmt: skip
    assert cli_main(argv) == 0
    report = json.loads(out.read_text())
    layers = json.loads((quick_testbed / "config.json").read_text())["num_hidden_layers"]
    expected = {"attention all", "attention first_half", "confidence", "random"}
    expected |= {"attention all, gated heads", "attention first_half, gated heads"}
    expected |= {f"attention layer {k}" for k in range(layers)}
    assert set(report) == expected
    for tiers in report.values():
        assert set(tiers) == {"easy", "medium", "all"}
        assert tiers["all"]["responses"] == 3
        assert tiers["all"]["redundant_share"] == pytest.approx(3 / 5)  # from the labels
    # random evicts floor(5 x tau) steps of each (ungated): at the easy tier's 0.6, three
    random = report["random"]["easy"]
    assert random["compressed_share"] == 1.0 and random["evicted_steps"] == 2 * 3
    assert "Step scorers on easy correct responses" in capsys.readouterr().out


def test_a_wrong_label_count_is_one_line(
    quick_testbed: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    path = tmp_path / "in.jsonl"
    row = {"question": "1 + 1?", "answer": "2", "reasoning": "1 + 1 = 2.", "labels": []}
    path.write_text(json.dumps(row) + "\n")
    assert cli_main(["probe-report", "--model", str(quick_testbed), "--input", str(path)]) == 2
    assert "0 labels for 1 steps" in capsys.readouterr().err
