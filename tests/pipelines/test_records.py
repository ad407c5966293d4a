"""Kept run records: copied out of a run store, read back, and tabulated with seed-level
intervals whose values are worked by hand."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from traac.cli import main as cli_main
from traac.errors import TraacError
from traac.evaluation.harness.results import SampleRecord
from traac.evaluation.harness.runner import SAMPLES_FILE
from traac.pipelines.experiments import PROVENANCE, RUN_SECONDS, ExperimentSettings, run_key
from traac.pipelines.recipe import read_recipe
from traac.pipelines.records import (
    AS_RUN,
    RECIPE,
    SAMPLES,
    compute_table,
    cut_table,
    keep,
    load,
    slug,
    study_tables,
)
from traac.pipelines.study_figure import contrast_bars
from traac.training.telemetry.metrics_file import METRICS_FILE

ROOT = Path(__file__).resolve().parents[2]
VARIANTS = ("CR+LR", "TRAAC without compression")
TIERS = ["easy"] * 4 + ["medium"] * 3 + ["hard"] * 3  # ten problems, four samples each


def samples(right: int, length: int) -> str:
    """Ten problems of four samples (the held-out default), the first `right` problems answered
    right in every sample, every response `length` tokens with a closed think block of half."""
    rows = [SampleRecord(f"p{i}", k, "<think>a</think>\\boxed{1}", i < right, length,
                         length // 2, True, tier=tier).to_json()
            for i, tier in enumerate(TIERS) for k in range(4)]  # fmt: skip
    return "".join(json.dumps(r) + "\n" for r in rows)


def fake_store(tmp_path: Path, variants: tuple[str, ...] = VARIANTS) -> ExperimentSettings:
    """A run store as `traac experiment compare` leaves it, for two variants over three seeds:
    CR+LR gets 5 of 10 right at 50 tokens in every seed; the control 6, 7 and 8 of 10 at 40
    tokens (effects +10, +20, +30 points and -10 tokens, seed by seed)."""
    study = tmp_path / "records" / "study"  # as in a repository, whose root is tmp_path
    study.mkdir(parents=True)
    shutil.copy(ROOT / "recipes" / "testbed.yaml", study / RECIPE)
    settings = ExperimentSettings.make("compare", tmp_path / "out", study / RECIPE, False,
                                       variants, [0, 1, 2], tmp_path / "store", 10)  # fmt: skip
    for run in settings.plan():
        evaluation = settings.eval_dir(run.directory)
        evaluation.mkdir(parents=True)
        control = run.variant != VARIANTS[0]
        right, length = (6 + run.seed, 40) if control else (5, 50)
        (evaluation / SAMPLES_FILE).write_text(samples(right, length))
        (evaluation / "summary.json").write_text("{}\n")
        (run.directory / "model").mkdir()
        (run.directory / "model" / METRICS_FILE).write_text('{"step": 1}\n')
        (run.directory / RUN_SECONDS).write_text('{"seconds": 12.5, "finished": true}\n')
        (run.directory / PROVENANCE).write_text('{"legs": [{"code": {"commit": "abc"}}]}\n')
    settings.base_eval_dir.mkdir(parents=True)
    (settings.base_eval_dir / SAMPLES_FILE).write_text(samples(3, 80))
    return settings


def test_a_store_trained_under_the_old_text_keys_is_kept(tmp_path: Path) -> None:
    """A store trained when run keys hashed the recipe's text (commit 117a743, the
    smollm2-think-verdict study) is kept as it is: each run is found under its old key."""
    settings = fake_store(tmp_path)
    text, parsed = settings.recipe.read_text(), read_recipe(settings.recipe)
    for run in settings.plan():
        overrides = {**run.recipe.overrides}
        assert run.directory.name == run_key(parsed, overrides, settings.model)
        run.directory.rename(run.directory.parent / run_key(text, overrides, settings.model))
    kept = keep(settings, settings.recipe.parent)
    assert len(kept) == 6
    record = json.loads(
        (settings.recipe.parent / "runs" / "cr-lr" / "seed0" / "run.json").read_text()
    )
    overrides = {"mode": "cr_lr", "seed": 0}
    assert record["run_key"] == run_key(text, overrides, settings.model)


def test_keep_records_what_the_run_key_hashed_not_the_variants_later_name(tmp_path: Path) -> None:
    """A TRAAC run trained before the variants named `copy_loss: full` is under the key without
    it: its record says so (the run key is the truth), and the key recomputes from the recipe and
    the recorded overrides."""
    settings = fake_store(tmp_path, ("TRAAC",))
    parsed = read_recipe(settings.recipe)
    for run in settings.plan():
        unnamed = {k: v for k, v in run.recipe.overrides.items() if k != "traac"}
        assert run.recipe.overrides["traac"] == {"copy_loss": "full"}
        run.directory.rename(run.directory.parent / run_key(parsed, unnamed, settings.model))
    assert len(keep(settings, settings.recipe.parent)) == 3
    record = json.loads((settings.recipe.parent / "runs/traac/seed1/run.json").read_text())
    assert record["fields"] == {"mode": "traac"} and record["key_recipe"] == "mapping"
    assert record["overrides"] == {"mode": "traac", "seed": 1}
    assert record["run_key"] == run_key(parsed, record["overrides"], settings.model)


@pytest.mark.parametrize("name", ["samples.jsonl.gz", "metrics.jsonl.gz"])
def test_show_names_a_kept_file_cut_in_half_in_one_line(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A kept file cut in half, as a killed copy leaves it, raised EOFError (not OSError) from
    gzip: `records show` traced back in 28-34 lines (issue 72, kind 4)."""
    settings = fake_store(tmp_path)
    study = settings.recipe.parent
    keep(settings, study)
    path = study / "runs" / slug(VARIANTS[0]) / "seed1" / name
    step = b'{"step": 1, "traac/seconds/generate": 1}\n'
    whole = path.read_bytes() if name.startswith("samples") else gzip.compress(step * 50)
    path.write_bytes(whole[: len(whole) // 2])
    assert cli_main(["records", "show", str(study)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"seed1/{name}" in err and "cut short or damaged" in err, err


def test_keep_that_finds_nothing_says_what_it_looked_for_and_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each exited 0 with "kept 0 run(s): none finished" though finished runs were there, and a
    study that does not exist was "no recipe.yaml" with no word on how one starts (issue 72,
    kind 3)."""
    settings = fake_store(tmp_path)
    study, store = settings.recipe.parent, str(settings.runs)
    report = tmp_path / "out"
    report.mkdir()
    (report / "report.md").write_text("# a report\n")
    variants = ["--variants", *VARIANTS]
    cases = [
        (["--runs", str(report), *variants, "--held-out", "10"],
         f"in {report}, which holds no experiment run (no MODE-seedN-KEY directory); give the "
         "experiment's run store"),
        (["--runs", store, *variants],
         f"looked for 6 run(s) (CR+LR, TRAAC without compression; seeds 0 1 2) evaluated at "
         f"held-out 100 in {store}; found 6 finished run(s) at held-out 10; you asked for 100: "
         "pass --held-out 10"),
        (["--runs", store, *variants, "--seeds", "7", "--held-out", "10"],
         "it holds none of them, but runs of these modes at seeds 0 1 2"),
    ]  # fmt: skip
    for argv, expected in cases:
        assert cli_main(["records", "keep", str(study), *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "kept nothing: " in err and expected in err, err
    assert cli_main(["records", "keep", str(study), "--runs", store, *variants, "--held-out",
                     "10", "--eval-batching", "refill"]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert "whose evaluations decoded padded: pass --eval-batching padded" in err, err
    assert not (study / "runs").exists()  # nothing was kept
    for summary in settings.runs.glob("*/eval-*/summary.json"):
        summary.unlink()  # trained, not evaluated yet
    assert cli_main(["records", "keep", str(study), "--runs", store, *variants,
                     "--held-out", "10"]) == 2  # fmt: skip
    assert "found 6 of them, none evaluated yet" in capsys.readouterr().err
    absent = tmp_path / "records" / "new-study"
    assert cli_main(["records", "keep", str(absent), "--runs", store]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(f"holds no recipe.yaml; a study starts as a directory holding the recipe "
                        f"its runs trained from: mkdir -p {absent} && cp RECIPE "
                        f"{absent}/recipe.yaml"), err  # fmt: skip


def test_kept_records_give_the_seed_level_effect_worked_by_hand(tmp_path: Path) -> None:
    settings = fake_store(tmp_path)
    study = settings.recipe.parent
    kept = keep(settings, study)
    assert len(kept) == 6
    run = study / "runs" / slug(VARIANTS[1]) / "seed2"
    record = json.loads((run / "run.json").read_text())
    assert (record["seed"], record["seconds"], record["legs"]) == (
        2,
        12.5,
        [{"code": {"commit": "abc"}}],
    )
    assert gzip.decompress((run / "metrics.jsonl.gz").read_bytes()) == b'{"step": 1}\n'
    text = gzip.decompress((run / "samples.jsonl.gz").read_bytes())
    assert record["files"] == {
        "samples.jsonl.gz": {"lines": 40, "sha256": hashlib.sha256(text).hexdigest()},
        "metrics.jsonl.gz": {"lines": 1, "sha256": hashlib.sha256(b'{"step": 1}\n').hexdigest()},
    }
    first = (run / "samples.jsonl.gz").read_bytes()
    keep(settings, study)  # kept again: the same bytes
    assert (run / "samples.jsonl.gz").read_bytes() == first

    base, runs = load(study)
    assert base is not None and len(runs) == 6
    tables = study_tables(base, runs, "t", order=VARIANTS)
    assert list(tables.results) == ["Base", *VARIANTS] and tables.t_max == 256
    assert tables.results["CR+LR"].accuracy["overall"].mean == 50.0
    (effect,) = [e for e in tables.effects if e.baseline == "CR+LR"]
    acc, length = (
        effect.result.accuracy["overall"].interval,
        effect.result.length["overall"].interval,
    )
    # +10, +20, +30: mean 20, sd 10, t(0.975, 2) = 4.3027 -> half-width 24.84.
    assert acc.effects == (10.0, 20.0, 30.0)
    assert (acc.low, acc.high) == (pytest.approx(-4.841, abs=1e-3), pytest.approx(44.841, abs=1e-3))
    assert not acc.significant
    # -10 tokens in every seed: no spread, an interval of one point that excludes 0.
    assert (length.mean, length.low, length.high, length.significant) == (-10.0, -10.0, -10.0, True)


def test_records_show_prints_the_tables_and_keep_names_its_mistakes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = fake_store(tmp_path)
    study = settings.recipe.parent
    assert cli_main(["records", "keep", str(study), "--runs", str(settings.runs), "--variants",
                     *VARIANTS, "--seeds", "0", "1", "2", "--held-out", "10"]) == 0  # fmt: skip
    assert "kept 6 run(s)" in capsys.readouterr().out
    assert cli_main(["records", "show", str(study), "--markdown"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("AUC_OAA at t_max 256.") and "+10.00, +20.00, +30.00" in out
    assert "+20.00 [-4.84, +44.84]" in out and "-10.0* [-10.0, -10.0]" in out
    # What the seeds resolve (worked in tests/evaluation/harness/test_seeds.py): 90% [+3.14,
    # +36.86], p 0.074 (one contrast: Holm leaves it), 15 to 25 with a seed left out, MDE 30.97;
    # no margin stated, so no TOST column.
    row = ("| TRAAC without compression − CR+LR | +20.00 [+3.14, +36.86] | 0.074 → 0.074 | "
           "+15.00 to +25.00 | 30.97 | not resolved after Holm: +3.1 to +36.9 points not "
           "excluded |")  # fmt: skip
    assert row in out and "no equivalence margin stated" in out and "TOST" not in out
    assert "Within model: problem bootstrap" in out
    (study / "study.yaml").write_text("margin: 40  # stated before the runs\n")
    assert cli_main(["records", "show", str(study), "--markdown"]) == 0
    out = capsys.readouterr().out
    assert "| TOST p, ±40 | verdict |" in out and "| equivalent within ±40 points |" in out
    (study / "study.yaml").write_text("margin: three\n")
    assert cli_main(["records", "show", str(study)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "margin:" in err and "give a positive number" in err
    assert cli_main(["records", "show", str(tmp_path)]) == 2  # no recipe.yaml
    assert "holds no recipe.yaml" in capsys.readouterr().err
    with pytest.raises(TraacError, match="no kept run"):
        study_tables(None, [], "t")


def test_records_plot_draws_the_contrasts_worked_by_hand(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = fake_store(tmp_path)
    study = settings.recipe.parent
    keep(settings, study)
    (study / "study.yaml").write_text("margin: 40\n")
    panels, margin = contrast_bars(study)
    (acc,), (length,) = panels["Δ accuracy (points)"], panels["Δ length (tokens)"]
    # +10, +20, +30 (as in show's test): se 10/sqrt(3) = 5.774, t(0.95, 2) = 2.920, so the 90%
    # interval is 20 -/+ 16.859, inside ±40, and Holm's p 0.074: equivalent, not better.
    assert (margin, acc.label, acc.mean) == (40, "TRAAC without compression − CR+LR", 20.0)
    assert acc.ninety == pytest.approx((3.141, 36.859), abs=1e-3)
    assert acc.ninety_five == pytest.approx((-4.841, 44.841), abs=1e-3)
    assert acc.verdict == "equivalent within ±40 points"
    assert (length.mean, length.ninety, length.ninety_five, length.verdict) == (
        -10.0, (-10.0, -10.0), (-10.0, -10.0), "")  # fmt: skip
    figure = tmp_path / "figures" / "contrasts.png"
    assert cli_main(["records", "plot", str(study), "--output", str(figure)]) == 0
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    capsys.readouterr()
    assert cli_main(["records", "plot", str(study), "--output", str(tmp_path / "c.txt")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--output" in err and ".png" in err
    for seed in ("seed1", "seed2"):  # one seed left: no interval to draw
        for variant in VARIANTS:
            shutil.rmtree(study / "runs" / slug(variant) / seed)
    assert cli_main(["records", "plot", str(study), "--output", str(figure)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "two seeds or more" in err


def test_what_compression_costs_a_step_worked_by_hand(tmp_path: Path) -> None:
    """Per step, decoding 10 then 30 s, probe 1 then 3, re-answers 2 then 0: means 20, 2 and 1,
    a 15% share; a second seed's 10% gives 12.5 ± 2.5. The held-out evaluation's line and a
    run without phase seconds count for nothing."""
    settings = fake_store(tmp_path)
    study = settings.recipe.parent
    keep(settings, study)
    lines = {0: [{"step": 1, "traac/seconds/generate": 10, "traac/seconds/score": 1,
                  "traac/seconds/regenerate": 2},
                 {"step": 2, "traac/seconds/generate": 30, "traac/seconds/score": 3,
                  "traac/seconds/regenerate": 0},
                 {"step": 2, "split": "eval", "traac/seconds/generate": 999}],
             1: [{"step": 1, "traac/seconds/generate": 20, "traac/seconds/score": 1,
                  "traac/seconds/regenerate": 1}]}  # fmt: skip
    for seed, rows in lines.items():
        path = study / "runs" / slug(VARIANTS[1]) / f"seed{seed}" / "metrics.jsonl.gz"
        path.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode()))
    _, runs = load(study)
    table = compute_table(runs, order=VARIANTS)
    assert table.rows == [(VARIANTS[1], "2", "20.0 ± 0.0", "1.5 ± 0.5", "1.0 ± 0.0", "12.5 ± 2.5")]
    path.write_bytes(b"not gzip")
    with pytest.raises(TraacError, match=r"seed1/metrics.jsonl.gz: cut short or damaged"):
        compute_table(load(study)[1])


def test_what_compression_cut_worked_by_hand(tmp_path: Path) -> None:
    """Seed 0, step 1: 4 candidates, 1 copy that lost 2 steps and 10 tokens; step 2: 6
    candidates, 3 copies of 2 steps and 6 tokens each: 40% compressed, 2 steps and
    (10 + 18) / 4 = 7 tokens a copy, responses of (100 + 60) / 2 = 80 tokens. Seed 1: 20%, 4,
    9 and 50. Means 30 ± 10, 3 ± 1, 8 ± 1, 65 ± 15; the variants without copies have no row."""
    settings = fake_store(tmp_path)
    study = settings.recipe.parent
    keep(settings, study)

    def step(
        n: int, candidates: int, copies: int, steps: float, tokens: float, length: int
    ) -> dict[str, float]:
        return {"step": n, "traac/all/prompts": 1, "traac/all/rollouts": 8,
                "traac/all/candidates": candidates, "traac/all/compressed_rollouts": copies,
                "traac/all/steps_removed": steps, "traac/all/tokens_removed": tokens,
                "traac/all/response_tokens": length}  # fmt: skip

    rows = [step(1, 4, 1, 2, 10, 100), step(2, 6, 3, 2, 6, 60)]
    for seed, lines in {0: rows, 1: [step(1, 5, 1, 4, 9, 50)]}.items():
        path = study / "runs" / slug(VARIANTS[1]) / f"seed{seed}" / "metrics.jsonl.gz"
        path.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in lines).encode()))
    table = cut_table(load(study)[1], order=VARIANTS)
    cells = ("30.0 ± 10.0", "3.0 ± 1.0", "8.0 ± 1.0", "65.0 ± 15.0")
    assert table.rows == [(VARIANTS[1], "2", *cells)]


def test_a_studys_run_sh_refuses_another_commit_in_one_line() -> None:
    """This checkout is not at the verdict study's commit (117a743), so its run.sh stops before
    any work, naming both commits."""
    out = subprocess.run(["bash", str(ROOT / "records/smollm2-think-verdict/run.sh"), "0",
                          "store", "out"], capture_output=True, text=True, timeout=30)  # fmt: skip
    assert out.returncode == 2 and out.stdout == "" and out.stderr.count("\n") == 1
    assert "not the study's commit 117a743c78ddc128b383c1209b8aaab3ff30e29b" in out.stderr


def verified(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    """`traac records verify` of the fake study against tmp_path's README.md: its exit status
    and its lines (the summary, or one a problem)."""
    code = cli_main(["records", "verify", str(tmp_path / "records" / "study")])
    out = capsys.readouterr()
    return code, (out.out + out.err).strip().splitlines()


def test_verify_passes_kept_records_and_fails_each_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kept records and a README that pastes `show`'s block and cites its figures verify; a
    rewritten field, a missing sample, a changed figure in the block or in the cited prose each
    make it exit 2, one line a problem."""
    settings = fake_store(tmp_path)
    study = settings.recipe.parent
    keep(settings, study)
    assert cli_main(["records", "show", str(study), "--markdown", "--tables", "bounds"]) == 0
    block = capsys.readouterr().out.strip()
    readme = tmp_path / "README.md"
    cited = "The control gains +20.00 points [90%: +3.14, +36.86], p 0.074; MDE 31.0."
    readme.write_text(f"<!-- records: records/study --tables bounds -->\n{block}\n"
                      f"<!-- /records -->\n\n<!-- cites: records/study -->\n{cited}\n"
                      "<!-- /cites -->\n")  # fmt: skip
    code, lines = verified(tmp_path, capsys)
    assert code == 0 and len(lines) == 1, lines
    assert cli_main(["records", "verify", str(study), "--pages", str(tmp_path / "nope.md")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--pages: " in err and "nope.md not found" in err
    assert (
        "6 runs and the base as kept" in lines[0] and "1 records block(s) and 5 cited" in lines[0]
    )

    run = study / "runs" / "cr-lr" / "seed1"
    record = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**record, "fields": {"mode": "cr", "seed": 1}}))
    code, lines = verified(tmp_path, capsys)
    assert code == 2 and lines == [
        "runs/cr-lr/seed1: fields {'mode': 'cr', 'seed': 1} are not the overrides its key "
        "hashed, less the seed ({'mode': 'cr_lr', 'seed': 1})"
    ]
    forged = {**record["overrides"], "mode": "cr"}
    (run / "run.json").write_text(json.dumps({**record, "overrides": forged}))
    code, lines = verified(tmp_path, capsys)
    assert code == 2 and any("is not the key of the recipe" in line for line in lines)
    (run / "run.json").write_text(json.dumps(record))

    samples = gzip.decompress((run / "samples.jsonl.gz").read_bytes()).splitlines(keepends=True)
    (run / "samples.jsonl.gz").write_bytes(gzip.compress(b"".join(samples[1:])))
    code, lines = verified(tmp_path, capsys)
    # and the figures that sample made no longer are what `show` prints: the docs' lines follow
    assert code == 2 and all(line.startswith("README.md: ") for line in lines[2:])
    assert lines[0].startswith("runs/cr-lr/seed1: samples.jsonl.gz holds 39 lines (sha256 ")
    assert lines[0].endswith(f"its record 40 (sha256 {record['files'][SAMPLES]['sha256'][:12]})")
    assert lines[1] == "runs/cr-lr/seed1: 1 problem(s) without 4 samples (first p0)"
    (run / "samples.jsonl.gz").write_bytes(gzip.compress(b"".join(samples)))
    assert verified(tmp_path, capsys)[0] == 0

    readme.write_text(readme.read_text().replace("| 30.97 |", "| 30.96 |"))
    code, lines = verified(tmp_path, capsys)
    assert code == 2 and lines == ["README.md: the records block of records/study is not what "
                                   "`traac records show records/study --markdown --tables "
                                   "bounds` prints; paste its output"]  # fmt: skip
    readme.write_text(
        readme.read_text().replace("| 30.96 |", "| 30.97 |").replace("90%: +3.14", "90%: +3.15")
    )
    code, lines = verified(tmp_path, capsys)
    assert code == 2 and lines == ["README.md: +3.15 is cited from records/study but `traac "
                                   "records show` prints no such figure"]  # fmt: skip


def migrated_study(tmp_path: Path) -> Path:
    """A study kept as the verdict study's: its runs trained from a recipe that spelled TRAAC's
    settings flat (`recipe.as-run.yaml`, before one spelling), CR+LR under the old keys of that
    text and the control under the parsed recipe's; `recipe.yaml` then migrated to the block."""
    settings = fake_store(tmp_path)
    study = settings.recipe.parent
    text = settings.recipe.read_text()
    flat = text.replace("traac:  # the compression settings (mode traac's block)\n", "")
    (study / AS_RUN).write_text(flat.replace("\n  ", "\n"))
    as_run = read_recipe(study / AS_RUN)
    assert as_run["scorer"] == "attention" and "traac" not in as_run  # written flat
    for run in settings.plan():
        overrides = {**run.recipe.overrides}
        # a key of the parsed recipe hashes its flat form: the same under either spelling
        assert run.directory.name == run_key(as_run, overrides, settings.model)
        if run.variant == VARIANTS[0]:
            old = run_key((study / AS_RUN).read_text(), overrides, settings.model)
            run.directory.rename(run.directory.parent / old)
    assert len(keep(settings, study)) == 6
    return study


def test_a_migrated_study_keeps_and_verifies_against_the_recipe_its_runs_trained_from(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A study whose recipe.yaml was respelled keeps its runs (found under the old text's keys)
    with the sha256 of the bytes they trained from, and verifies: recipe.yaml alone failed both,
    the runs' keys and sha256 being of the text it no longer is."""
    study = migrated_study(tmp_path)
    sha = hashlib.sha256((study / AS_RUN).read_bytes()).hexdigest()
    records = {r.directory.relative_to(study).as_posix(): r.record for r in load(study)[1]}
    assert {r["recipe_sha256"] for r in records.values()} == {sha}
    assert {k: r["key_recipe"] for k, r in records.items() if k.endswith("seed0")} == {
        "runs/cr-lr/seed0": "text",
        "runs/traac-without-compression/seed0": "mapping",
    }
    code, lines = verified(tmp_path, capsys)
    assert code == 0 and len(lines) == 1 and "6 runs and the base as kept" in lines[0], lines


def test_a_migration_that_changed_a_value_fails_verify_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """recipe.yaml migrated with one value changed: verify names the field and both values (and
    the runs whose keys hashed the parsed recipe no longer recompute)."""
    study = migrated_study(tmp_path)
    recipe = study / RECIPE
    recipe.write_text(recipe.read_text().replace("  probe_heads: gated\n", "  probe_heads: all\n"))
    code, lines = verified(tmp_path, capsys)
    assert code == 2 and lines[0] == (
        "recipe.as-run.yaml and recipe.yaml differ in probe_heads (gated; all): a migration "
        "respells the recipe and keeps every value (settings compared under their flat names)"
    )
    assert len(lines) == 4 and all(
        line.startswith("runs/traac-without-compression/seed") and "is not the key" in line
        for line in lines[1:]
    ), lines


def test_a_tampered_as_run_recipe_fails_verify(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The as-run recipe's bytes changed (its values not): every run's recipe_sha256 and the
    old text keys no longer match it."""
    study = migrated_study(tmp_path)
    with (study / AS_RUN).open("a") as recipe:
        recipe.write("# edited\n")
    code, lines = verified(tmp_path, capsys)
    sha = [line for line in lines if line.endswith("recipe_sha256 is not the study's "
                                                  "recipe.as-run.yaml's")]  # fmt: skip
    keys = [line for line in lines if "is not the key of the recipe" in line]
    assert code == 2 and len(sha) == 6 and len(lines) == 9, lines
    assert len(keys) == 3 and all(line.startswith("runs/cr-lr/seed") for line in keys)
