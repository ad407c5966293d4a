"""`traac probe-report` on hand-labelled responses: the inputs, their labels and so the
redundant share are fixed whatever weights the quick testbed has; the model only scores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from traac.cli import main as cli_main
from traac.common.models import load_model, load_tokenizer
from traac.evaluation.harness.prompts import render_prompt
from traac.evaluation.inference.generation import TransformersBackend
from traac.evaluation.reports.probe_report import foreign_specs, probe_report, read_labelled

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
    expected = {"attention all", "attention first_half", "confidence", "random", "step entropy"}
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


def test_several_scorers_share_one_report(
    quick_testbed: Path, smollm2: Path, tmp_path: Path
) -> None:
    """`policy` keeps today's rows; a foreign scorer adds its attention rows, scored by it."""
    inputs = labelled(tmp_path / "in.jsonl")
    base = ["probe-report", "--model", str(quick_testbed), "--input", str(inputs)]
    base.append("--no-each-layer")
    assert cli_main([*base, "--json", str(tmp_path / "one.json")]) == 0
    argv = [*base, "--scoring-model", "policy", "smollm2", "--json", str(tmp_path / "both.json")]
    assert cli_main(argv) == 0
    one = json.loads((tmp_path / "one.json").read_text())
    both = json.loads((tmp_path / "both.json").read_text())
    foreign = {name: rows for name, rows in both.items() if name.startswith("smollm2: ")}
    assert set(foreign) == {
        "smollm2: attention all", "smollm2: attention first_half",
        "smollm2: attention all, gated heads", "smollm2: attention first_half, gated heads",
    }  # fmt: skip
    assert {name: rows for name, rows in both.items() if name not in foreign} == one
    # the foreign rows are SmolLM2's own, as the library scores the same responses with it
    tokenizer = load_tokenizer(str(quick_testbed))
    responses = read_labelled(inputs, lambda q: render_prompt(tokenizer, q))
    backend = TransformersBackend(load_model(str(quick_testbed), device="cpu"), tokenizer)
    scorer = load_model(str(smollm2), device="cpu")
    direct = probe_report(
        scorer, load_tokenizer(str(smollm2)), responses, backend, foreign_specs("smollm2")
    )
    assert direct.to_json() == foreign


def test_a_scorer_named_twice_is_one_line(
    quick_testbed: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    inputs = labelled(tmp_path / "in.jsonl")
    argv = ["probe-report", "--model", str(quick_testbed), "--input", str(inputs)]
    argv += ["--scoring-model", "policy", "policy"]
    assert cli_main(argv) == 2
    assert "--scoring-model policy: given twice" in capsys.readouterr().err


def test_one_tau_for_every_tier(
    quick_testbed: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """--compress-tau replaces the tiers' rates (as a training bin does for the tiers it
    holds): random evicts floor(5 x 0.2) = 1 step of each, the medium one too (2 at its 0.4)."""
    out = tmp_path / "probe.json"
    argv = ["probe-report", "--model", str(quick_testbed), "--input",
            str(labelled(tmp_path / "in.jsonl")), "--no-each-layer", "--compress-tau", "0.2",
            "--json", str(out)]  # fmt: skip
    assert cli_main(argv) == 0
    random = json.loads(out.read_text())["random"]
    assert (random["easy"]["evicted_steps"], random["medium"]["evicted_steps"]) == (2, 1)
    assert "every response compressed at tau 0.2, not by tier" in capsys.readouterr().out


def test_a_tau_out_of_range_is_one_line(capsys: pytest.CaptureFixture) -> None:
    assert cli_main(["probe-report", "--model", "testbed", "--compress-tau", "1.5"]) == 2
    assert "--compress-tau 1.5: must lie in [0, 1]" in capsys.readouterr().err
