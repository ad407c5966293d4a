"""`traac train` as a user runs it: the dry-run plan (paper recipes offline, invalid fields), a
bad dataset row, SIGTERM then `--resume-from-checkpoint auto` against an uninterrupted run, and
two processes holding the same length windows after every step.

The end-to-end runs sample from the quick testbed, whose weights differ from one CPU to another.
So that no assertion depends on them, those runs judge a rollout right by a fixed function of
its text (`verdict_by_parity`): some rollouts are right and some wrong whatever the weights, and
the same rollouts get the same verdicts in every run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from traac.cli import main as cli_main
from traac.errors import TraacError
from traac.pipelines.train import resume_checkpoint
from traac.training.planning import packages
from traac.training.telemetry.metrics_file import METRICS_FILE
from traac.training.trl_adapter.checkpoint import STATE_FILE, rank_state_file
from traac.training.trl_adapter.trainer import TRAACTrainer

ROOT = Path(__file__).resolve().parents[2]
RECIPES = ROOT / "recipes"
N = 4  # rollouts per prompt


def offline_env(tmp_path: Path) -> dict[str, str]:
    """No hub, an empty hub cache, no GPU: what a laptop without network sees."""
    return {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf"),
        "CUDA_VISIBLE_DEVICES": "",
        "TRAAC_CACHE_DIR": str(tmp_path / "cache"),
    }


# `python LAUNCHER train ...` runs traac with vLLM reported installed (find_spec finds it), as on
# the GPU machine the paper recipes are for; vLLM itself cannot be installed here.
LAUNCHER = """import sys
from importlib.util import find_spec
import traac.training.planning.packages as packages
packages.find_spec = lambda name: find_spec("json") if name == "vllm" else find_spec(name)
from traac.cli import main
sys.exit(main())
"""


def traac_with_vllm(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess:
    launcher = tmp_path / "traac_with_vllm.py"
    launcher.write_text(LAUNCHER)
    return subprocess.run(
        [sys.executable, str(launcher), *argv], capture_output=True, text=True,
        env=offline_env(tmp_path), timeout=600, cwd=tmp_path,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("recipe", "model"),
    [("qwen3-4b.yaml", "Qwen/Qwen3-4B"),
     ("r1-distill-qwen-7b.yaml", "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B")],
)  # fmt: skip
def test_dry_run_of_a_paper_recipe_offline(tmp_path: Path, recipe: str, model: str) -> None:
    done = traac_with_vllm(
        tmp_path, "train", "--config", str(RECIPES / recipe), "--dry-run",
        "--dry_run_processes", "8",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = " ".join(done.stdout.split())  # the table wraps long values
    for expected in (
        f"{model} (hub id)",
        "dapo-math-17k (not reachable offline, checked at run time)",
        "auto (read from the chat template: not reachable offline, checked at run time)",
        "32 completions = 4 prompts x 8 rollouts",  # 2 per device x 8 GPUs x 2: the paper's
        "8 prompts x 8 rollouts = 64 completions, every 2 optimizer step(s)",
        "vLLM (colocate",
        "tensorboard (report_to tensorboard), vllm (use_vllm): installed",
        "bf16",
        "mode traac",
        "10000 tokens",
        "dry run: recipe valid",
    ):
        assert expected in out
    assert not (tmp_path / "outputs").exists()  # nothing written


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("alp", "ALP, arXiv:2506.05256: -(beta/N) max(p_solved, 1/K) |y|, beta 1, N 10000"),
        ("shorterbetter", "ShorterBetter, arXiv:2504.21370: -beta |l - l_SOL|, beta 0.001"),
        ("kimi", "Kimi k1.5, arXiv:2501.12599 section 2.3.3: weight 1"),
        ("dapo_overlong", "0 up to 8000, linear to -1 at 10000 tokens (L_cache 2000)"),
        ("l1_max", "n_gold ~ U{100..4000} per prompt, written into the prompt"),
    ],
)
def test_one_field_switches_the_gpu_recipe_to_a_peer_method(
    tmp_path: Path, mode: str, expected: str
) -> None:
    """recipes/qwen3-4b.yaml runs any method with `mode` changed, and the dry run names it."""
    done = traac_with_vllm(
        tmp_path, "train", "--config", str(RECIPES / "qwen3-4b.yaml"),
        "--mode", mode, "--dynamic_sampling", "resample", "--dry-run",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = " ".join(done.stdout.split())
    assert f"mode {mode}" in out and expected in out
    assert "dynamic sampling resample (up to 2 rounds, then drop)" in out
    assert "scorer attention" not in out  # nothing is compressed in a peer mode


def test_vllm_server_mode_plans_the_paper_batch_on_four_training_gpus(tmp_path: Path) -> None:
    """The overrides recipes/accelerate/zero2_vllm_server.yaml documents keep the paper's 64
    completions per round on 4 training processes, and the plan names the server."""
    config = yaml.safe_load((RECIPES / "accelerate" / "zero2_vllm_server.yaml").read_text())
    assert config["num_processes"] == 4 and config["distributed_type"] == "DEEPSPEED"
    done = traac_with_vllm(
        tmp_path, "train", "--config", str(RECIPES / "qwen3-4b.yaml"), "--vllm_mode", "server",
        "--vllm_server_host", "10.0.0.7", "--per_device_train_batch_size", "4",
        "--gradient_accumulation_steps", "2",
        "--steps_per_generation", "4", "--dry-run", "--dry_run_processes", "4",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = " ".join(done.stdout.split())
    assert "vLLM (server at http://10.0.0.7:8000: start it first with trl vllm-serve" in out
    assert "32 completions = 4 prompts x 8 rollouts" in out
    assert "8 prompts x 8 rollouts = 64 completions" in out


def test_qlora_with_the_gpu_recipes_vllm_exits_2_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """TRL cannot sync a 4-bit base into vLLM (it crashes at the first weight sync), so the
    recipe's vLLM rollouts with QLoRA are refused before anything loads, naming both fields."""
    assert yaml.safe_load((RECIPES / "qwen3-4b.yaml").read_text())["use_vllm"] is True
    real = packages.find_spec
    monkeypatch.setattr(packages, "find_spec", lambda n: real("json" if n == "vllm" else n))
    argv = ["train", "--config", str(RECIPES / "qwen3-4b.yaml"), "--use_peft", "true"]
    assert cli_main([*argv, "--load_in_4bit", "true", "--dry-run"]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if "traac" in line]
    assert lines == [
        "traac train: error: load_in_4bit with use_vllm: TRL cannot sync a quantized base into "
        "vLLM; set use_vllm: false (QLoRA generates with transformers) or drop load_in_4bit"
    ]
    assert cli_main([*argv, "--load_in_4bit", "true", "--use_vllm", "false", "--dry-run"]) == 0


