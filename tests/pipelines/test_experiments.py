"""`traac experiment`: the compare and ablation plans (every run parsed up front, one run store
keyed by what a run depends on), mean ± standard error over seeds, effects paired by seed, the
Pareto front, and a quick compare end to end that a rerun resumes."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from traac import cli
from traac.errors import TraacError
from traac.evaluation.harness.paper_metrics import GroupStats
from traac.evaluation.harness.results import EvalSummary, SampleRecord
from traac.pipelines import experiments
from traac.pipelines.experiment_results import (
    Stat,
    effects_markdown,
    effects_table_of,
    effects_tables,
    paired_effects,
    pareto_front,
    tier_effects_table,
    within_model_table,
)
from traac.pipelines.experiments import (
    ExperimentSettings,
    compression_markdown,
    end_leg,
    record_leg,
    run_experiment,
    run_key,
    run_keys,
    run_seconds,
    variant_overrides,
)
from traac.pipelines.recipe import read_recipe
from traac.pipelines.stages import HeldOut, Recipe
from traac.pipelines.variants import ABLATIONS, COMPARE, CONTRASTS, EXPERIMENTS
from traac.training.methods.base import LengthMethod
from traac.training.methods.dler import METHOD as DLER
from traac.training.methods.registry import METHODS
from traac.training.methods.traac import TRAAC, TraacSettings

RECIPE = Path(__file__).resolve().parents[2] / "recipes" / "testbed.yaml"


def settings(tmp_path: Path, name: str = "compare", **kwargs) -> ExperimentSettings:
    return ExperimentSettings.make(name, tmp_path / name, RECIPE, quick=True, **kwargs)


def test_compare_plans_every_method_and_seed_from_one_recipe(tmp_path: Path) -> None:
    runs = settings(tmp_path).plan()
    assert [(r.variant, r.seed) for r in runs] == [(v, s) for v in COMPARE for s in (0, 1, 2)]
    modes = {r.variant: r.recipe.overrides["mode"] for r in runs}
    # TRAAC's own modes but the one `compare` leaves to the ablations, and every method with
    # variants of its own (the registry's, so a new method needs no line here).
    peers = {fields["mode"] for m in METHODS.values() for _, fields in m.compare}
    own = {"traac", "cr", "cr_lr", "traac_no_compression"}
    assert set(modes.values()) == own | peers
    assert peers >= {name for name, m in METHODS.items() if isinstance(m, LengthMethod)}
    # DLER trains under its own optimiser, as does the TRAAC run that isolates it.
    profiles = {r.variant for r in runs if r.recipe.overrides.get("optimizer_profile") == "dler"}
    assert profiles == {"DLER", "DLER, difficulty-aware", "TRAAC, DLER optimiser"}
    assert {r.recipe.overrides["dynamic_sampling"] for r in runs if "dynamic" in r.variant} == {
        "resample"
    }
    # Same recipe, steps and sampling for all: only the variant's fields and the seed differ.
    for run in runs:
        extra = set(run.recipe.overrides) - set(COMPARE[run.variant]) - {"seed"}
        assert {k: run.recipe.overrides[k] for k in extra} == settings(tmp_path).train_overrides
    assert len({r.directory for r in runs}) == len(runs)
    assert all(r.directory.parent == tmp_path / "runs" for r in runs)


def test_step_entropy_is_paired_with_the_probe_and_with_its_answer_only_copies(
    tmp_path: Path,
) -> None:
    runs = {r.variant: r for r in settings(tmp_path, seeds=[0]).plan()}
    run = runs["TRAAC, step entropy, answer-only copies"]
    masked = run.recipe.parse(Path("testbed"), run.directory)[1]
    probe = masked.method_settings
    assert (probe.scorer, probe.copy_loss) == ("step_entropy", "answer_only")
    pairs = {(baseline, variant) for _, baseline, variant in CONTRASTS["compare"]}
    assert ("TRAAC", "TRAAC, step-entropy scorer") in pairs
    assert ("TRAAC, step-entropy scorer", "TRAAC, step entropy, answer-only copies") in pairs


def test_the_answer_only_copies_are_paired_with_the_length_reward_they_must_beat() -> None:
    pairs = {(baseline, variant) for _, baseline, variant in CONTRASTS["compare"]}
    assert ("CR+LR", "TRAAC, answer-only copies") in pairs
    assert ("TRAAC", "TRAAC, answer-only copies") in pairs


def test_the_run_store_is_shared_by_the_experiments(tmp_path: Path) -> None:
    """CR+LR is in both experiments: one directory, trained once whichever asks first."""
    compare = {(r.variant, r.seed): r.directory for r in settings(tmp_path).plan()}
    ablations = {(r.variant, r.seed): r.directory for r in settings(tmp_path, "ablations").plan()}
    assert compare[("CR+LR", 1)] == ablations[("CR+LR", 1)]
    assert compare[("TRAAC", 0)] == ablations[("TRAAC", 0)]
    assert set(ablations) == {(v, s) for v in ABLATIONS for s in (0, 1, 2)}
    compressions = {ABLATIONS[v].get("traac", {}).get("compression") for v, _ in ablations}
    assert compressions == {None, "early_exit", "early_exit_attention_weights"}


def test_run_key_changes_with_anything_a_run_depends_on() -> None:
    recipe = {"max_steps": 150, "beta": 0.04}
    key = run_key(recipe, {"mode": "alp", "seed": 0}, "testbed")
    assert key.startswith("alp-seed0-")
    assert key == run_key(recipe, {"seed": 0, "mode": "alp"}, "testbed")  # order-free
    assert key == run_key({"beta": 0.04, "max_steps": 150}, {"mode": "alp", "seed": 0}, "testbed")
    assert key != run_key(recipe, {"mode": "alp", "seed": 1}, "testbed")
    assert key != run_key({**recipe, "beta": 0.05}, {"mode": "alp", "seed": 0}, "testbed")
    assert key != run_key(recipe, {"mode": "alp", "seed": 0}, "testbed-quick")
    assert key != run_key(recipe, {"mode": "alp", "seed": 0, "alp": {"beta": 2}}, "testbed")


@pytest.mark.parametrize(
    ("experiment", "variant", "hashed", "key"),
    [
        ("compare", "TRAAC", {"copy_loss": "full", "mode": "traac", "seed": 0},
         "traac-seed0-dd4146525bcb"),
        ("ablations", "TRAAC, random scorer",
         {"copy_loss": "full", "mode": "traac", "scorer": "random", "seed": 0},
         "traac-seed0-52f9cd65418e"),
        ("compare", "L1-Max", {"l1_alpha": 0.01875, "l1_budget_max": 64, "l1_budget_min": 2,
                               "mode": "l1_max", "seed": 0}, "l1_max-seed0-d4a43ba081f7"),
        ("compare", "DLER", {"dler_length": 64, "mode": "dler", "optimizer_profile": "dler",
                             "seed": 0}, "dler-seed0-590153f58376"),
        ("compare", "Short-RL", {"mode": "short_rl", "seed": 0, "short_rl_length_tolerance": 2},
         "short_rl-seed0-1261feab7dbe"),
        ("compare", "prime-rl length penalty",
         {"mode": "prime_rl", "scale_rewards": "none", "seed": 0}, "prime_rl-seed0-ca907eae069f"),
    ],
)  # fmt: skip
def test_a_variants_key_is_the_one_it_had_before_the_blocks(
    experiment: str, variant: str, hashed: dict, key: str
) -> None:
    """The recipes and variants write the methods' settings in blocks now; the keys hash their
    flat names, so every run of a store keeps its key (these are main's at e10f7fd, whose
    recipes and variants wrote them flat; Short-RL's and prime-rl's, those its results were
    trained under, before the blocks)."""
    overrides = {**variant_overrides(EXPERIMENTS[experiment][variant], 160), "seed": 0}
    first = run_keys(read_recipe(RECIPE), "", overrides, "testbed")[0]
    assert first == ("mapping", hashed, key)


def test_run_keys_keep_their_bytes_with_the_typed_choices() -> None:
    """The compressing modes' choices are asked of their owners (`CompressionKind`,
    `CopySettings`), but their fields keep the strings users write: a variant's key is the one
    its runs were stored under, given as written or read off the mode's settings."""
    recipe = {"beta": 0.0, "max_steps": 150}
    settings = TraacSettings(compression="early_exit", copy_loss="answer_only",
                             copy_pool="all_correct")  # fmt: skip
    early = {"mode": TRAAC.name, "compression": settings.compression, "seed": 0}
    copies = {"mode": TRAAC.name, "copy_loss": settings.copy_loss,
              "copy_pool": settings.copy_pool, "seed": 1}  # fmt: skip
    assert run_key(recipe, early, "testbed") == "traac-seed0-6f4359558032"
    assert run_key(recipe, copies, "testbed") == "traac-seed1-93f6f965557a"
    assert run_key(recipe, {"mode": DLER.name, "seed": 2}, "testbed") == "dler-seed2-6b0018cafeda"
    assert settings.compression_kind.prefix and settings.copies.masks_think


