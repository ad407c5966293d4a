"""traac report on two small result directories: tables, changes against the first, plots."""

from __future__ import annotations

import base64
import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from traac.errors import TraacError
from traac.evaluation.harness.results import SampleRecord
from traac.evaluation.harness.runner import EvalSettings, run_eval
from traac.evaluation.reports.report import (
    Model,
    TierStats,
    budget_table,
    build_report,
    load_models,
    main_table,
    mixed_units,
    otb_table,
    pooled_tiers,
    report_tables,
    tier_table,
)

PNG = b"\x89PNG\r\n\x1a\n"

# Two "models" on a tiered math set: (accuracy pattern, think words) per tier.
PROFILES = {
    "base": {"easy": ([1, 1, 1, 1], 400), "hard": ([1, 0, 0, 0], 800)},
    "traac": {"easy": ([1, 1, 1, 1], 100), "hard": ([1, 1, 0, 0], 600)},
}


def make_runs(root: Path) -> None:
    """root/<model>/{tiers,otb}: scored responses files, as `traac eval --responses` makes them."""
    rows = [
        {"id": f"{tier}{k}", "question": f"{k}+{k}?", "answer": str(2 * k), "difficulty": tier}
        for tier in ("easy", "hard")
        for k in range(4)
    ]
    otb = [
        {"id": f"o{k}", "question": "q", "answer": str(k), "data_source": "otb-overthink"}
        for k in range(2)
    ] + [
        {"id": f"u{k}", "question": "q", "answer": str(k), "data_source": "otb-underthink"}
        for k in range(2)
    ]
    for name, rows_of in (("tiers", rows), ("otb", otb)):
        (root / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows_of))
    for model, profile in PROFILES.items():
        responses: dict[str, list[dict]] = {"tiers": [], "otb": []}
        for tier, (right, think) in profile.items():
            for k, ok in enumerate(right):
                answer = str(2 * k) if ok else "-1"
                text = "<think>" + " hmm" * think + "</think> \\boxed{" + answer + "}"
                responses["tiers"].append({"id": f"{tier}{k}", "response": text})
        otb_right = {"base": ["0", "9", "0", "9"], "traac": ["0", "1", "0", "1"]}[model]
        otb_think = {"base": 499, "traac": 100}[model]  # base: 500 think words
        for item_id, answer in zip(["o0", "o1", "u0", "u1"], otb_right, strict=True):
            text = "<think>" + " hmm" * otb_think + "</think> \\boxed{" + answer + "}"
            responses["otb"].append({"id": item_id, "response": text})
        for dataset, rows_of in responses.items():
            path = root / f"{model}-{dataset}.jsonl"
            path.write_text("".join(json.dumps(r) + "\n" for r in rows_of))
            settings = EvalSettings(
                dataset=str(root / f"{dataset}.jsonl"), responses=str(path), max_new_tokens=1000
            )
            run_eval(settings, root / model / dataset, t_max=1000)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("runs")
    make_runs(root)
    return root


def test_tables_follow_the_paper_layout(runs):
    models = load_models([runs / "base", runs / "traac"])
    report = build_report(models)
    assert "| Model | otb Acc | otb Len | tiers Acc | tiers Len | Avg Acc | Avg Len |" in report
    # Lengths in words: "<think> hmm x n</think> \\boxed{..}" has n + 2.
    # tiers: base 5/8 right, (402 + 802) / 2 words; traac 6/8, (102 + 602) / 2.
    assert "| base | 50.00 | 501 | 62.50 | 602 | 56.25 | 552 |" in report
    assert "| traac | 100.00 | 102 | 75.00 | 352 | 87.50 | 227 |" in report
    assert "| traac | +50.00 | -79.6% | +12.50 | -41.5% | +31.25 | -58.8% |" in report
    assert "| base | 100.00 | 402 | 25.00 | 802 |" in report  # easy and hard tiers
    # OTB: base AUC = (1 * (1000 - 500) / 1000 + 0) / 2 = 25, underthink 50 -> F1 33.33.
    assert "| base | otb | paper | 50.00 | 501 | 25.00 | 50.00 | 501 | 50.00 | 33.33 |" in report
    assert "O = AUC_OAA at t_max = 1000 words" in report