def test_a_paper_recipe_without_vllm_installed_exits_2_naming_the_extra(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "traac.cli", "train", "--config", str(RECIPES / "qwen3-4b.yaml"),
         "--dry-run"],
        capture_output=True, text=True, env=offline_env(tmp_path), timeout=600, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "traac train: error: use_vllm needs vllm, which is not installed: pip install 'traac[vllm]'"
    )


@pytest.mark.parametrize("dry_run", [True, False])
def test_a_logger_that_is_not_installed_fails_before_the_model_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any, dry_run: bool
) -> None:
    """A logger that is not installed stops the dry run and the real run before any weights
    load, naming the package and how to install it."""
    no_weights(monkeypatch)
    found = packages.find_spec
    monkeypatch.setattr(packages, "find_spec", lambda m: None if m == "wandb" else found(m))
    monkeypatch.setattr(
        "traac.pipelines.train.resolve_model", lambda *a: pytest.fail("model touched")
    )
    argv = local_recipe(tmp_path, Path("testbed"), "testbed:easy?n=4", report_to="wandb")
    code = cli_main([*argv, *(["--dry-run"] if dry_run else [])])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert err == (
        "traac train: error: report_to wandb needs wandb, which is not installed: pip install wandb"
    )


def local_recipe(tmp_path: Path, model: Path, dataset: str, **fields: Any) -> list[str]:
    values = {
        "model_name_or_path": str(model), "dataset": dataset,
        "output_dir": str(tmp_path / "out"), "use_cpu": True, "bf16": False,
        "report_to": "none", "max_steps": 3, "per_device_train_batch_size": 2 * N,
        "num_generations": N, "max_completion_length": 64,
    }  # fmt: skip
    values.update(fields)
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in values.items()))
    return ["train", "--config", str(recipe)]