def test_a_comment_in_the_recipe_keeps_every_run_key(tmp_path: Path) -> None:
    """Keys hash the parsed recipe: a comment or blank line added to it retrains nothing."""
    recipe = tmp_path / "recipe.yaml"
    shutil.copy(RECIPE, recipe)
    settings = ExperimentSettings.make("compare", tmp_path / "out", recipe, False, ["CR+LR"],
                                       [0], tmp_path / "store", 10)  # fmt: skip
    before = [run.directory for run in settings.plan()]
    recipe.write_text("# edited\n" + recipe.read_text() + "\n# one more note\n")
    assert [run.directory for run in settings.plan()] == before


def test_a_store_keyed_by_the_recipe_text_is_found_under_its_old_keys(tmp_path: Path) -> None:
    """A store trained before the keys hashed the parsed recipe (commit 117a743 and earlier
    hashed its text) keeps its runs: `plan` finds each under its old key, and a run with no
    old directory goes under the new one."""
    recipe = RECIPE
    store = tmp_path / "store"
    settings = ExperimentSettings.make("compare", tmp_path / "out", recipe, False,
                                       ["CR+LR", "TRAAC"], [0], store, 10)  # fmt: skip
    old = store / run_key(recipe.read_text(), {"mode": "cr_lr", "seed": 0}, "testbed")
    (old / "model").mkdir(parents=True)
    runs = {run.variant: run.directory for run in settings.plan()}
    new = run_key(read_recipe(recipe), {**COMPARE["TRAAC"], "seed": 0}, "testbed")
    assert runs == {"CR+LR": old, "TRAAC": store / new}
    (store / run_key(read_recipe(recipe), {"mode": "cr_lr", "seed": 0}, "testbed")).mkdir()
    assert settings.plan()[0].directory != old  # both there: the new key wins