def test_the_report_recomputes_auc_oaa_at_its_own_t_max(runs, tmp_path):
    """--t-max moves AUC_OAA and the paper's OTB score, recomputed from the samples; a run in
    words is refused an explicit one and keeps its own without."""
    # the runs count words; a copy that says it counted tokens is recomputed
    copy = tmp_path / "base" / "otb"
    shutil.copytree(runs / "base" / "otb", copy)
    data = json.loads((copy / "summary.json").read_text())
    (copy / "summary.json").write_text(json.dumps({**data, "length_unit": "tokens of a tok"}))
    at = load_models([tmp_path / "base"], t_max=10_000)[0].runs["otb"].summary
    auc = 100 * (1.0 * (10_000 - 500) / 10_000) / 2  # o0 right at 500 think units, o1 wrong
    assert at.t_max == 10_000
    assert at.by_source["otb-overthink"].auc_oaa == pytest.approx(auc)
    assert at.otb.overthink == pytest.approx(auc)
    assert at.otb.f1 == pytest.approx(2 * auc * 50 / (auc + 50))
    assert load_models([tmp_path / "base"])[0].runs["otb"].summary.t_max == 1000
    with pytest.raises(TraacError, match="counted whitespace words"):
        load_models([runs / "base"], t_max=10_000)
    kept = load_models([runs / "base"], t_max=10_000, words_keep_theirs=True)
    assert kept[0].runs["otb"].summary.t_max == 1000


def test_tables_and_tiers_are_data_the_report_is_written_from(runs):
    models = load_models([runs / "base", runs / "traac"])
    table = main_table(models)
    assert list(table.columns) == [
        "Model", "otb Acc", "otb Len", "tiers Acc", "tiers Len", "Avg Acc", "Avg Len",
    ]  # fmt: skip
    assert [list(row) for row in table.rows] == [
        ["base", "50.00", "501", "62.50", "602", "56.25", "552"],
        ["traac", "100.00", "102", "75.00", "352", "87.50", "227"],
    ]
    report = build_report(models)
    assert table.markdown() in report and tier_table(models).markdown() in report
    assert otb_table(models).markdown() in report
    assert pooled_tiers(models[0]) == {
        "easy": TierStats(accuracy=100.0, mean_response_tokens=402.0),
        "hard": TierStats(accuracy=25.0, mean_response_tokens=802.0),
    }
    records = models[1].runs["tiers"].records()
    assert len(records) == 8 and all(isinstance(r, SampleRecord) for r in records)
    assert sum(r.correct for r in records) == 6
    assert {r.tier for r in records} == {"easy", "hard"}


def test_each_directory_is_a_row(runs):
    models = load_models([runs / "base", runs / "traac" / "tiers"], names=["B", "T"])
    assert [(m.name, sorted(m.runs)) for m in models] == [("B", ["otb", "tiers"]), ("T", ["tiers"])]
    report = build_report(models)
    assert "| T | - | - | 75.00 | 352 | 75.00* | 352* |" in report  # no otb run: averaged over one
    assert "| T | - | - | +12.50 | -41.5% | +12.50 | -41.5% |" in report  # against B on tiers only
    with pytest.raises(TraacError, match="1 --names for 2 directories"):
        load_models([runs / "base", runs / "traac"], names=["only-one"])
    with pytest.raises(TraacError, match=r"no summary\.json"):
        load_models([runs])