def no_weights(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if anything loads model weights or builds the testbed."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("model weights loaded")

    from transformers import AutoModelForCausalLM

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", refuse)
    monkeypatch.setattr("traac.testbed.build.build_testbed", refuse)


def test_dry_run_resolves_the_chat_format_and_checks_the_rows(
    quick_testbed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    no_weights(monkeypatch)
    argv = local_recipe(
        tmp_path, quick_testbed, "testbed:easy?n=5",
        eval_dataset="testbed:hard?n=3", eval_strategy="steps", eval_steps=2,
    )  # fmt: skip
    code = cli_main([*argv, "--dry-run"])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 0
    assert ("evaluation every 2 steps, 4 rollouts per problem, accuracy and lengths per tier; "
            "testbed:hard?n=3: 3 problems, every row checked") in out  # fmt: skip
    assert f"{quick_testbed} (local directory)" in out
    assert "response-opens: the response opens with <think>" in out
    assert "testbed:easy?n=5: 5 problems, every row checked" in out
    assert "8 completions = 2 prompts x 4 rollouts" in out
    assert "transformers generate" in out and "fp32" in out and "3 (max_steps)" in out
    assert "not reachable" not in out
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("override", "field"),
    [
        (["--mode", "fast"], "mode:"),
        (["--tau_hard", "1.5"], "tau_hard:"),
        (["--num_generations", "3"], "num_generations (3)"),
        (["--dry_run_processes", "0"], "dry_run_processes:"),
        (["--model_name_or_path", "./no/such/model"], "model_name_or_path:"),
        (["--model_name_or_path", "bad id with spaces"], "model_name_or_path:"),
        (["--traac.scoring_model", "./no/such/scorer"], "scoring_model:"),
        (["--traac.scoring-model", "smollm2", "--traac.scorer", "confidence"], "scoring_model:"),
        (["--scorer", "random"], "scorer: a method's setting is written in its mode's block"),
        (["--alp.beta", "-1", "--mode", "alp"], "alp.beta: -1.0 must be"),
        (["--dataset", "reasoning-gym:no_such_task"], "dataset:"),
        (["--resume_from_checkpoint", "/no/such/checkpoint"], "resume_from_checkpoint:"),
        (["--no_such_field", "1"], "no_such_field"),
        (["--eval_strategy", "steps"], "eval_strategy: steps needs held-out problems"),
        (["--eval_dataset", "testbed:easy?n=2"], "eval_dataset: set, but eval_strategy is no"),
        (
            ["--eval_dataset", "reasoning-gym:no_such_task", "--eval_strategy", "steps"],
            "eval_dataset:",
        ),
    ],
)
def test_dry_run_of_an_invalid_field_exits_2_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any, override: list, field: str
) -> None:
    no_weights(monkeypatch)
    monkeypatch.setenv("TRAAC_CACHE_DIR", str(tmp_path / "cache"))  # no testbed built here
    code = cli_main([*local_recipe(tmp_path, Path("testbed"), "testbed:easy?n=4"), "--dry-run",
                     *override])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and err.startswith("traac train: error:")
    assert field in err


def test_dry_run_names_a_foreign_scoring_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    no_weights(monkeypatch)
    monkeypatch.setenv("TRAAC_CACHE_DIR", str(tmp_path / "cache"))  # nothing converted here
    argv = local_recipe(tmp_path, Path("testbed"), "testbed:easy?n=4")
    code = cli_main([*argv, "--dry-run", "--traac.scoring_model", "smollm2"])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 0
    assert "scorer attention on the smollm2 model" in out
    assert "smollm2 (SmolLM2-135M-Instruct, converted" in out


