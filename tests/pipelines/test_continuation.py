"""`traac experiment --continue-from`: which recipes may continue which, the checkpoint each
new run starts from (copied whole or not at all), and, end to end, a run continued from a
shorter one equal to the run trained straight through."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from safetensors.torch import load_file

from traac.errors import TraacError
from traac.pipelines.continuation import Continuation, check_steps, plan_continuations
from traac.pipelines.experiments import ExperimentSettings, run_experiment
from traac.pipelines.recipe import check_continuable
from traac.pipelines.stages import QUICK_TRAINING, HeldOut
from traac.training.telemetry.metrics_file import METRICS_FILE, metric_rows
from traac.training.trl_adapter.checkpoint import STATE_FILE

RECIPE = Path(__file__).resolve().parents[2] / "recipes" / "testbed.yaml"


def recipe(tmp_path: Path, name: str, steps: int, extra: str = "") -> Path:
    """The testbed recipe at `steps` steps, saving a checkpoint every step."""
    text = RECIPE.read_text().replace("max_steps: 150", f"max_steps: {steps}")
    text = text.replace('save_strategy: "no"', "save_strategy: steps\nsave_steps: 1")
    path = tmp_path / name
    path.write_text(text + extra)
    return path


def test_only_max_steps_may_differ(tmp_path: Path) -> None:
    short, long = recipe(tmp_path, "a.yaml", 1), recipe(tmp_path, "b.yaml", 2)
    check_continuable(long, short)
    other = recipe(tmp_path, "c.yaml", 1)  # each field once: a key written twice is refused
    other.write_text(other.read_text().replace("learning_rate: 5.0e-5", "learning_rate: 1.0e-3")
                     .replace("beta: 0.04", "beta: 0.5"))  # fmt: skip
    message = r"c.yaml: it differs from --config .* in beta, learning_rate; only max_steps"
    with pytest.raises(TraacError, match=message):
        check_continuable(long, other)
    with pytest.raises(TraacError, match=r"^--continue-from .*nope.yaml: no such recipe file"):
        check_continuable(long, tmp_path / "nope.yaml")


def config(steps: int, schedule: str = "constant_with_warmup", warmup: float = 2) -> Any:
    return SimpleNamespace(max_steps=steps, lr_scheduler_type=schedule, warmup_steps=warmup)


@pytest.mark.parametrize(
    ("ours", "theirs", "message"),
    [
        (config(30), config(30), "its runs train 30 steps, this recipe 30; continue only to more"),
        (config(60, "linear"), config(30), "lr_scheduler_type linear with warmup_steps 2 depends"),
        (config(60, warmup=0.1), config(30), "warmup_steps 0.1 depends on max_steps"),
    ],
)
def test_a_continuation_that_would_not_be_the_straight_run_fails(
    ours: Any, theirs: Any, message: str
) -> None:
    with pytest.raises(TraacError, match=message):
        check_steps(Path("r30.yaml"), ours, theirs)
    check_steps(Path("r30.yaml"), config(60), config(30))
    check_steps(Path("r30.yaml"), config(60, "constant", 0), config(30, "constant", 0))


def checkpoint(model: Path, step: int, whole: bool = True) -> Path:
    path = model / f"checkpoint-{step}"
    path.mkdir(parents=True)
    (path / "trainer_state.json").write_text("{}")
    (path / "adapter_model.safetensors").write_bytes(b"weights")
    if whole:
        (path / STATE_FILE).write_text("{}")
    return path


def test_each_new_run_starts_from_its_sources_newest_whole_checkpoint(tmp_path: Path) -> None:
    source, fresh, trained, going = (tmp_path / n for n in ("src", "new", "done", "going"))
    checkpoint(source, 1)
    newest = checkpoint(source, 2)
    checkpoint(source, 3, whole=False)  # a save a crash cut short
    (source / METRICS_FILE).write_text('{"step": 1}\n{"step": 2}\n{"step": 3}\n')
    trained.mkdir()
    (trained / "config.json").write_text("{}")
    (trained / "model.safetensors").write_bytes(b"w")
    checkpoint(going, 1)
    runs = [("a", fresh, source), ("b", trained, tmp_path / "x"), ("c", going, tmp_path / "x")]
    (plan,) = plan_continuations(runs, Path("r.yaml"))
    assert plan == Continuation(fresh, newest)
    plan.seed()
    assert sorted(p.name for p in fresh.iterdir()) == ["checkpoint-2", METRICS_FILE]
    assert (fresh / "checkpoint-2" / STATE_FILE).is_file()
    assert (fresh / METRICS_FILE).read_text() == (source / METRICS_FILE).read_text()
    assert (newest / STATE_FILE).is_file()  # the source stays as it was
    with pytest.raises(TraacError, match=r"^--continue-from r.yaml: d has no complete checkpoint"):
        plan_continuations([("d", tmp_path / "new2", tmp_path / "none")], Path("r.yaml"))


@pytest.mark.slow
def test_a_continued_run_is_the_run_trained_straight_through(
    quick_testbed: Path, tmp_path: Path
) -> None:
    overrides = {k: v for k, v in QUICK_TRAINING.items() if k != "max_steps"}
    short, long = recipe(tmp_path, "r1.yaml", 1), recipe(tmp_path, "r2.yaml", 2)

    def run(path: Path, store: str, continue_from: Path | None = None) -> Path:
        settings = ExperimentSettings(
            name="compare", output=tmp_path / f"out-{store}", runs=tmp_path / store, recipe=path,
            variants=("CR+LR",), seeds=(0,), held_out=HeldOut(2, 1, 32),
            train_overrides=overrides, model="testbed-quick", continue_from=continue_from,
        )  # fmt: skip
        run_experiment(settings)
        (planned,) = settings.plan()
        return planned.directory / "model"

    source = run(short, "shared")
    continued = run(long, "shared", continue_from=short)
    straight = run(long, "straight")
    weights = {name: load_file(m / "model.safetensors") for name, m in
               (("continued", continued), ("straight", straight))}  # fmt: skip
    assert weights["continued"].keys() == weights["straight"].keys()
    assert all((weights["continued"][k] == v).all() for k, v in weights["straight"].items())
    # Step 1 was not trained again: its line, timings included, is the source's.
    rows = [list(metric_rows(m / METRICS_FILE)) for m in (source, continued)]
    assert [r["step"] for r in rows[1]] == [1, 2] and rows[1][0] == rows[0][0]