def test_a_traac_run_keyed_before_the_variants_named_their_copies_is_found(
    tmp_path: Path,
) -> None:
    """Before the TRAAC variants named the paper's full copies (`copy_loss: full`), the paper's
    preset filled them and the key had no `copy_loss`: such a run is the same run where the
    recipe leaves the copies unset, and is found; where it masks them, it is not."""
    store = tmp_path / "store"
    variant = "TRAAC, after-answer compression"
    unnamed = {"mode": "traac", "compression": "after_answer", "seed": 0}

    def directory(recipe: Path) -> Path:
        settings = ExperimentSettings.make("compare", tmp_path / "out", recipe, False,
                                           [variant], [0], store, 10)  # fmt: skip
        return settings.plan()[0].directory

    unset = tmp_path / "unset.yaml"  # the testbed recipe, its copies left to the preset
    unset.write_text(RECIPE.read_text().replace("copy_loss: full", ""))
    for recipe in (RECIPE, unset):  # copies full, or unset
        old = store / run_key(read_recipe(recipe), unnamed, "testbed")
        (old / "model").mkdir(parents=True)
        assert directory(recipe) == old
    masked = tmp_path / "masked.yaml"
    masked.write_text(RECIPE.read_text().replace("copy_loss: full", "copy_loss: answer_only"))
    (store / run_key(read_recipe(masked), unnamed, "testbed") / "model").mkdir(parents=True)
    assert directory(masked) == store / run_key(
        read_recipe(masked), {**COMPARE[variant], "seed": 0}, "testbed"
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"variants": ["TRAAC", "GRPO"]}, r"^--variants: unknown \['GRPO'\]; compare has"),
        ({"seeds": [0, 0]}, r"^--seeds: \[0, 0\] must be distinct integers >= 0"),
        ({"seeds": []}, r"^--seeds: \[\] must be distinct"),
    ],
)
def test_bad_choices_fail_in_one_line(tmp_path: Path, kwargs: dict, message: str) -> None:
    with pytest.raises(TraacError, match=message):
        settings(tmp_path, **kwargs)


