"""`traac demo --quick` end to end on the quick testbed: every stage runs and the report holds
the per-tier numbers; `traac experiment ablations` reuses the same stages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from traac import cli
from traac.compression.formats import AUX_PROMPT, ChatFormat
from traac.compression.settings import CompressionSettings
from traac.errors import TraacError
from traac.evaluation.harness.paper_metrics import GroupStats
from traac.evaluation.harness.results import EvalSummary
from traac.evaluation.harness.runner import SAMPLES_FILE, EvalSettings, SamplesFile, run_eval
from traac.evaluation.reports.html_report import write_report
from traac.evaluation.reports.report import budget_table, load_models
from traac.pipelines.demo import BudgetSweep, DemoSettings, targets
from traac.pipelines.stages import QUICK_TRAINING, HeldOut, TierRow, tier_rows

RECIPE = Path(__file__).resolve().parents[2] / "recipes" / "testbed.yaml"

pytestmark = pytest.mark.slow


def test_quick_demo_writes_report_summary_plots_and_viewer(quick_testbed, tmp_path):
    out = tmp_path / "demo"
    argv = ["demo", "--quick", "--output", str(out), "--config", str(RECIPE), "--budget-sweep"]
    assert cli.main(argv) == 0
    summary = json.loads((out / "summary.json").read_text())
    for model in ("base", "traac"):
        rows = summary["models"][model]
        assert set(rows) == {"easy", "medium", "hard", "overall"}
        assert all(0.0 <= r["accuracy"] <= 100.0 and r["mean_length"] > 0 for r in rows.values())
    assert set(summary["training_compression"]) == {"easy", "medium", "hard"}
    assert all(isinstance(t["met"], bool) for t in summary["targets"].values())
    assert set(summary["stage_seconds"]) == {
        "testbed",
        "evaluate base",
        "train TRAAC",
        "evaluate TRAAC",
        "think budget sweep",
        "report",
    }
    report = (out / "report.md").read_text()
    assert "| overall |" in report and "## Goals" in report
    assert "## Think budget sweep" in report and "budget_sweep.png" in summary["plots"]
    swept = {(p["model"], p["mode"]) for p in summary["budget_sweep"] if p["budget"] is not None}
    assert swept == {(m, t) for m in ("base", "TRAAC") for t in ("truncate", "compress 0.4")}
    target = summary["targets"]["compress beats truncate at half the base think length"]
    assert target["measured"].startswith("compress - truncate at ")
    for plot in summary["plots"]:
        assert (out / plot).stat().st_size > 1000
    page = (out / "steps.html").read_text()
    assert "<html" in page.lower()
    # pruned under the recipe's own rule (all layers, gated heads), which the page names
    assert "probe layers all, heads gated," in page and "ranked among" not in page
    assert "- not a goal: compress beats truncate under a think budget: " in report
    # a rerun resumes: nothing is retrained, the same numbers come back
    assert cli.main(argv) == 0
    assert json.loads((out / "summary.json").read_text())["models"] == summary["models"]
    # without --budget-sweep (the default) no sweep stage, section or goal
    assert cli.main(argv[:-1]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert "think budget sweep" not in summary["stage_seconds"]
    assert "compress beats truncate at half the base think length" not in summary["targets"]
    assert "## Think budget sweep" not in (out / "report.md").read_text()


def test_demo_bad_recipe_is_one_line_error(tmp_path, capsys):
    code = cli.main(["demo", "--output", str(tmp_path), "--config", str(tmp_path / "no.yaml")])
    assert code == 2
    assert "no such recipe" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["demo"], ["experiment", "ablations"]])
def test_a_broken_recipe_stops_before_any_work(tmp_path, capsys, monkeypatch, command):
    """A YAML syntax error is noticed before the testbed is built or the base model evaluated."""
    for where in (
        "traac.pipelines.demo.ensure_testbed",
        "traac.pipelines.experiments.resolve_model",
    ):
        monkeypatch.setattr(where, lambda *a, **k: pytest.fail("work started"))
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(RECIPE.read_text() + "beta: [0.1\n")
    out = tmp_path / "out"
    assert cli.main([*command, "--output", str(out), "--config", str(recipe)]) == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1].startswith(f"traac {command[0]}: error: --config {recipe}: not")
    assert not out.exists()


@pytest.mark.parametrize("command", [["demo"], ["experiment", "ablations"]])
def test_an_output_that_is_a_file_stops_before_any_work(tmp_path, capsys, monkeypatch, command):
    for where in (
        "traac.pipelines.demo.ensure_testbed",
        "traac.pipelines.experiments.resolve_model",
    ):
        monkeypatch.setattr(where, lambda *a, **k: pytest.fail("work started"))
    out = tmp_path / "file"
    out.write_text("")
    assert cli.main([*command, "--quick", "--output", str(out), "--config", str(RECIPE)]) == 2
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith(f"traac {command[0]}: error: --output {out}: is a file")


def group(accuracy: float, length: float) -> GroupStats:
    return GroupStats(
        n_items=10, n_samples=10, accuracy=accuracy, mean_response_tokens=length,
        mean_think_tokens=length / 2, closed_rate=100.0, auc_oaa=50.0,
    )  # fmt: skip


def test_targets_and_tier_rows():
    summary = EvalSummary(
        dataset="testbed:all",
        model="base",
        overall=group(80.0, 100.0),
        t_max=256,
        length_unit="tokens",
        accuracy_by_sample={0: 80.0},
        accuracy_std_over_samples=0.0,
        by_tier={
            "easy": group(95.0, 80.0),
            "medium": group(85.0, 100.0),
            "hard": group(60.0, 120.0),
        },
    )
    base = tier_rows(summary)
    assert base["overall"] == TierRow(accuracy=80.0, mean_length=100.0)
    assert base["hard"] == TierRow(accuracy=60.0, mean_length=120.0)
    trained = {
        "easy": TierRow(95.0, 40.0),  # -50%
        "medium": TierRow(85.0, 60.0),
        "hard": TierRow(61.0, 96.0),  # -20%
        "overall": TierRow(82.0, 70.0),  # +2 points, -30%
    }
    goals = targets(base, trained)
    assert all(g.met for g in goals.values())
    trained["overall"] = TierRow(81.9, 70.1)  # just short of both
    goals = targets(base, trained)
    assert not goals["overall accuracy >= base + 2 points"].met
    assert not goals["overall length -30% or more"].met
    trained["overall"] = TierRow(82.0, 70.0)
    assert goals["easy length cut >= 1.5x hard cut"].value == pytest.approx(2.5)
    trained["hard"] = TierRow(59.0, 96.0)
    assert not targets(base, trained)["hard accuracy >= base"].met
    # easy barely cut while hard grows: no division by a non-positive cut, and not met
    trained["easy"] = TierRow(95.0, 80.0)
    trained["hard"] = TierRow(59.0, 130.0)
    adaptive = targets(base, trained)["easy length cut >= 1.5x hard cut"]
    assert adaptive.value is None and not adaptive.met
    assert adaptive.measured == "easy +0.0%, hard +8.3%"


def test_demo_settings_quick_and_full(tmp_path):
    quick = DemoSettings.make(tmp_path, quick=True, recipe=RECIPE, eval_n=3)
    assert quick.held_out == HeldOut(
        per_tier=3, num_samples=1, max_new_tokens=160, t_max=160, batching="refill"
    )
    # AUC_OAA's t_max stays where the published figures put it when the budget changes
    longer = DemoSettings.make(tmp_path, quick=False, recipe=RECIPE, max_new_tokens=512)
    assert (longer.held_out.max_new_tokens, longer.held_out.t_max) == (512, 256)
    assert quick.train_overrides == QUICK_TRAINING
    assert quick.recipe_with_overrides.overrides == QUICK_TRAINING
    full = DemoSettings.make(tmp_path, quick=False, recipe=RECIPE, num_samples=2)
    assert full.held_out == HeldOut(num_samples=2, batching="refill")
    assert full.train_overrides == {}
    assert quick.sweep is None and full.sweep is None  # opt-in: `--budget-sweep`
    swept = DemoSettings.make(tmp_path, quick=False, recipe=RECIPE, budget_sweep=True)
    assert swept.sweep == BudgetSweep()
    missing = DemoSettings.make(tmp_path, quick=True, recipe=tmp_path / "no.yaml")
    with pytest.raises(TraacError, match="no such recipe"):
        missing.recipe_with_overrides  # noqa: B018


def test_budget_sweep_on_the_quick_testbed(quick_testbed, tmp_path):
    """Both modes at two budgets on the quick testbed: an interrupted response is well formed,
    holds the auxiliary prompt right before its closer, and is verified like any other (scoring
    its text as a plain response gives the same verdict); the report reads the runs back as the
    sweep, with step examples from the compressing runs."""
    held = HeldOut(per_tier=4, num_samples=1, max_new_tokens=160)
    sweep = BudgetSweep(fractions=(0.25, 0.5), per_tier=2, num_samples=2)
    gated = CompressionSettings(probe_heads="gated")  # the testbed recipe's probe
    budgets = sweep.run({"base": quick_testbed}, tmp_path / "eval", held, 40.0, gated)
    assert budgets == [10, 20]
    fmt = ChatFormat()
    interrupted = well_formed = 0
    for run in sorted((tmp_path / "eval" / "base").iterdir()):
        records = SamplesFile(run / SAMPLES_FILE).read()
        assert len(records) == 3 * 2 * 2  # 2 problems per tier, 2 samples
        budget = int(run.name.split("-")[1])
        compression = json.loads((run / "run.json").read_text())["settings"]["compression"]
        assert compression["probe_heads"] == "gated"  # both modes record the probe they were given
        for record in records.values():
            assert record.budget_think_tokens is not None
            assert record.budget_think_tokens <= budget
            if record.interrupted:
                interrupted += 1
                assert record.budget_think_tokens == budget
                # The interruption closes the block right after the auxiliary prompt; the
                # response is well formed unless the model wrote a stray tag of its own (the
                # quick testbed sometimes opens a second block).
                head, _, _ = record.response.partition("</think>")
                assert head.startswith("<think>") and head.endswith(AUX_PROMPT)
                own_tags = record.response.count("<think>") + record.response.count("</think>") > 2
                assert fmt.parse(record.response).well_formed == (not own_tags)
                well_formed += not own_tags
            assert ("ttc_step_kept" in record.extra) == run.name.endswith("compress")
        rows = [{"id": i, "sample": s, "response": r.response} for (i, s), r in records.items()]
        responses = tmp_path / f"{run.name}.jsonl"
        responses.write_text("".join(json.dumps(r) + "\n" for r in rows))
        settings = EvalSettings(
            dataset=held.subset(2, 2).dataset, responses=str(responses), max_new_tokens=160
        )
        rescored = run_eval(settings, tmp_path / "rescored" / run.name).records
        assert {(r.id, r.sample): r.correct for r in rescored} == {
            k: r.correct for k, r in records.items()
        }
    assert well_formed > 0, f"none of {interrupted} interrupted responses is well formed"
    (model,) = load_models([tmp_path / "eval" / "base"])
    assert not model.runs and len(model.budget_runs) == 4
    table = budget_table([model])
    assert [row[2] for row in table.rows] == ["10", "20"]
    written = write_report([model], tmp_path / "report")
    page = (tmp_path / "report" / "report.html").read_text()
    assert "budget_sweep.png" in [p.name for p in written]
    assert page.count("<section><h2>base · testbed:all · think budget") == 4  # 2 compress runs
