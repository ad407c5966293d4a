"""`traac train` with LoRA, as a user runs it: the plan's LoRA row, a quantized base refused in
one line where this machine's bitsandbytes cannot load it (at `--dry-run` a note, at run time
exit 2 before any weight is read), a SIGTERM then `--resume-from-checkpoint auto` that ends
where an uninterrupted run ends, and the saved adapter taken as `--model` by every command, on
the quick testbed and on SmolLM2.

As in `tests/commands/test_train.py`, the runs judge a rollout by a fixed function of its text
(`verdict_by_parity`), so that no assertion depends on the CPU's rounding of the weights."""

from __future__ import annotations

import importlib.metadata
import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from traac.cli import main as cli_main
from traac.errors import TraacError
from traac.training.telemetry.metrics_file import METRICS_FILE
from traac.training.trl_adapter.trainer import TRAACTrainer

RECIPE = Path(__file__).resolve().parents[2] / "recipes" / "testbed.yaml"
N = 4  # rollouts per prompt
LORA = ("--use_peft", "true", "--lora_r", "4", "--lora_alpha", "8", "--lora_dropout", "0.0")
ADAPTER = "adapter_model.safetensors"


def verdict_by_parity(items: Any, responses: list[str], **kwargs: Any) -> list[bool]:
    return [len(r) % 2 == 1 for r in responses]


def train_args(model: Path | str, out: Path, *extra: str) -> list[str]:
    return [
        "train", "--config", str(RECIPE), "--model_name_or_path", str(model),
        "--dataset", "testbed:easy?n=24", "--output_dir", str(out), "--max_steps", "4",
        "--per_device_train_batch_size", str(2 * N), "--num_generations", str(N),
        "--max_completion_length", "64", "--disable_tqdm", "true", *LORA, *extra,
    ]  # fmt: skip