def test_a_bad_field_fails_before_training_naming_the_run(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    text = RECIPE.read_text().replace("max_completion_length: 160", "max_completion_length: 20")
    bad.write_text(text)  # L1-Max's 100-token minimum budget scales to 0 under a 20-token cap
    s = ExperimentSettings.make("compare", tmp_path / "c", bad, quick=True, variants=["L1-Max"])
    with pytest.raises(TraacError, match=r"^L1-Max \(seed 0\): l1_max\.budget_min: 0 "):
        s.plan()


def test_peer_constants_scale_with_the_recipes_response_cap(tmp_path: Path) -> None:
    """Under the testbed's 160-token cap a token stands for 62.5 of the paper's (the values its
    run store was keyed by); under smollm2-think's 256, for 39.06."""
    think = RECIPE.parent / "smollm2-think.yaml"
    variants = ["DLER", "L1-Max", "ShorterBetter"]
    for recipe, dler, budgets, alpha, beta in (
        (RECIPE, 64, (2, 64), 0.01875, 0.0625),
        (think, 102, (3, 102), 0.01171875, 0.0390625),
    ):
        s = ExperimentSettings.make("compare", tmp_path / "c", recipe, False, variants, [0])
        fields = {r.variant: r.fields for r in s.plan()}
        assert fields["DLER"] == {"mode": "dler", "optimizer_profile": "dler",
                                  "dler": {"length": dler}}  # fmt: skip
        l1 = fields["L1-Max"]["l1_max"]
        assert (l1["budget_min"], l1["budget_max"]) == budgets
        assert l1["alpha"] == pytest.approx(alpha)
        assert fields["ShorterBetter"]["shorterbetter"]["beta"] == pytest.approx(beta)


def test_the_base_model_is_the_recipes(tmp_path: Path) -> None:
    think = RECIPE.parent / "smollm2-think.yaml"
    assert settings(tmp_path).model == "testbed-quick"
    s = ExperimentSettings.make("compare", tmp_path / "c", think, False, ["TRAAC"], [0], None, 40)
    assert s.model == "smollm2-think" and s.held_out.per_tier == 40
    assert s.title == "TRAAC and its peers on smollm2-think"
    assert settings(tmp_path, "ablations").title == "Ablations on the testbed"
    (run,) = s.plan()
    assert run.directory != settings(tmp_path, variants=["TRAAC"], seeds=[0]).plan()[0].directory
    with pytest.raises(TraacError, match=r"^--held-out: 0 problems a tier"):
        settings(tmp_path, held_out_per_tier=0)


def test_mean_and_standard_error_over_seeds() -> None:
    stat = Stat.of([60.0, 70.0, 80.0])
    assert stat.mean == 70.0
    assert stat.se == pytest.approx(10.0 / math.sqrt(3))  # sample s.d. 10 over sqrt(3)
    assert stat.cell() == "70.0 ± 5.8"
    assert Stat.of([42.0]) == Stat(42.0, None) and Stat.of([42.0]).cell() == "42.0"


def summary(acc: float, length: float, auc: float) -> EvalSummary:
    """An evaluation whose every tier and overall has this accuracy and length."""

    def group(shift: float) -> GroupStats:
        return GroupStats(
            n_items=10, n_samples=10, accuracy=acc + shift, mean_response_tokens=length + shift,
            mean_think_tokens=length / 2, closed_rate=100.0, auc_oaa=auc,
        )  # fmt: skip

    tiers = {"easy": group(10.0), "medium": group(0.0), "hard": group(-10.0)}
    return EvalSummary(
        dataset="testbed:all", model="m", overall=group(0.0), t_max=256, length_unit="tokens",
        accuracy_by_sample={0: acc}, accuracy_std_over_samples=0.0, by_tier=tiers,
    )  # fmt: skip


def test_contrasts_name_variants_of_their_experiment() -> None:
    assert set(CONTRASTS) == set(EXPERIMENTS)
    for name, contrasts in CONTRASTS.items():
        for _, baseline, variant in contrasts:
            assert {baseline, variant} <= set(EXPERIMENTS[name]) and baseline != variant


def test_effects_are_differences_paired_by_seed() -> None:
    """Seed by seed, not mean minus mean: the variant's seed-0 run beats the baseline's by 4 and
    seed 1 by 2 (so +3.0 ± 1.0), though the baseline's spread alone (60 vs 70) would swamp it."""
    summaries = {
        "CR": {0: summary(60.0, 50.0, 40.0), 1: summary(70.0, 40.0, 45.0)},
        "CR+LR": {0: summary(64.0, 30.0, 44.0), 1: summary(72.0, 26.0, 46.0), 2: summary(0, 1, 0)},
        "CR, dynamic sampling": {5: summary(99.0, 10.0, 90.0)},  # no seed in common with CR
    }
    contrasts = CONTRASTS["compare"]
    (effect,) = paired_effects(contrasts, summaries)  # only CR -> CR+LR is there, seeds 0 and 1
    assert (effect.baseline, effect.variant) == ("CR", "CR+LR")
    r = effect.result
    assert r.seeds == (0, 1)
    for tier in ("easy", "medium", "hard", "overall"):
        assert r.accuracy[tier] == Stat(3.0, pytest.approx(1.0))
        assert r.length[tier] == Stat(-17.0, pytest.approx(3.0))  # -20 and -14
    assert r.auc_oaa == Stat(2.5, pytest.approx(1.5))
    assert effect.pooled is None  # no samples given
    row = tier_effects_table([effect]).rows[0]
    assert row[:3] == ("format and length rewards", "CR+LR − CR", "2")
    assert row[-3:] == ("+3.0 ± 1.0", "-17.0 ± 3.0", "+2.5 ± 1.5")
    # Seed level: effects +4 and +2, t(0.975, 1) = 12.706 x sd 1.414 / sqrt 2 = 12.706.
    row = effects_table_of([effect]).rows[0]
    assert row[:4] == ("CR+LR − CR", "2", "+4.00, +2.00", "+3.00 [-9.71, +15.71]")
    assert row[4:6] == ("-20.0, -14.0", "-17.0 [-55.1, +21.1]")
    assert not within_model_table([effect]).rows  # no samples given
    assert len(effects_tables([effect], None)) == 2
    # The report says what the two seeds resolve: t(0.95, 1) = 6.314 x 1 -> 90% [-3.31, +9.31].
    report = effects_markdown([effect], 5.0)
    assert "| CR+LR − CR | +3.00 [-3.31, +9.31] |" in report and "| TOST p, ±5 |" in report


def record(pid: str, sample: int, correct: bool, length: int) -> SampleRecord:
    return SampleRecord(pid, sample, "", correct, length, length - 1, True)


def test_effects_pair_problems_over_the_shared_seeds_samples() -> None:
    """Each problem's samples of every seed both variants ran are pooled, then paired: problem
    p1 goes from 0/4 to 3/4 right (+75), p2 stays 4/4 (0), so +37.5 points; seed 2, which the
    baseline lacks, is left out of both sides."""
    summaries = {
        "CR": {0: summary(60.0, 50.0, 40.0), 1: summary(70.0, 40.0, 45.0)},
        "CR+LR": {0: summary(64.0, 30.0, 44.0), 1: summary(72.0, 26.0, 46.0), 2: summary(0, 1, 0)},
    }
    records = {
        "CR": {seed: [record("p1", k, False, 40), record("p2", k, True, 20)]
               for seed in (0, 1) for k in (0, 1)},
        "CR+LR": {0: [record("p1", 0, True, 30), record("p1", 1, True, 30),
                      record("p2", 0, True, 10), record("p2", 1, True, 10)],
                  1: [record("p1", 0, True, 30), record("p1", 1, False, 30),
                      record("p2", 0, True, 10), record("p2", 1, True, 10)],
                  2: [record("p1", 0, False, 500), record("p2", 0, False, 500)]},
    }  # fmt: skip
    (effect,) = paired_effects(CONTRASTS["compare"], summaries, records)
    pooled = effect.pooled
    assert pooled is not None and pooled.accuracy.items == 2
    assert pooled.accuracy.delta == pytest.approx(37.5)
    assert pooled.response_tokens.delta == pytest.approx(-10.0)  # -10 on both problems
    (row,) = within_model_table([effect]).rows
    # The problem bootstrap holds the models fixed: never starred, even where it excludes 0, and
    # in a table of its own, labelled within-model, out of the effects' columns.
    assert row[1:] == (pooled.accuracy.cell(2, mark=False), "-10.0 [-10.0, -10.0]")
    assert "Within model" in effects_tables([effect], None)[-1].title


def test_run_seconds_are_recorded_once_and_read_back(tmp_path: Path) -> None:
    assert run_seconds(tmp_path, None) is None  # trained before runs recorded their time
    assert run_seconds(tmp_path, 12.34) == 12.3
    assert run_seconds(tmp_path, None) == 12.3
    (tmp_path / "seconds.json").write_text("{not json")
    assert run_seconds(tmp_path, None) is None


def test_a_stopped_run_adds_its_legs(tmp_path: Path) -> None:
    """A run stopped at step 48 and continued later costs both legs, not the last one only."""
    assert run_seconds(tmp_path, 2787.0, finished=False) == 2787.0
    assert run_seconds(tmp_path, 100.0, finished=False) == 2887.0  # stopped again
    assert run_seconds(tmp_path, 497.7) == 3384.7  # the leg that finished it
    assert run_seconds(tmp_path, None) == 3384.7
    assert run_seconds(tmp_path, 10.0) == 10.0  # a finished record is not added to (retrained)


def test_a_run_stopped_mid_training_records_that_leg(tmp_path: Path, monkeypatch) -> None:
    """Ctrl-C in a run's training: the checkpoint is the trainer's to save, the time spent is
    the experiment's, recorded unfinished so that the leg that finishes it adds to it."""

    def stopped(*args: object) -> Path:
        raise KeyboardInterrupt

    monkeypatch.setattr("traac.pipelines.experiments.resolve_model", lambda *a: str(tmp_path))
    monkeypatch.setattr(HeldOut, "evaluate", lambda *a: None)
    monkeypatch.setattr(Recipe, "train", stopped)
    s = settings(tmp_path, variants=["TRAAC"], seeds=[0])
    with pytest.raises(KeyboardInterrupt):
        run_experiment(s)
    (run,) = s.plan()
    record = json.loads((run.directory / "seconds.json").read_text())
    assert record["finished"] is False and record["seconds"] >= 0


def test_a_legs_provenance_is_on_record_before_it_trains(tmp_path: Path, monkeypatch) -> None:
    """A leg killed outright (SIGKILL: no handler runs) still names its commit and CPU, which
    decide the weights: the leg is recorded as it starts, once a leg."""
    legs_at_train: list[int] = []

    def killed(recipe: Recipe, base: Path, model: Path, progress: object) -> Path:
        legs = json.loads((model.parent / "provenance.json").read_text())["legs"]
        legs_at_train.append(len(legs))
        raise KeyboardInterrupt

    monkeypatch.setattr("traac.pipelines.experiments.resolve_model", lambda *a: str(tmp_path))
    monkeypatch.setattr(HeldOut, "evaluate", lambda *a: None)
    monkeypatch.setattr(Recipe, "train", killed)
    s = settings(tmp_path, variants=["TRAAC"], seeds=[0])
    for _ in range(2):
        with pytest.raises(KeyboardInterrupt):
            run_experiment(s)
    assert legs_at_train == [1, 2]
    (run,) = s.plan()
    legs = json.loads((run.directory / "provenance.json").read_text())["legs"]
    keys = {"code", "versions", "cpu", "machine", "command", "time", "weights_sha256"}
    assert [set(leg) >= keys for leg in legs] == [True, True]
    # Each stopped leg ended, unfinished, and `seconds` is the sum of the legs.
    assert [leg["finished"] for leg in legs] == [False, False]
    seconds = json.loads((run.directory / "seconds.json").read_text())["seconds"]
    assert seconds == pytest.approx(sum(leg["seconds"] for leg in legs), abs=0.11)
    base = json.loads((s.base_eval_dir / "provenance.json").read_text())["legs"]
    # The base evaluation's legs too (its summary is never written here: evaluated twice).
    assert [(set(leg) >= keys, leg["finished"]) for leg in base] == [(True, True)] * 2


def test_a_resumed_run_shows_every_leg_as_it_started_and_ended(tmp_path: Path) -> None:
    """A leg stopped by Ctrl-C, one killed outright (it never ends: its start stays on record)
    and the one that finished: three legs, and `seconds` sums the two that ended."""
    record_leg(tmp_path, "w")
    end_leg(tmp_path, 100.04, finished=False)
    run_seconds(tmp_path, 100.04, finished=False)
    record_leg(tmp_path, "w")  # killed: no handler runs
    record_leg(tmp_path, "w")
    end_leg(tmp_path, 50.0, finished=True)
    total = run_seconds(tmp_path, 50.0)
    legs = json.loads((tmp_path / "provenance.json").read_text())["legs"]
    assert [(leg.get("seconds"), leg.get("finished")) for leg in legs] == [
        (100.0, False),
        (None, None),
        (50.0, True),
    ]
    assert total == 150.0 and all(leg["weights_sha256"] == "w" for leg in legs)
    end_leg(tmp_path, 9.0, finished=True)  # no leg open: nothing rewritten
    assert json.loads((tmp_path / "provenance.json").read_text())["legs"] == legs


def test_the_report_shows_what_each_compressing_run_removed(tmp_path: Path) -> None:
    """A run whose metrics show compressed copies gets its per-bin table; one that compressed
    nothing (CR+LR) gets none."""
    runs = {r.variant: r for r in settings(tmp_path, variants=["TRAAC", "CR+LR"], seeds=[0]).plan()}
    lines = {
        "TRAAC": {"step": 1, "traac/easy/prompts": 2, "traac/easy/compressed_frac": 0.5,
                  "traac/easy/steps_removed": 3.0, "traac/easy/evicted_recheck": 2.0},
        "CR+LR": {"step": 1, "traac/easy/prompts": 2, "traac/easy/compressed_frac": 0.0},
    }  # fmt: skip
    for variant, line in lines.items():
        (runs[variant].directory / "model").mkdir(parents=True)
        (runs[variant].directory / "model" / "metrics.jsonl").write_text(json.dumps(line) + "\n")
    text = compression_markdown(list(runs.values()))
    assert "TRAAC, seed 0" in text and "CR+LR" not in text
    assert "| easy | 2 | 50.0% | 3.00 |" in text and "recheck evicted" in text
    assert compression_markdown([runs["CR+LR"]]) == ""


def test_pareto_front_keeps_what_nothing_beats() -> None:
    # (accuracy, length): B is beaten by A (as accurate, shorter); D ties A exactly, so both stay.
    points = {"A": (70.0, 30.0), "B": (70.0, 40.0), "C": (80.0, 50.0), "D": (70.0, 30.0),
              "E": (60.0, 20.0), "F": (55.0, 25.0)}  # fmt: skip
    assert pareto_front(points) == ["A", "C", "D", "E"]


@pytest.mark.slow
def test_quick_compare_end_to_end_then_resumes(quick_testbed: Path, tmp_path: Path) -> None:
    out = tmp_path / "compare"
    argv = ["experiment", "compare", "--quick", "--config", str(RECIPE), "--output", str(out),
            "--seeds", "0", "--variants", "Kimi k1.5", "L1-Max"]  # fmt: skip
    assert cli.main(argv) == 0
    data = json.loads((out / "compare.json").read_text())
    assert list(data["variants"]) == ["Base", "Kimi k1.5", "L1-Max"]
    for variant in data["variants"].values():
        for tier in ("easy", "medium", "hard", "overall"):
            assert 0.0 <= variant["accuracy"][tier]["mean"] <= 100.0
            assert variant["length"][tier]["mean"] > 0 and variant["length"][tier]["se"] is None
        assert 0.0 <= variant["auc_oaa"]["mean"] <= 100.0
    assert set(data["pareto_front"]) <= set(data["variants"]) and data["pareto_front"]
    report = (out / "compare.md").read_text()
    assert "| Kimi k1.5 | 1 |" in report and "AUC_OAA" in report
    assert data["effects"] == [] and "Effects" not in report  # no contrast among these two
    for variant in ("Kimi k1.5", "L1-Max"):  # the rerun below must read these back, not re-time
        assert data["variants"][variant]["seconds"]["0"] > 0
    assert "Wall seconds of each run" in report
    assert (out / "compare_pareto.png").stat().st_size > 1000
    models = sorted((tmp_path / "runs").glob("*/model/config.json"))
    assert len(models) == 2
    stamps = [m.stat().st_mtime_ns for m in models]
    # A rerun trains and evaluates nothing again: the same numbers, the same model files.
    assert cli.main(argv) == 0
    again = json.loads((out / "compare.json").read_text())
    assert again["variants"] == data["variants"]
    assert [m.stat().st_mtime_ns for m in models] == stamps


def test_a_long_testbed_recipe_is_evaluated_on_the_long_tiers(tmp_path: Path) -> None:
    long = RECIPE.parent / "testbed-long-interleaved.yaml"
    s = ExperimentSettings.make("compare", tmp_path / "c", long, False, ["TRAAC"], [0], None, 40)
    held = s.held_out
    assert held.dataset == "testbed-long:all?n=40&seed=2026"
    assert (held.max_new_tokens, held.t_max, held.per_tier) == (512, 512, 40)
    assert s.base_eval_dir.name == "eval-testbed-long-40x4-512t-2026"
    smollm2 = RECIPE.parent / "smollm2-long-interleaved.yaml"  # SmolLM2's tokens: its own cap
    s = ExperimentSettings.make("compare", tmp_path / "s", smollm2, False, ["TRAAC"], [0], None, 40)
    held = s.held_out
    assert (held.max_new_tokens, held.t_max, held.source) == (1024, 1024, "testbed-long")
    assert settings(tmp_path).held_out == HeldOut(10, 1, 160, t_max=160)  # the testbed's as before
    assert settings(tmp_path).base_eval_dir.name == "eval-10x1-160t-2026"


def test_a_refilled_evaluation_has_its_own_directories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--eval-batching refill` reaches every held-out evaluation, in directories of its own
    (other floats: it never resumes a padded one); the default keeps the padded names."""
    smollm2 = RECIPE.parent / "smollm2-long-interleaved.yaml"
    made: list[ExperimentSettings] = []

    class Planned(Exception):
        """Stops the command before any work."""

    def run(settings: ExperimentSettings, progress: object) -> None:
        made.append(settings)
        raise Planned

    monkeypatch.setattr(experiments, "run_experiment", run)
    for extra in ([], ["--eval-batching", "refill"]):
        with pytest.raises(Planned):
            cli.main(["experiment", "compare", "--config", str(smollm2), "--variants", "TRAAC",
                      "--seeds", "0", "--runs", str(tmp_path / "store"), *extra])  # fmt: skip
    padded, refill = made
    assert (padded.held_out.batching, refill.held_out.batching) == ("padded", "refill")
    assert padded.base_eval_dir.name == "eval-testbed-long-100x4-1024t-2026"
    assert refill.base_eval_dir.name == "eval-testbed-long-100x4-1024t-2026-refill"
    assert refill.eval_dir(tmp_path).name == refill.base_eval_dir.name  # every run's too