@pytest.mark.parametrize("field", ["learning_rate", "beta", "correctness_reward"])
def test_dry_run_of_a_recipe_holding_nan_exits_2_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any, field: str
) -> None:
    """NaN passes `>= 0` and `> 0` checks written the obvious way; the real run dies of it."""
    no_weights(monkeypatch)
    argv = local_recipe(tmp_path, Path("testbed"), "testbed:easy?n=4")
    recipe = Path(argv[2])
    recipe.write_text(recipe.read_text() + f"{field}: .nan\n")  # YAML's NaN
    code = cli_main([*argv, "--dry-run"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert f"traac train: error: {field}: nan must be a finite number" in err


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("learning_rate: [1.0e-5, 2\n", "not valid YAML (expected ',' or ']'"),
        ("learning_rate: [1.0e-5, 2.0e-5]\n", "learning_rate: [1e-05, 2e-05] is a list"),
        ("beta: {a: 1}\n", "beta: {'a': 1} is a dict"),
        ("- just\n- a list\n", "a recipe is a YAML mapping"),
    ],
)
def test_a_broken_recipe_is_one_line_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any, line: str, message: str
) -> None:
    no_weights(monkeypatch)
    argv = local_recipe(tmp_path, Path("testbed"), "testbed:easy?n=4")
    recipe = Path(argv[2])
    recipe.write_text(line if line.startswith("-") else recipe.read_text() + line)
    code = cli_main([*argv, "--dry-run"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert err.startswith(f"traac train: error: --config {recipe}: ") and message in err


@pytest.mark.parametrize(
    ("func", "expected"),
    [("brevity", "rewards correctness_reward x1, format_reward x1, length_reward x1, "
                 "brevity (train_rewards:brevity) x0.5"),
     ("late", "traac train: error: extra_reward_funcs: train_rewards:late(prompts, completions) "
              "cannot take TRL's reward call")],
)  # fmt: skip
def test_dry_run_imports_and_checks_the_extra_rewards(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any, func: str, expected: str
) -> None:
    no_weights(monkeypatch)
    monkeypatch.setenv("TRAAC_CACHE_DIR", str(tmp_path / "cache"))  # no testbed built here
    (tmp_path / "train_rewards.py").write_text(
        "def brevity(prompts, completions, **kwargs):\n    return [0.0] * len(completions)\n"
        "def late(prompts, completions):\n    return [0.0] * len(completions)\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "train_rewards", raising=False)
    argv = local_recipe(tmp_path, Path("testbed"), "testbed:easy?n=4", extra_reward_weights=[0.5],
                        extra_reward_funcs=[f"train_rewards:{func}"])  # fmt: skip
    code = cli_main([*argv, "--dry-run"])
    captured = capsys.readouterr()
    if func == "brevity":
        assert code == 0 and expected in " ".join(captured.out.split())
    else:
        assert code == 2 and captured.err.startswith(expected)
    sys.modules.pop("train_rewards", None)


BAD_ROWS = [
    ({"question": "2+2?"}, "row 1 has no answer field"),
    ({"question": "", "answer": "4"}, "row 1 has no 'question' field (or it is empty)"),
    ({"question": 7, "answer": "4"}, "row 1: field 'question' is int, not text"),
    ({"question": "2+2?", "answer": " "}, "row 1 has no 'answer' field (or it is empty)"),
]


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
@pytest.mark.parametrize(("bad", "message"), BAD_ROWS)
def test_a_bad_row_fails_before_the_model_loads(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: Any,
    suffix: str,
    bad: dict,
    message: str,
) -> None:
    if suffix == ".parquet":  # every row has every column: a null where the value is missing
        if not isinstance(bad["question"], str):
            bad, message = {**bad, "question": None}, "row 1 has no 'question' field"
        elif "answer" not in bad:
            message = "row 1 has no 'answer' field (or it is empty)"
    rows = [{"question": "1+1?", "answer": "2"}, bad, {"question": "3+3?", "answer": "6"}]
    path = tmp_path / f"bad{suffix}"
    if suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist([{"answer": None, **r} for r in rows]), path)
    no_weights(monkeypatch)
    monkeypatch.setattr(
        "traac.pipelines.train.resolve_model", lambda *a: pytest.fail("model touched")
    )
    code = cli_main([*local_recipe(tmp_path, Path("testbed"), str(path))])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("traac train: error:") and message in err


def test_a_rerun_into_a_folder_with_checkpoints_must_say_it_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """No silent fresh start over a run's checkpoints: resume them or choose another folder."""
    no_weights(monkeypatch)
    (tmp_path / "out" / "checkpoint-3").mkdir(parents=True)
    code = cli_main(local_recipe(tmp_path, Path("testbed"), "testbed:easy?n=4"))
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "already holds checkpoint-3" in err and "--resume-from-checkpoint auto" in err


def test_resume_checkpoint_picks_the_newest_complete_one(tmp_path: Path) -> None:
    assert resume_checkpoint("auto", str(tmp_path / "missing")) is None
    for step, files in ((2, ("trainer_state.json", STATE_FILE)), (10, ("trainer_state.json",))):
        folder = tmp_path / f"checkpoint-{step}"
        folder.mkdir()
        for name in files:
            (folder / name).write_text("{}")
    (tmp_path / "checkpoint-7").mkdir()  # a save the crash cut short
    for value in ("auto", "true", "True", "latest"):
        assert resume_checkpoint(value, str(tmp_path)) == str(tmp_path / "checkpoint-2")
    assert resume_checkpoint(str(tmp_path / "checkpoint-10"), "x") == str(
        tmp_path / "checkpoint-10"
    )
    assert resume_checkpoint(None, str(tmp_path)) is None
    with pytest.raises(TraacError, match="resume_from_checkpoint"):
        resume_checkpoint(str(tmp_path / "checkpoint-7"), str(tmp_path))


# ------------------------------------------------------------------ end to end on the testbed

PARITY_VERDICTS = """
import traac.verification as verify


def verdict_by_parity(items, responses, **kwargs):
    return [len(r) % 2 == 1 for r in responses]


verify.verify_many = verdict_by_parity
"""


def verdict_by_parity(items: Any, responses: list[str], **kwargs: Any) -> list[bool]:
    """Right when the response has an odd number of characters: weight-independent verdicts."""
    return [len(r) % 2 == 1 for r in responses]


def train_args(model: Path, out: Path, *extra: str) -> list[str]:
    return [
        "train", "--config", str(RECIPES / "testbed.yaml"), "--model_name_or_path", str(model),
        "--dataset", "testbed:easy?n=24", "--output_dir", str(out), "--max_steps", "4",
        "--per_device_train_batch_size", str(2 * N), "--num_generations", str(N),
        "--max_completion_length", "96", "--disable_tqdm", "true", *extra,
    ]  # fmt: skip


def state(checkpoint: Path, name: str = STATE_FILE) -> dict:
    return json.loads((checkpoint / name).read_text())


def window_lengths(traac_state: dict) -> int:
    """How many lengths the length windows hold, over all keys and steps."""
    windows = traac_state["length_windows"]["windows"]
    return sum(len(step) for window in windows for step in window["steps"])


def metrics(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / METRICS_FILE).read_text().splitlines()]


def without_timings(record: dict) -> dict:
    return {k: v for k, v in record.items() if not k.startswith("traac/seconds/")}


@pytest.mark.slow
def test_sigterm_then_resume_matches_an_uninterrupted_run(
    quick_testbed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.setattr("traac.training.step.driver.verify_many", verdict_by_parity)
    every_2 = ("--save_strategy", "steps", "--save_steps", "2")
    a, b = tmp_path / "a", tmp_path / "b"
    assert cli_main(train_args(quick_testbed, a, *every_2)) == 0

    handler = signal.getsignal(signal.SIGTERM)
    log_step = TRAACTrainer._log_step

    def sigterm_during_step_2(self: TRAACTrainer, step: Any) -> None:
        log_step(self, step)  # the end of step 2's rollout phase
        if step.record.step == 2:
            signal.raise_signal(signal.SIGTERM)  # handled before it returns

    with monkeypatch.context() as patch:
        patch.setattr(TRAACTrainer, "_log_step", sigterm_during_step_2)
        # save_strategy "no" (the recipe's): the signal saves a checkpoint all the same.
        assert cli_main(train_args(quick_testbed, b)) == 128 + signal.SIGTERM
    assert "traac train: stopped by SIGTERM after step 2;" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGTERM) is handler  # the handlers are put back
    checkpoint = b / "checkpoint-2"
    for name in ("optimizer.pt", "scheduler.pt", "rng_state.pth", "trainer_state.json"):
        assert (checkpoint / name).exists()
    assert sorted(p.name for p in b.glob("checkpoint-*")) == ["checkpoint-2"]
    assert not (b / "model.safetensors").exists()  # an interrupted run leaves no final model
    assert state(checkpoint) == state(a / "checkpoint-2")
    assert [r["step"] for r in metrics(b)] == [1, 2]
    # A crash after a step 3 that no checkpoint holds: that step is done again, and kept once.
    with (b / METRICS_FILE).open("a") as f:
        f.write(json.dumps({"step": 3, "stale": True}) + "\n" + '{"step": 4, "cut sh')

    assert cli_main(train_args(quick_testbed, b, *every_2, "--resume_from_checkpoint", "auto")) == 0
    final_a, final_b = state(a / "checkpoint-4"), state(b / "checkpoint-4")
    assert window_lengths(final_a) > 0  # correct rollouts' lengths were recorded
    assert final_b == final_a
    assert json.loads((b / "checkpoint-4" / "trainer_state.json").read_text())["global_step"] == 4
    records_a, records_b = metrics(a), metrics(b)
    assert [r["step"] for r in records_b] == [1, 2, 3, 4]
    assert [without_timings(r) for r in records_b] == [without_timings(r) for r in records_a]


def test_a_resume_refuses_the_settings_its_checkpoint_did_not_train_with(
    quick_testbed: Path, tmp_path: Path, capsys: Any
) -> None:
    """`--resume-from-checkpoint auto` after the recipe's learning rate was edited exited 0 and
    trained on at the checkpoint's rate (transformers restores the optimiser and its schedule)
    (issue 72, kind 2). It is refused in one line naming the field, dry run or not, before any
    weight loads, and by the Python API; raising max_steps alone trains on."""
    from datasets import Dataset

    from traac.pipelines.train import parse

    out = tmp_path / "out"
    every = ("--save_strategy", "steps", "--save_steps", "1", "--mode", "cr")
    assert cli_main(train_args(quick_testbed, out, *every, "--max_steps", "1")) == 0
    capsys.readouterr()
    resume = train_args(quick_testbed, out, *every, "--max_steps", "2",
                        "--resume_from_checkpoint", "auto")  # fmt: skip
    for dry_run in ([], ["--dry-run"]):
        assert cli_main([*resume, "--learning_rate", "1e-3", "--beta", "0.5", *dry_run]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1, err
        assert f"resume_from_checkpoint: {out}/checkpoint-1 trained with " in err
        assert "learning_rate 5e-05 (now 0.001), beta 0.04 (now 0.5);" in err
        assert "only max_steps may change): put the recipe back, or start afresh" in err
    assert not (out / "checkpoint-2").exists()
    _, config = parse([*resume[1:], "--learning_rate", "1e-3"])
    rows = Dataset.from_list([{"prompt": "1 + 1 =", "answer": "2"}] * 4)
    trainer = TRAACTrainer(str(quick_testbed), args=config, train_dataset=rows)
    with pytest.raises(TraacError, match=r"learning_rate 5e-05 \(now 0\.001\)"):
        trainer.train(resume_from_checkpoint=True)
    assert cli_main(resume) == 0
    assert json.loads((out / "checkpoint-2" / "trainer_state.json").read_text())["global_step"] == 2


@pytest.mark.slow
def test_two_processes_hold_the_same_windows_after_every_step(
    quick_testbed: Path, tmp_path: Path
) -> None:
    """6 rollouts per process, 4 per prompt: the second prompt's rollouts sit on both ranks."""
    out, steps = tmp_path / "dist", 4
    args = train_args(quick_testbed, out, "--save_strategy", "steps", "--save_steps", "1",
                      "--per_device_train_batch_size", "6", "--max_steps", str(steps))  # fmt: skip
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--config_file",
              str(RECIPES / "accelerate" / "cpu_2proc.yaml"), "-m", "traac.cli", *args]  # fmt: skip
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(PARITY_VERDICTS)  # both workers judge by parity
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path}
    done = subprocess.run(launch, capture_output=True, text=True, timeout=400, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.count(f"traac train: {steps} steps;") == 1  # said once, not per process
    records = metrics(out)
    assert [r["step"] for r in records] == list(range(1, steps + 1))
    filled = 0
    for step, record in enumerate(records, start=1):
        checkpoint = out / f"checkpoint-{step}"
        rank0, rank1 = state(checkpoint, rank_state_file(0)), state(checkpoint, rank_state_file(1))
        assert rank0 == rank1 == state(checkpoint)
        filled += window_lengths(rank0)
        # The step's groups were formed from both ranks' rollouts: 12 rollouts, 3 prompts, each
        # bin's pass rate a count of right answers out of N.
        assert record["traac/all/rollouts"] == 2 * 6
        bins = [b for b in ("easy", "medium", "hard") if record[f"traac/{b}/prompts"]]
        assert sum(record[f"traac/{b}/prompts"] for b in bins) == 3
        for b in bins:
            right = record[f"traac/{b}/pass_rate"] * N * record[f"traac/{b}/prompts"]
            assert right == pytest.approx(round(right))
    assert filled > 0  # some right answers, so the windows compared hold lengths


def test_a_run_whose_final_model_was_not_saved_fails_naming_the_setting(
    quick_testbed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """Under FSDP with SHARDED_STATE_DICT, transformers' `save_model` writes nothing into
    output_dir (no weights, no config.json): the run must fail, naming the setting, instead of
    reporting a model every later command fails on."""
    monkeypatch.setattr(TRAACTrainer, "save_model", lambda self, *args, **kwargs: None)
    out = tmp_path / "out"
    assert cli_main([*train_args(quick_testbed, out), "--max_steps", "1", "--mode", "cr"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"traac train: error: output_dir {out}: the trained model was not "
                          "saved (no config.json);")  # fmt: skip
    assert "fsdp_state_dict_type: FULL_STATE_DICT" in err


def test_the_fsdp_recipe_saves_the_final_model_whole() -> None:
    """transformers' Trainer.save_model writes weights under FSDP only for FULL_STATE_DICT."""
    config = yaml.safe_load((RECIPES / "accelerate" / "fsdp.yaml").read_text())
    assert config["fsdp_config"]["fsdp_state_dict_type"] == "FULL_STATE_DICT"


def test_dry_run_of_the_authors_preset_on_a_recipe_that_pins_the_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every setting of the authors' code the preset applies, with its file; the recipe's
    pinned `probe_layers: all` is named as overriding the authors' first half."""
    monkeypatch.setenv("TRAAC_CACHE_DIR", str(tmp_path / "cache"))  # the model: made at run time
    argv = ["train", "--config", str(RECIPES / "smollm2-think.yaml"), "--preset", "authors",
            "--dry-run"]  # fmt: skip
    assert cli_main(argv) == 0
    rows = {
        line.split("  ")[0]: " ".join(line.split()) for line in capsys.readouterr().out.splitlines()
    }
    assert "all, the recipe's: overrides the authors' first_half" in rows["authors: probe_layers"]
    for field, value in (("format_preset", "authors"), ("length_weight", "1"),
                         ("copy_pool", "all_correct"), ("loss_type", "dapo"),
                         ("step_scope", "probe"), ("probe_heads", "all")):  # fmt: skip
        assert f"{value}, the authors' (" in rows[f"authors: {field}"], field
    assert "copy_tags double reproduces it" in rows["authors: copy_tags"]
    assert "preset authors" in rows["TRAAC"] and "copy_pool all_correct" in rows["TRAAC"]
