"""The variants that isolate one change of TRAAC each: in `traac experiment compare`, each
paired with TRAAC, each parsed against the real-model recipe into the settings it names."""

from __future__ import annotations

from pathlib import Path

from traac.pipelines.experiments import ExperimentSettings
from traac.pipelines.isolating import ISOLATING, ISOLATING_CONTRASTS
from traac.pipelines.variants import COMPARE, CONTRASTS, EXPERIMENTS

ROOT = Path(__file__).resolve().parents[2]


def test_each_isolating_variant_is_compared_with_traac() -> None:
    assert set(ISOLATING) <= set(COMPARE)
    assert set(ISOLATING_CONTRASTS) <= set(CONTRASTS["compare"])
    assert {variant for _, _, variant in ISOLATING_CONTRASTS} == set(ISOLATING)
    assert all(baseline == "TRAAC" for _, baseline, _ in ISOLATING_CONTRASTS)
    for name, fields in ISOLATING.items():
        assert fields["mode"] == "traac" and len(name) <= 30, name


def test_every_traac_variant_is_the_papers_traac_but_what_it_names() -> None:
    """Each experiment's TRAAC variants change one thing of the paper's TRAAC, its copies
    trained on in full, whatever the recipe's preset (traac's default masks them)."""
    for table in EXPERIMENTS.values():
        for name, fields in table.items():
            if fields.get("mode") == "traac" and "answer-only" not in name:
                assert fields["traac"]["copy_loss"] == "full", name


def test_on_smollm2_think_each_variant_runs_what_it_names(tmp_path: Path) -> None:
    recipe = ROOT / "recipes" / "smollm2-think.yaml"
    settings = ExperimentSettings.make("compare", tmp_path / "out", recipe, quick=False,
                                       variants=["TRAAC", *ISOLATING], seeds=[0])  # fmt: skip
    configs = {r.variant: r.recipe.parse(Path("smollm2-think"), r.directory)[1]
               for r in settings.plan()}  # fmt: skip
    authors = configs["TRAAC, authors preset"]
    assert (authors.setting("probe_layers"), authors.setting("copy_pool"), authors.loss_type) == (
        "first_half", "all_correct", "dapo",
    )  # fmt: skip
    assert (authors.format_preset, authors.length_weight, authors.setting("copy_loss")) == (
        "authors", 1.0, "full",
    )  # fmt: skip
    assert configs["TRAAC, first-half probe"].setting("probe_layers") == "first_half"
    assert (
        configs["TRAAC, first-half probe"].setting("copy_pool") == "evicted"
    )  # the paper's otherwise
    assert configs["TRAAC, answer-only copies"].setting("copy_loss") == "answer_only"
    # the paper's TRAAC trains its copies in full where the recipe takes traac's default
    assert configs["TRAAC"].preset == "traac" and configs["TRAAC"].setting("copy_loss") == "full"
    assert (
        configs["TRAAC, first-half probe"].setting("copy_loss") == "full"
    )  # the paper's otherwise
    assert configs["TRAAC, all-correct pool"].setting("copy_pool") == "all_correct"
    assert configs["TRAAC, double tags"].setting("copy_tags") == "double"
    assert configs["TRAAC, batch-scaled rewards"].scale_rewards == "batch"
    token_mean = configs["TRAAC, token-mean loss"]
    assert (token_mean.loss_type, token_mean.scale_rewards) == ("dapo", "group")
    assert configs["TRAAC, early exit (oracle)"].setting("compression") == "early_exit"