def test_units_differ_only_where_the_tokenizers_vocabularies_do(runs):
    """An adapter and its base each read their own copy of one tokenizer: one unit, no note."""

    def counted_by(model: Model, path: str, tokenizer_id: str | None) -> Model:
        unit = f"tokens of the {path} tokenizer"
        return replace(model, runs={k: replace(r, summary=replace(r.summary, length_unit=unit,
                       tokenizer_id=tokenizer_id)) for k, r in model.runs.items()})  # fmt: skip

    base, traac = load_models([runs / "base" / "tiers", runs / "traac" / "tiers"])
    same = [counted_by(base, "/m/base", "ab12"), counted_by(traac, "/runs/adapter", "ab12")]
    assert mixed_units(same) == [] and "different units" not in build_report(same)
    other = [same[0], counted_by(traac, "/m/other", "cd34")]
    assert mixed_units(other) == ["tokens of the /m/base tokenizer",
                                  "tokens of the /m/other tokenizer"]  # fmt: skip
    # summaries written before the hash existed are told apart by the unit's words
    old = [counted_by(base, "/m/base", None), counted_by(traac, "/runs/adapter", None)]
    assert len(mixed_units(old)) == 2 and "different units" in build_report(old)


def test_traac_report_writes_markdown_and_plots(runs, tmp_path, capsys):
    from traac.commands.report import main

    out = tmp_path / "report"
    assert main([str(runs / "base"), str(runs / "traac"), "--output", str(out)]) == 0
    assert "Change against base" in capsys.readouterr().out
    assert (out / "report.md").read_text().startswith("# Evaluation report")
    for name in ("accuracy_vs_length.png", "difficulty.png", "oaa_curves.png", "lengths.png"):
        data = (out / name).read_bytes()
        assert data.startswith(PNG) and len(data) > 10_000, name
        assert base64.b64encode(data).decode() in (out / "report.html").read_text(), name
    # Without difficulty tiers there is no difficulty figure.
    bare = tmp_path / "bare"
    assert main([str(runs / "base" / "otb"), "--output", str(bare)]) == 0
    assert sorted(p.name for p in bare.glob("*.png")) == [
        "accuracy_vs_length.png",
        "lengths.png",
        "oaa_curves.png",
    ]


def test_lengths_of_right_and_wrong_samples(runs):
    models = load_models([runs / "base", runs / "traac"])
    [table] = [t.table for t in report_tables(models) if t.key == "lengths"]
    # base on tiers: right = 4 easy (402 words, 401 before the closer) + 1 hard (802, 801):
    # mean 482, median 402, p90 between the 4th and 5th of five at 0.6: 402 + 0.6 * 400 = 642;
    # wrong = 3 hard.
    row = ["base · tiers", "5", "3", "482 / 402 / 642", "802 / 802 / 802", "481 / 401 / 641",
           "801 / 801 / 801", "–", "0.0"]  # fmt: skip
    assert row in [list(r) for r in table.rows]
    assert table.markdown() in build_report(models)


def add_budget_runs(runs: Path, root: Path) -> None:
    """Copies of the two models, each with runs "made" at think budgets 100 and 300, truncating
    and compressing (tau 0.4): scored responses whose run.json says so, as `traac eval
    --think-budget B [--compress-tau 0.4]` writes it. Compressing is right on one more hard
    item than truncating; the budget of 300 on one more than 100."""
    for model in PROFILES:
        shutil.copytree(runs / model, root / model)
        for budget in (100, 300):
            for tau in (None, 0.4):
                right = 1 + (budget == 300) + (tau is not None)
                answers = [str(2 * k) if k < right else "-1" for k in range(4)]
                rows = [
                    {"id": f"{tier}{k}", "response": f"<think> hmm</think> \\boxed{{{a}}}"}
                    for tier in ("easy", "hard")
                    for k, a in enumerate(answers if tier == "hard" else ["0", "2", "4", "6"])
                ]
                name = f"budget-{budget}-{'compress' if tau else 'truncate'}"
                path = root / f"{model}-{name}.jsonl"
                path.write_text("".join(json.dumps(r) + "\n" for r in rows))
                settings = EvalSettings(
                    dataset=str(runs / "tiers.jsonl"), responses=str(path), max_new_tokens=1000
                )
                run_eval(settings, root / model / name)
                run_file = root / model / name / "run.json"
                run = json.loads(run_file.read_text())
                run["settings"].update(think_budget=budget, compress_tau=tau)
                run_file.write_text(json.dumps(run))