def refuse_weights(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("model weights loaded")

    from transformers import AutoModelForCausalLM

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", refuse)


# ------------------------------------------------------------------ checks before any weight


def test_the_plan_names_the_adapters_and_what_a_4bit_base_lacks_here(
    quick_testbed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """Without CUDA, a bitsandbytes older than the CPU-capable release is refused in one line."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    version = importlib.metadata.version
    monkeypatch.setattr(
        importlib.metadata,
        "version",
        lambda name: "0.45.1" if name == "bitsandbytes" else version(name),
    )
    refuse_weights(monkeypatch)
    argv = train_args(quick_testbed, tmp_path / "out", "--load_in_4bit", "true")
    assert cli_main([*argv, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "r 4, alpha 8, dropout 0.0 on peft's default for the architecture; 4-bit" in out
    assert ("note: load_in_4bit: bitsandbytes 0.45.1 quantizes on a CUDA GPU only and none is "
            "visible here;") in out  # fmt: skip
    # the real run stops at once, with that line
    assert cli_main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("traac train: error: load_in_4bit: bitsandbytes 0.45.1 quantizes on")
    assert "pip install 'bitsandbytes>=0.50'" in err
    assert len(err.splitlines()) == 1 and not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (("--use_peft", "false", "--load_in_8bit", "true"), "load_in_8bit: a quantized base"),
        (("--lora_r", "0"), "lora_r: 0"),
    ],
)
def test_an_invalid_lora_field_fails_the_dry_run_naming_it(
    quick_testbed: Path, tmp_path: Path, capsys: Any, extra: tuple[str, ...], named: str
) -> None:
    assert cli_main([*train_args(quick_testbed, tmp_path, *extra), "--dry-run"]) == 2
    assert named in capsys.readouterr().err


# ------------------------------------------------------------------ runs on the quick testbed


def adapter_weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(folder / ADAPTER)


@pytest.fixture(scope="module")
def lora_runs(quick_testbed: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Run `a` uninterrupted (checkpoints at 2 and 4); run `b` stopped by SIGTERM in step 2,
    then resumed to 4. Returns their parent folder."""
    root = tmp_path_factory.mktemp("lora")
    every_2 = ("--save_strategy", "steps", "--save_steps", "2")
    log_step = TRAACTrainer._log_step

    def sigterm_during_step_2(self: TRAACTrainer, step: Any) -> None:
        log_step(self, step)
        if step.record.step == 2:
            signal.raise_signal(signal.SIGTERM)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("traac.training.step.driver.verify_many", verdict_by_parity)
        assert cli_main(train_args(quick_testbed, root / "a", *every_2)) == 0
        with pytest.MonkeyPatch.context() as stop:
            stop.setattr(TRAACTrainer, "_log_step", sigterm_during_step_2)
            assert cli_main(train_args(quick_testbed, root / "b")) == 128 + signal.SIGTERM
        assert not (root / "b" / ADAPTER).exists()  # an interrupted run leaves no final adapter
        resume = ("--resume_from_checkpoint", "auto")
        assert cli_main(train_args(quick_testbed, root / "b", *every_2, *resume)) == 0
    yield root


@pytest.mark.slow
def test_a_lora_run_resumed_after_sigterm_matches_an_uninterrupted_one(lora_runs: Path) -> None:
    a, b = lora_runs / "a", lora_runs / "b"
    for run in (a, b):  # the output is an adapter directory, checkpoints too
        assert (run / ADAPTER).is_file() and not (run / "model.safetensors").exists()
        assert (run / "checkpoint-4" / ADAPTER).is_file()
    assert sorted(p.name for p in b.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-4"]
    # the adapters moved (LoRA's B starts at zero), and the resumed run's equal the other's
    final_a, final_b = adapter_weights(a), adapter_weights(b)
    assert any(t.abs().max() > 0 for k, t in final_a.items() if "lora_B" in k)
    assert final_a.keys() == final_b.keys()
    for key in final_a:
        torch.testing.assert_close(final_b[key], final_a[key], atol=1e-6, rtol=1e-5)
    records = [[json.loads(x) for x in (r / METRICS_FILE).read_text().splitlines()] for r in (a, b)]
    timeless = [[{k: v for k, v in r.items() if "seconds" not in k} for r in rs] for rs in records]
    assert [r["step"] for r in records[1]] == [1, 2, 3, 4]
    assert timeless[1] == timeless[0]


@pytest.mark.slow
def test_a_finished_run_resumed_again_trains_no_step_past_max_steps(
    lora_runs: Path, quick_testbed: Path, capsys: Any
) -> None:
    """transformers would train step 5 from checkpoint-4 and overwrite the finished adapter."""
    a = lora_runs / "a"
    before = (a / ADAPTER).stat().st_mtime_ns
    resume = ("--resume_from_checkpoint", "auto")
    assert cli_main(train_args(quick_testbed, a, *resume)) == 2
    err = capsys.readouterr().err
    assert "checkpoint-4 is at step 4 and max_steps is 4, so the run is finished" in err
    assert (a / ADAPTER).stat().st_mtime_ns == before
    assert not (a / "checkpoint-5").exists()


@pytest.mark.slow
def test_the_adapter_is_a_model_for_every_command(
    lora_runs: Path, tmp_path: Path, capsys: Any
) -> None:
    adapter = str(lora_runs / "a")
    labelled = tmp_path / "in.jsonl"
    reasoning = ("First, 3 + 4 = 7.\nSo the answer is 7.\nWait, let me double-check: 3 + 4 = 7."
                 "\nLet me verify: 7 - 4 = 3.\nSo the answer is 7.")  # fmt: skip
    labels = ["compute", "conclude", "recheck", "recheck", "restate"]
    labelled.write_text(json.dumps({
        "id": "q", "question": "What is 3 + 4?", "answer": "7", "reasoning": reasoning,
        "labels": labels, "tier": "easy"}) + "\n")  # fmt: skip
    trace = tmp_path / "trace.txt"
    trace.write_text(reasoning)
    runs = {
        "eval": ["eval", "--model", adapter, "--dataset", "testbed:easy?n=2",
                 "--output", str(tmp_path / "eval"), "--num-samples", "1",
                 "--max-new-tokens", "32"],
        "generate": ["generate", "--model", adapter, "--prompt", "What is 3 + 4?",
                     "--max-new-tokens", "16"],
        "compress": ["compress", "--model", adapter, "--input", str(trace)],
        "probe-report": ["probe-report", "--model", adapter, "--scoring-model", adapter,
                         "--input", str(labelled), "--no-each-layer"],
    }  # fmt: skip
    for name, argv in runs.items():
        code = cli_main(argv)
        err = capsys.readouterr().err
        assert code == 0, f"{name}: {err[-400:]}"
    summary = json.loads((tmp_path / "eval" / "summary.json").read_text())
    assert summary  # the eval ran on the adapter


# ------------------------------------------------------------------ SmolLM2


@pytest.mark.slow
def test_two_lora_steps_on_smollm2_and_eval_loads_the_adapter(
    smollm2: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.setattr("traac.training.step.driver.verify_many", verdict_by_parity)
    out = tmp_path / "out"
    argv = [
        "train", "--config", str(RECIPE), "--model_name_or_path", "smollm2",
        "--dataset", "testbed:easy?n=8", "--output_dir", str(out), "--max_steps", "2",
        "--per_device_train_batch_size", "2", "--num_generations", "2",
        "--max_completion_length", "16", "--disable_tqdm", "true", *LORA,
        "--lora_target_modules", "q_proj", "v_proj",
    ]  # fmt: skip
    assert cli_main(argv) == 0
    config = json.loads((out / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == str(smollm2.resolve())  # found offline
    assert set(config["target_modules"]) == {"q_proj", "v_proj"}
    assert [json.loads(x)["step"] for x in (out / METRICS_FILE).read_text().splitlines()] == [1, 2]
    evaluated = ["eval", "--model", str(out), "--dataset", "testbed:easy?n=2",
                 "--output", str(tmp_path / "eval"), "--num-samples", "1",
                 "--max-new-tokens", "8"]  # fmt: skip
    capsys.readouterr()
    assert cli_main(evaluated) == 0, capsys.readouterr().err[-400:]


# ------------------------------------------------------------------ open-r1's dataset fields


def test_a_recipe_takes_open_r1s_dataset_fields(tmp_path: Path) -> None:
    """`dataset_prompt_column`, `dataset_config`, `dataset_train_split` and `system_prompt`, as
    an open-r1 recipe writes them: the prompt column read from the rows, the hub fields as the
    spec's options, the system message opening each chat prompt."""
    from traac.data.training import items_to_dataset, load_training_items
    from traac.pipelines.train import parse

    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"question": "unused", "statement": "2 + 2 =", "solution": "4"}))
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(f"dataset: {rows}\ndataset_prompt_column: statement\n"
                      "system_prompt: Think, then answer.\noutput_dir: out\n")  # fmt: skip
    script, _ = parse(["--config", str(recipe)])
    items = load_training_items(script.training_spec())
    [prompt] = items_to_dataset(items, system_prompt=script.system_prompt)["prompt"]
    assert prompt == [{"role": "system", "content": "Think, then answer."},
                      {"role": "user", "content": "2 + 2 ="}]  # fmt: skip
    hub, _ = parse(["--dataset", "org/set", "--dataset_config", "main",
                    "--dataset_train_split", "train", "--output_dir", "out"])  # fmt: skip
    assert hub.training_spec() == "org/set?split=train&config=main"


# --- what a run checks before loading a model, the dry run checks too (`validate`) -------------


@pytest.fixture
def empty_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The testbed not built yet: the dry run names it, never builds it."""
    monkeypatch.setenv("TRAAC_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.usefixtures("empty_cache")
@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--num_threads", "0"], "num_threads: 0 must be an integer >= 1"),
        (["--use_peft", "true", "--lora_target_modules", "q_proj", "lm_head"],
         "lora_target_modules: lm_head cannot take an adapter"),
        (["--sync_ref_model", "true", "--beta", "0"], "sync_ref_model: with beta 0"),
        (["--sync_ref_model", "true", "--beta", "0.01", "--use_peft", "true"],
         "sync_ref_model: LoRA's reference"),
        (["--config", "liger.yaml"], "liger_kernel_config: fused_linear_cross_entropy"),
        (["--use_peft", "true", "--load_in_4bit", "true", "--model_init_kwargs",
          '{"quantization_config": {"load_in_8bit": true}}'],
         "model_init_kwargs: a quantization_config beside load_in_4bit"),
    ],
)  # fmt: skip
def test_a_field_a_run_would_refuse_fails_the_dry_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    recipe = RECIPE
    if extra[:2] == ["--config", "liger.yaml"]:  # a mapping: the recipe gives it
        recipe, extra = tmp_path / "liger.yaml", []
        recipe.write_text(RECIPE.read_text() + "liger_kernel_config: {fused_linear_cross_entropy: "
                          "true}\n")  # fmt: skip
    argv = ["train", "--config", str(recipe), "--output_dir", str(tmp_path / "out"), *extra]
    assert cli_main([*argv, "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def _checkpoint(out: Path, step: int) -> None:
    from traac.training.trl_adapter.checkpoint import STATE_FILE

    directory = out / f"checkpoint-{step}"
    directory.mkdir(parents=True)
    (directory / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    (directory / STATE_FILE).write_text("{}")


@pytest.mark.usefixtures("empty_cache")
def test_the_dry_run_checks_the_output_dir_as_the_run_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A directory holding checkpoints needs --resume_from_checkpoint; one already at
    max_steps is a finished run; both are refused by the dry run, as at the run's start."""
    out = tmp_path / "out"
    _checkpoint(out, 4)
    argv = ["train", "--config", str(RECIPE), "--output_dir", str(out), "--dry-run"]
    assert cli_main(argv) == 2
    assert "already holds checkpoint-4" in capsys.readouterr().err
    assert cli_main([*argv, "--resume_from_checkpoint", "auto", "--max_steps", "4"]) == 2
    assert "is at step 4 and max_steps is 4" in capsys.readouterr().err
    assert cli_main([*argv, "--resume_from_checkpoint", "auto", "--max_steps", "6"]) == 0
    assert "checkpoint-4" in capsys.readouterr().out


# --- the methods' settings in their mode's blocks, routed into method_args (issue 70) ---


def parsed(tmp_path: Path, text: str, *line: str) -> Any:
    from traac.pipelines.train import parse

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(f"output_dir: {tmp_path / 'out'}\nuse_cpu: true\n{text}")
    return parse(["--config", str(recipe), *line])


def test_config_with_an_equals_sign_is_the_same_recipe(tmp_path: Path) -> None:
    """`--config=RECIPE` reads the recipe, as the check before the imports already did."""
    from traac.pipelines.train import parse

    _, spaced = parse(["--config", str(RECIPE), "--output-dir", str(tmp_path)])
    _, joined = parse([f"--config={RECIPE}", "--output-dir", str(tmp_path)])
    assert joined.to_dict() == spaced.to_dict()


def test_the_testbed_recipes_traac_block_is_the_modes_method_args() -> None:
    from traac.pipelines.train import parse

    _, config = parse(["--config", str(RECIPE)])
    probe = config.method_settings
    assert (probe.scorer, probe.scoring_model, probe.probe_layers, probe.probe_heads) == (
        "attention", "reference", "all", "gated",
    )  # fmt: skip
    assert config.method_args["probe_heads"] == "gated"
    _, config = parse(["--config", str(RECIPE), "--traac.copy-loss", "answer_only"])
    assert config.method_settings.copy_loss == "answer_only"


@pytest.mark.parametrize(
    ("recipe", "option"),
    [
        (("traac: {scorer: random}\n",), ("", "--traac.scorer", "random")),
        (("mode: alp\nalp: {beta: 1.0e-4}\n",), ("mode: alp\n", "--alp.beta=1e-4")),
        (("mode: l1_max\nmax_completion_length: 4000\nl1_max: {budget_in_prompt: false}\n",),
         ("mode: l1_max\nmax_completion_length: 4000\n", "--l1-max.budget-in-prompt", "false")),
    ],
)  # fmt: skip
def test_a_setting_in_the_recipes_block_is_the_same_run_as_its_option(
    tmp_path: Path, recipe: tuple, option: tuple
) -> None:
    _, ours = parsed(tmp_path, *recipe)
    _, theirs = parsed(tmp_path, *option)
    assert ours.method_args == theirs.method_args and ours.method_settings is not None
    assert ours.method_settings != type(ours.method_settings)()  # the value arrived


def test_the_command_line_wins_over_the_recipe_key_by_key(tmp_path: Path) -> None:
    text = "traac: {scorer: random, probe_heads: gated}\n"
    _, config = parsed(tmp_path, text, "--traac.scorer", "confidence")
    assert (config.method_settings.scorer, config.method_settings.probe_heads) == (
        "confidence", "gated",
    )  # fmt: skip


def test_another_modes_block_is_accepted_unused_and_checked(tmp_path: Path) -> None:
    """A recipe may hold several modes' blocks (the variants switch modes): the run does not
    read another mode's and the plan notes it; a value out of range fails under every mode."""
    script, config = parsed(tmp_path, "mode: traac\ntraac: {scorer: random}\n", "--mode", "cr_lr")
    assert config.method_args == {} and config.method_settings is None
    assert script.notes == (
        "the recipe's traac.scorer has no effect: mode cr_lr never compresses (mode cr_lr given "
        "over the recipe)",
    )
    script, config = parsed(tmp_path, "mode: traac\nalp: {beta: 2.0}\n")
    assert config.method_args["scorer"] == "attention"
    assert script.notes == (
        "the recipe's alp.beta has no effect: only mode alp reads it, not traac (kept for the "
        "modes that read it)",
    )
    with pytest.raises(TraacError, match=r"^alp\.beta: -1 must be a finite number > 0"):
        parsed(tmp_path, "alp: {beta: -1}\n", "--mode", "cr_lr")


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("scorer: random\n", (), "scorer: a method's setting is written in its mode's block now: "
         "traac: {scorer: VALUE} in a recipe, --traac.scorer VALUE on the command line"),
        ("mode: alp\n", ("--alp-beta", "2"), "alp_beta: a method's setting is written in its "
         "mode's block now: alp: {beta: VALUE} in a recipe, --alp.beta VALUE"),
        ("lcr1_length_coef: 2\n", (), "lcr1_length_coef: a method's setting is written in its "
         "mode's block now: lc_r1: {length_coef: VALUE}"),
        ("method_args: {scorer: random}\n", (), "method_args: write the mode's settings in its "
         "block (traac: {scorer: random} in a recipe, --traac.scorer random as an option)"),
        ("", ("--method_args", '{"scorer": "random"}'), "method_args: write the mode's settings"),
        ("traac: {scorr: random}\n", (),
         "traac.scorr: not a setting of mode traac; its settings are scorer,"),
        ("mode: alp\n", ("--traac.scorer", "random"),
         "--traac.scorer: no effect (mode alp never compresses)"),
        ("", ("--alpp.beta", "2"), "--alpp.beta: no mode's settings are called alpp; did you "
         "mean --alp.?"),
        ("", ("--alp.beta",), "--alp.beta needs a value (--alp.beta VALUE)"),
    ],
)  # fmt: skip
def test_method_settings_mistakes_are_one_line(
    tmp_path: Path, text: str, line: tuple, message: str
) -> None:
    with pytest.raises(TraacError) as error:
        parsed(tmp_path, text, *line)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


def test_a_block_that_is_no_mapping_is_named_before_the_parse(tmp_path: Path) -> None:
    with pytest.raises(TraacError, match=r"^recipe field traac: the settings of mode traac are a "
                       r"mapping \(traac: \{setting: value\}\)$"):  # fmt: skip
        parsed(tmp_path, "traac: random\n")