def test_think_budget_runs_form_the_sweep(runs, tmp_path, capsys):
    from traac.commands.report import main

    add_budget_runs(runs, tmp_path)
    models = load_models([tmp_path / "base", tmp_path / "traac"])
    assert sorted(models[0].runs) == ["otb", "tiers"]  # the budget runs are not columns
    assert len(models[0].budget_runs) == 4
    table = budget_table(models)
    assert list(table.columns) == [
        "Model", "Dataset", "Think budget", "interrupted (%)", "truncate Acc",
        "compress 0.4 Acc", "Δ Acc compress 0.4 (pts)", "truncate Len", "compress 0.4 Len",
        "compress 0.4 pruned",
    ]  # fmt: skip
    rows = [list(r) for r in table.rows]
    # hard: 1 (+1 at 300) (+1 compressing) of 4 right, easy all 4.
    assert rows[:3] == [
        ["base", "tiers", "100", "-", "62.50", "75.00", "+12.50", "3", "3", "0.0"],
        ["base", "tiers", "300", "-", "75.00", "87.50", "+12.50", "3", "3", "0.0"],
        ["base", "tiers", "none", "-", "62.50", "-", "-", "602", "-", "-"],
    ]
    assert len(rows) == 6
    out = tmp_path / "report"
    assert main([str(tmp_path / "base"), str(tmp_path / "traac"), "--output", str(out)]) == 0
    assert "Think budget sweep" in capsys.readouterr().out
    data = (out / "budget_sweep.png").read_bytes()
    assert data.startswith(PNG) and len(data) > 10_000
    page = (out / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and page.count("data:image/png;base64,") == 5
    assert table.html() in page and "no pruned steps to show" in page
    assert "http" not in page.replace('href="#', "")  # nothing to fetch: one self-contained file
    # Two runs of one model at the same budget and mode cannot both be rows.
    shutil.copytree(tmp_path / "base" / "budget-100-truncate", tmp_path / "base" / "again")
    with pytest.raises(TraacError, match="two runs on tiers at think budget 100 \\(truncate\\)"):
        load_models([tmp_path / "base"])


def test_a_summary_older_than_more_samples_is_reported_stale(runs, tmp_path, capsys):
    """An interrupted rerun that added samples leaves the old summary beside a longer file."""
    import os
    import shutil

    from traac.commands.report import main

    run = tmp_path / "otb"
    shutil.copytree(runs / "base" / "otb", run)
    assert main([str(run)]) == 0
    assert "warning" not in capsys.readouterr().err  # whole and up to date
    samples = run / "samples.jsonl"
    first = json.loads(samples.read_text().splitlines()[0])
    with open(samples, "a") as f:
        f.write(json.dumps({**first, "sample": 1}) + "\n")
    later = (run / "summary.json").stat().st_mtime + 5
    os.utime(samples, (later, later))
    assert main([str(run)]) == 0
    err = capsys.readouterr().err
    assert f"traac report: warning: {run}: summary.json counts 4 samples" in err
    assert "holds 5; rerun `traac eval` into it" in err


@pytest.mark.parametrize("output", ["file", "/proc/traac-report"])
def test_an_unwritable_output_is_one_line_before_any_work(runs, tmp_path, capsys, output):
    from traac.commands.report import main

    (tmp_path / "file").write_text("")
    target = tmp_path / "file" if output == "file" else Path(output)
    with pytest.raises(TraacError, match=f"--output {target}: "):
        main([str(runs / "base"), "--output", str(target)])
    assert capsys.readouterr().out == ""  # no table printed, then lost
