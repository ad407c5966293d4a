"""Careless input, command by command: every mistake a user can make on the command line or in a
recipe is one line on stderr naming the field (and, for a typo, the nearest right spelling),
exit 2, no traceback and no usage dump, before any model loads or any testbed is built.

Each case runs in this process through `traac.cli.main` (fast); `test_end_to_end` runs a few
as a user does, in a fresh interpreter, and checks that the error came before torch was
imported. Nothing here measures time (benchmarks/careless_inputs.py does).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from traac.cli import main as cli_main
from traac.errors import TraacError

ROOT = Path(__file__).resolve().parents[1]

# A minimal valid recipe for the testbed; each YAML case adds or replaces fields of it.
RECIPE = {
    "model_name_or_path": "testbed",
    "dataset": "testbed:easy?n=4",
    "use_cpu": True,
    "bf16": False,
    "report_to": "none",
    "max_steps": 2,
    "per_device_train_batch_size": 4,
    "num_generations": 4,
    "max_completion_length": 32,
}


def recipe(tmp_path: Path, text: str | None = None, **fields: Any) -> str:
    """A recipe file: RECIPE with `fields` changed (a value None drops the field), or `text`."""
    values = {**RECIPE, "output_dir": str(tmp_path / "out")}
    values.update(fields)
    path = tmp_path / "recipe.yaml"
    if text is None:
        text = "".join(f"{k}: {json.dumps(v)}\n" for k, v in values.items() if v is not None)
    path.write_text(text)
    return str(path)


def other_recipe(tmp_path: Path, **fields: Any) -> str:
    """A second recipe file beside `recipe`'s."""
    (tmp_path / "other").mkdir(exist_ok=True)
    return recipe(tmp_path / "other", **fields)


def a_file(tmp_path: Path) -> Path:
    """A plain file, where a directory is expected."""
    path = tmp_path / "a-file"
    path.write_text("")
    return path


def run_dir(tmp_path: Path, metrics: str, name: str = "run") -> str:
    """A training output directory whose metrics.jsonl holds `metrics`."""
    directory = tmp_path / name
    directory.mkdir(exist_ok=True)
    (directory / "metrics.jsonl").write_text(metrics)
    return str(directory)


# (id, argv builder taking tmp_path, text the one line must hold)
CASES: list[tuple[str, Any, str]] = [
    # --- train: counts, checked before TRL is imported ---
    ("train max_steps negative", lambda t: ["train", "--max_steps", "-5"],
     "max_steps: -5 must be a number of steps >= 1, or -1 to train for num_train_epochs"),
    ("train max-steps zero", lambda t: ["train", "--max-steps", "0"], "max_steps: 0"),
    ("train num_generations zero", lambda t: ["train", "--num_generations", "0"],
     "num_generations: 0 must be an integer >= 2"),
    ("train batch size zero", lambda t: ["train", "--per-device-train-batch-size", "0"],
     "per_device_train_batch_size: 0 must be an integer >= 1"),
    ("train accumulation negative", lambda t: ["train", "--gradient_accumulation_steps=-1"],
     "gradient_accumulation_steps: -1"),
    ("train epochs zero", lambda t: ["train", "--num_train_epochs", "0"],
     "num_train_epochs: 0 must be a number > 0"),
    ("train seed negative", lambda t: ["train", "--seed", "-3"], "seed: -3"),
    ("train steps not a number", lambda t: ["train", "--max_steps", "ten"],
     "max_steps: 'ten' must be an integer"),
    ("train lora rank zero", lambda t: ["train", "--use_peft", "true", "--lora_r", "0"],
     "lora_r: 0"),
    # --- train: names and files ---
    ("train misspelt model", lambda t: ["train", "--model_name_or_path", "testbd"],
     "model_name_or_path 'testbd': no such model or directory; did you mean testbed?"),
    ("train misspelt scorer", lambda t: ["train", "--traac.scoring_model", "smolm2"],
     "did you mean smollm2?"),
    ("train missing recipe", lambda t: ["train", "--config", str(t / "no.yaml")],
     "no such recipe file"),
    ("train config without path", lambda t: ["train", "--config"], "--config needs a recipe"),
    # --- train: recipe YAML ---
    ("yaml steps zero", lambda t: ["train", "--config", recipe(t, max_steps=0)], "max_steps: 0"),
    ("yaml steps text", lambda t: ["train", "--config", recipe(t, max_steps="ten")],
     "max_steps: 'ten' must be an integer"),
    ("yaml generations one", lambda t: ["train", "--config", recipe(t, num_generations=1)],
     "num_generations: 1 must be an integer >= 2"),
    ("yaml batch negative",
     lambda t: ["train", "--config", recipe(t, per_device_train_batch_size=-2)],
     "per_device_train_batch_size: -2"),
    ("yaml misspelt model",
     lambda t: ["train", "--config", recipe(t, model_name_or_path="Testbed-quik")],
     "did you mean testbed-quick?"),
    ("yaml syntax", lambda t: ["train", "--config", recipe(t, "max_steps: [1, 2\n")],
     "not valid YAML"),
    ("yaml not a mapping", lambda t: ["train", "--config", recipe(t, "- a\n- b\n")],
     "a recipe is a YAML mapping"),
    ("yaml unknown key", lambda t: ["train", "--config", recipe(t, learning_rte=1e-5), "--dry-run"],
     "recipe field learning_rte: no such field; did you mean learning_rate?"),
    ("yaml dashed key", lambda t: ["train", "--config", recipe(t, **{"max-steps": 3}), "--dry-run"],
     "recipe field max-steps: no such field; did you mean max_steps?"),
    ("yaml text for a number",
     lambda t: ["train", "--config", recipe(t, learning_rate="fast"), "--dry-run"],
     "learning_rate: 'fast' must be a number"),
    ("yaml list for a number",
     lambda t: ["train", "--config", recipe(t, beta=[0.1, 0.2]), "--dry-run"],
     "beta: [0.1, 0.2] is a list"),
    ("yaml bad tau",
     lambda t: ["train", "--config", recipe(t, difficulty={"tau": {"hard": 1.5}}), "--dry-run"],
     "tau"),
    ("yaml text in a list of numbers",
     lambda t: ["train", "--config", recipe(t, extra_reward_funcs=["m:f"],
                                            extra_reward_weights=[0.5, "x"]), "--dry-run"],
     "extra_reward_weights: 'x' must be a number"),
    ("yaml bad mode", lambda t: ["train", "--config", recipe(t, mode="fast"), "--dry-run"],
     "mode: 'fast' is not one of"),
    # --- train: options TRL parses ---
    ("train option prefix", lambda t: ["train", "--config", recipe(t), "--max_ste", "5"],
     "unknown option --max_ste; did you mean --max-steps?"),
    ("train unknown option", lambda t: ["train", "--config", recipe(t), "--learning-rat", "1"],
     "did you mean --learning-rate?"),
    ("train text for a number",
     lambda t: ["train", "--config", recipe(t), "--learning_rate", "abc", "--dry-run"],
     "--learning_rate/--learning-rate: invalid float value: 'abc'"),
    ("train bad dataset spec",
     lambda t: ["train", "--config", recipe(t), "--dataset", "testbed:easy?n=abc", "--dry-run"],
     "dataset 'testbed:easy?n=abc': n and seed must be integers"),
    # --- eval ---
    ("eval underscore count", lambda t: ["eval", "--num_samples", "0", "--model", "testbed",
                                         "--dataset", "testbed:easy", "--output", str(t / "o")],
     "--num-samples 0: must be at least 1"),
    ("eval option prefix", lambda t: ["eval", "--num-sample", "2", "--model", "testbed",
                                      "--dataset", "testbed:easy", "--output", str(t / "o")],
     "unknown option --num-sample; did you mean --num-samples?"),
    ("eval missing output", lambda t: ["eval", "--model", "testbed", "--dataset", "x"],
     "the following arguments are required: --output"),
    ("eval misspelt model", lambda t: ["eval", "--model", "smollm2-thnk", "--dataset", "x",
                                       "--output", str(t / "o")],
     "did you mean smollm2-think?"),
    ("eval missing responses", lambda t: ["eval", "--responses", str(t / "r.jsonl"),
                                          "--dataset", "x", "--output", str(t / "o")],
     "--responses"),
    ("eval negative temperature", lambda t: ["eval", "--model", "testbed", "--dataset", "x",
                                             "--output", str(t / "o"), "--temperature", "-1"],
     "--temperature -1.0"),
    ("eval bad tau", lambda t: ["eval", "--model", "testbed", "--dataset", "x",
                                "--output", str(t / "o"), "--compress_tau", "1.5"],
     "--compress-tau 1.5: must lie in [0, 1]"),
    ("eval vllm share", lambda t: ["eval", "--model", "testbed", "--dataset", "x", "--output",
                                   str(t / "o"), "--backend", "vllm",
                                   "--gpu-memory-utilization", "2"],
     "--gpu-memory-utilization 2.0: must lie in (0, 1]"),
    ("eval limit zero", lambda t: ["eval", "--model", "testbed", "--dataset", "x",
                                   "--output", str(t / "o"), "--limit", "0"],
     "--limit 0: must be at least 1"),
    ("eval t-max zero", lambda t: ["eval", "--model", "testbed", "--dataset", "x",
                                   "--output", str(t / "o"), "--t-max", "0"],
     "--t-max 0: must be at least 1"),
    ("eval otb scoring", lambda t: ["eval", "--model", "testbed", "--dataset", "x",
                                    "--output", str(t / "o"), "--otb-scoring", "leaderboard"],
     "--otb-scoring: invalid choice"),
    ("eval tokenizer beside a model",
     lambda t: ["eval", "--model", "testbed", "--dataset", "x", "--output", str(t / "o"),
                "--tokenizer", "gpt2"],
     "--tokenizer gpt2: no effect with --model (lengths are counted in the model's own tokens)"),
    ("eval sampling option beside responses",
     lambda t: ["eval", "--responses", str(a_file(t)), "--dataset", "x", "--output", str(t / "o"),
                "--temperature", "0.6"],
     "--temperature: no effect with --responses (nothing is generated); drop it"),
    # --- generate ---
    ("generate tokens zero", lambda t: ["generate", "--prompt", "hi", "--max_new_tokens", "0"],
     "--max-new-tokens 0: must be at least 1"),
    ("generate misspelt model", lambda t: ["generate", "--model", "smolm2", "--prompt", "hi"],
     "did you mean smollm2?"),
    ("generate option prefix", lambda t: ["generate", "--prompt", "hi", "--temp", "0.5"],
     "unknown option --temp; did you mean --temperature?"),
    ("generate missing input", lambda t: ["generate", "--input", str(t / "q.txt")],
     "no such file"),
    ("generate budget negative", lambda t: ["generate", "--prompt", "hi", "--think_budget", "-1"],
     "--think-budget -1: must be at least 1"),
    ("generate batch zero", lambda t: ["generate", "--prompt", "hi", "--batch-size", "0"],
     "--batch-size 0: must be at least 1"),
    # --- demo ---
    ("demo eval-n zero", lambda t: ["demo", "--eval-n", "0"], "--eval-n 0: must be at least 1"),
    ("demo underscore count", lambda t: ["demo", "--num_samples", "-2"],
     "--num-samples -2: must be at least 1"),
    ("demo missing recipe", lambda t: ["demo", "--config", str(t / "no.yaml")],
     "no such recipe file"),
    ("experiment broken recipe",
     lambda t: ["experiment", "compare", "--config", recipe(t, "beta: [0.1\n")], "not valid YAML"),
    # --- compress ---
    ("compress batch zero", lambda t: ["compress", "--input", "x.txt", "--batch_size", "0"],
     "--batch-size 0: must be at least 1"),
    ("compress missing input", lambda t: ["compress", "--input", str(t / "no.txt")],
     "no such file"),
    ("compress bad scorer", lambda t: ["compress", "--input", "x.txt", "--scorer", "entropy"],
     "argument --scorer: invalid choice: 'entropy'"),
    ("compress bad gate", lambda t: ["compress", "--input", "x.txt", "--uniformity_gate", "2"],
     "uniformity_gate: 2.0 must be a number in [0, 1]"),
    # --- report ---
    ("report missing dir", lambda t: ["report", str(t / "nothing")], "is not a directory"),
    ("report t-max zero", lambda t: ["report", str(t), "--t-max", "0"],
     "--t-max 0: must be at least 1"),
    ("report names", lambda t: ["report", str(t), "--names", "a", "b"],
     "2 --names for 1 directories"),
    # --- experiment ---
    ("experiment seed negative", lambda t: ["experiment", "compare", "--seeds", "-1"],
     "--seeds: [-1] must be distinct integers >= 0"),
    ("experiment held-out zero", lambda t: ["experiment", "ablations", "--held_out", "0"],
     "--held-out: 0 problems a tier"),
    ("experiment unknown variant", lambda t: ["experiment", "compare", "--variants", "GRPO"],
     "--variants: unknown ['GRPO']"),
    ("experiment misspelt name", lambda t: ["experiment", "ablation"],
     "invalid choice: 'ablation'"),
    ("experiment continue-from missing", lambda t: ["experiment", "compare", "--config",
     recipe(t), "--continue-from", "no.yaml"], "--continue-from no.yaml: no such recipe file"),
    ("experiment continue-from other recipe", lambda t: ["experiment", "compare", "--config",
     recipe(t), "--continue-from", other_recipe(t, beta=0.5)],
     "in beta, output_dir; only max_steps may differ"),
    # --- probe-report ---
    ("probe-report eval-n zero", lambda t: ["probe-report", "--eval_n", "0"],
     "--eval-n 0: must be at least 1"),
    ("probe-report misspelt model", lambda t: ["probe-report", "--model", "tesbed"],
     "did you mean testbed?"),
    # --- testbed ---
    ("testbed seed negative", lambda t: ["testbed", "build", "--seed", "-1"],
     "--seed -1: must be an integer >= 0"),
    ("testbed option prefix", lambda t: ["testbed", "build", "--bas", "smollm2"],
     "unknown option --bas; did you mean --base?"),
    ("testbed unknown action", lambda t: ["testbed", "bild"], "invalid choice: 'bild'"),
    # --- a recipe that says more than it does (issue 60, kind 1): fields the run never reads,
    # written for this run (in the recipe with their mode, or on the command line) ---
    ("yaml key written twice",
     lambda t: ["train", "--config", recipe(t, "max_steps: 2\nbeta: 0.1\nmax_steps: 5\n")],
     "max_steps is written twice (lines 1 and 3), and YAML keeps only the last; keep one"),
    ("yaml nested key written twice",
     lambda t: ["train", "--config",
                recipe(t, "difficulty:\n  tau: {hard: 0.3}\n  tau: {hard: 0.1}\n")],
     "tau is written twice (lines 2 and 3)"),
    ("yaml lora without use_peft", lambda t: ["train", "--config", recipe(t, lora_r=8)],
     "recipe field lora_r: no effect (use_peft is off, so no adapters are trained); drop it, "
     "or set use_peft true"),
    ("train lora option without use_peft",
     lambda t: ["train", "--config", recipe(t), "--lora-alpha", "8", "--dry-run"],
     "--lora-alpha: no effect (use_peft is off"),
    ("train peer coefficient under traac",
     lambda t: ["train", "--config", recipe(t, mode="traac"), "--alp.beta", "0.1", "--dry-run"],
     "--alp.beta: no effect (only mode alp reads it, not traac)"),
    ("yaml difficulty under a peer",
     lambda t: ["train", "--config", recipe(t, mode="kimi", difficulty={"tau": {"hard": 0.3}}),
                "--dry-run"],
     "recipe field difficulty.tau: no effect (mode kimi does not read it)"),
    ("train copy-loss under a mode that never compresses",
     lambda t: ["train", "--config", recipe(t, mode="cr"), "--traac.copy-loss", "answer_only"],
     "--traac.copy_loss: no effect (mode cr never compresses); drop it, or train a mode that "
     "reads it"),
    # --- a method's settings, in its mode's block (issue 70) ---
    ("yaml method setting written flat",
     lambda t: ["train", "--config", recipe(t, mode="alp", alp_beta=0.1), "--dry-run"],
     "alp_beta: a method's setting is written in its mode's block now: alp: {beta: VALUE} in a "
     "recipe, --alp.beta VALUE on the command line"),
    ("train method setting written flat",
     lambda t: ["train", "--config", recipe(t), "--no_l1_budget_in_prompt", "--dry-run"],
     "no_l1_budget_in_prompt: a method's setting is written in its mode's block now: l1_max: "
     "{budget_in_prompt: VALUE}"),
    ("train compression option written flat",
     lambda t: ["train", "--config", recipe(t), "--copy-loss", "full", "--dry-run"],
     "copy_loss: a method's setting is written in its mode's block now: traac: {copy_loss: "
     "VALUE}"),
    ("yaml method_args",
     lambda t: ["train", "--config", recipe(t, method_args={"scorer": "random"}), "--dry-run"],
     "method_args: write the mode's settings in its block (traac: {scorer: random} in a recipe"),
    ("yaml block key the mode lacks",
     lambda t: ["train", "--config", recipe(t, mode="alp", alp={"bta": 2}), "--dry-run"],
     "alp.bta: not a setting of mode alp; its settings are beta, normalizer"),
    ("train block option the mode lacks",
     lambda t: ["train", "--config", recipe(t), "--traac.scorr", "random", "--dry-run"],
     "traac.scorr: not a setting of mode traac; its settings are scorer,"),
    ("train block no mode has",
     lambda t: ["train", "--config", recipe(t), "--alpp.beta", "1", "--dry-run"],
     "--alpp.beta: no mode's settings are called alpp; did you mean --alp.?"),
    ("yaml block not a mapping",
     lambda t: ["train", "--config", recipe(t, traac="random"), "--dry-run"],
     "recipe field traac: the settings of mode traac are a mapping (traac: {setting: value})"),
    ("train block option without a value",
     lambda t: ["train", "--config", recipe(t), "--traac.scorer", "--dry-run"],
     "--traac.scorer needs a value (--traac.scorer VALUE)"),
    ("yaml length weight without TRAAC's length reward",
     lambda t: ["train", "--config", recipe(t, mode="cr", length_weight=1.0)],
     "recipe field length_weight: no effect (mode cr has no TRAAC length reward)"),
    ("experiment recipe with a key twice",
     lambda t: ["experiment", "compare", "--config", recipe(t, "mode: cr\nmode: traac\n")],
     "mode is written twice"),
    ("eval compression option without a tau",
     lambda t: ["eval", "--model", "testbed", "--dataset", "x", "--output", str(t / "o"),
                "--probe-layers", "0"],
     "--probe-layers: no effect, since nothing is compressed without --compress-tau"),
    ("generate compression option under a budget alone",
     lambda t: ["generate", "--prompt", "hi", "--think-budget", "8", "--scorer", "random"],
     "--scorer: no effect, since nothing is compressed without --compress-tau"),
    # --- a peer's settings that cancel it (issue 72, kind 1): its module's `RunRule`s and checks,
    # enforced by `TRAACConfig`, so the dry run, the run and the Python API refuse alike ---
    ("yaml adaptthink share that rounds to every rollout",
     lambda t: ["train", "--config", recipe(t, mode="adaptthink", adaptthink={"share": 0.9}),
                "--dry-run"],
     "adaptthink.share: 0.9 of num_generations=4 rounds to 4, so every rollout starts with an "
     "empty think block"),
    ("train adaptthink under vLLM",
     lambda t: ["train", "--config", recipe(t, mode="adaptthink"), "--use-vllm", "true",
                "--dry-run"],
     "use_vllm: true cancels mode adaptthink: TRL's vLLM generation samples a group from one "
     "prompt"),
    ("yaml ddca with group scaling",
     lambda t: ["train", "--config", recipe(t, mode="ddca", scale_rewards="group"), "--dry-run"],
     "scale_rewards: 'group' cancels mode ddca"),
    ("yaml arlcp under the dler profile",
     lambda t: ["train", "--config", recipe(t, mode="arlcp", optimizer_profile="dler"),
                "--dry-run"],
     "scale_rewards: 'batch' (optimizer_profile dler's) cancels mode arlcp"),
    ("train dot with resampling",
     lambda t: ["train", "--config", recipe(t, mode="dot"), "--dynamic-sampling", "resample",
                "--dry-run"],
     "dynamic_sampling: 'resample' cancels mode dot: it leaves every all-right group out of the "
     "loss, and those are the only groups DOT shapes; set dynamic_sampling none"),
    # --- outputs that cannot be written (issue 60, kind 2): before start-up, dry run or not ---
    ("train output-dir a file",
     lambda t: ["train", "--config", recipe(t, output_dir=str(a_file(t)))],
     "output_dir {t}/a-file: is a file, not a directory; name a directory"),
    ("train output-dir a file, dry run",
     lambda t: ["train", "--config", recipe(t), "--output-dir", str(a_file(t)), "--dry-run"],
     "output_dir {t}/a-file: is a file, not a directory"),
    ("train output-dir under a file",
     lambda t: ["train", "--config", recipe(t, output_dir=str(a_file(t) / "out")), "--dry-run"],
     "output_dir {t}/a-file/out: {t}/a-file is a file, not a directory"),
    ("train output-dir unwritable",
     lambda t: ["train", "--config", recipe(t, output_dir="/proc/traac-run"), "--dry-run"],
     "output_dir /proc/traac-run: cannot write in /proc"),
    # --- inputs that are not what a command reads (kind 5) ---
    ("copies metrics not json lines",
     lambda t: ["copies", run_dir(t, "step,loss\n1,0.5\n2,0.4\n")],
     "metrics.jsonl line 1: not JSON, so not the metrics.jsonl of a `traac train` run"),
    ("copies metrics without a step",
     lambda t: ["copies", run_dir(t, "")], "metrics.jsonl: holds no training step yet"),
    ("copies a run twice",
     lambda t: ["copies", run_dir(t, '{"step": 1}\n'), str(t / "x" / ".." / "run")],
     "copies: {t}/x/../run is given twice (as {t}/run)"),
    ("report a run with itself", lambda t: ["report", str(t), str(t)],
     "report: {t} is given twice; a run compared with itself shows no difference"),
    ("report a name twice",
     lambda t: ["report", str(t), run_dir(t, ""), "--names", "a", "a"],
     "report: --names gives 'a' twice"),
    ("experiment a variant twice",
     lambda t: ["experiment", "compare", "--variants", "CR", "CR"],
     "--variants: 'CR' is given twice"),
    # --- advice that leads to the fix (kind 6) ---
    ("testbed show quick, not built", lambda t: ["testbed", "show", "--quick"],
     "run `traac testbed build --quick` first"),
    ("testbed show smollm2, not built", lambda t: ["testbed", "show", "--base", "smollm2"],
     "run `traac testbed build --base smollm2` first"),
    ("testbed show seed and output, not built",
     lambda t: ["testbed", "show", "--seed", "3", "--output", str(t / "tb")],
     "run `traac testbed build --output {t}/tb --seed 3` first"),
    ("testbed mechanism, no long build", lambda t: ["testbed", "mechanism"],
     "--long: `traac testbed mechanism` measures a long build; pass --long trailing or "
     "--long interleaved"),
    ("testbed mechanism, no problems",
     lambda t: ["testbed", "mechanism", "--long", "interleaved", "--per-tier", "0"],
     "--per-tier 0: must be an integer >= 1"),
    ("testbed mechanism, not built",
     lambda t: ["testbed", "mechanism", "--long", "interleaved", "--output", str(t / "tb")],
     "run `traac testbed build --output {t}/tb --long interleaved` first"),
    ("testbed build, interruptions without a long build",
     lambda t: ["testbed", "build", "--interruptions", "--output", str(t / "tb")],
     "testbed: --interruptions is a setting of the long builds; add --long trailing or --long "
     "interleaved"),
    ("testbed show smollm2 on long traces, not built",
     lambda t: ["testbed", "show", "--base", "smollm2", "--long", "interleaved"],
     "run `traac testbed build --base smollm2 --long interleaved` first"),
    ("testbed build, quick on long traces",
     lambda t: ["testbed", "build", "--quick", "--long", "trailing", "--output", str(t / "tb")],
     "testbed: --long builds the full tiny model or --base; drop --quick"),
    ("testbed show, interrupted build not built",
     lambda t: ["testbed", "show", "--long", "trailing", "--interruptions", "--output",
                str(t / "tb")],
     "run `traac testbed build --output {t}/tb --long trailing --interruptions` first"),
    ("records plot, not a figure's file",
     lambda t: ["records", "plot", str(ROOT / "records" / "testbed-long-trailing"), "--output",
                str(t / "contrasts.txt")],
     "--output: {t}/contrasts.txt is not a .png, .svg, .pdf file; name the figure FILE.png"),
    ("records plot, into a file",
     lambda t: ["records", "plot", str(ROOT / "records" / "testbed-long-trailing"), "--output",
                str(a_file(t) / "contrasts.png")],
     "--output {t}/a-file: is a file, not a directory; name a directory"),
    ("records plot, not a study", lambda t: ["records", "plot", str(t), "--output", "c.png"],
     "records: {t} holds no recipe.yaml; give records/<study>"),
    # --- the dispatcher ---
    ("misspelt command", lambda t: ["trian"], "unknown command 'trian'; did you mean train?"),
]  # fmt: skip


@pytest.fixture
def no_work(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Fail the test if anything is built or loaded: every case must fail before that."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("work started: a model was built or loaded")

    monkeypatch.setenv("TRAAC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("traac.testbed.build.build_testbed", refuse)
    monkeypatch.setattr("traac.testbed.build.build_cached", refuse)
    monkeypatch.setattr("traac.pipelines.model_registry.build_cached", refuse)  # named models
    monkeypatch.setattr("traac.common.models.load_model", refuse)
    monkeypatch.setattr("traac.common.gguf.converted_gguf", refuse)
    monkeypatch.chdir(tmp_path)


def test_there_are_enough_cases(tmp_path: Path) -> None:
    assert len(CASES) >= 40
    commands = {argv(tmp_path)[0] for _, argv, _ in CASES}
    assert commands >= {"train", "eval", "generate", "demo", "report", "compress", "experiment",
                        "probe-report", "testbed"}  # fmt: skip


def assert_one_line(code: int, err: str, expected: str) -> None:
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1, err  # one line: no traceback, no usage dump
    assert lines[0].startswith("traac"), lines[0]
    assert ": error: " in lines[0] and expected in lines[0], lines[0]


@pytest.mark.parametrize(("name", "argv", "expected"), CASES, ids=[c[0] for c in CASES])
def test_careless_input_is_one_line_exit_2(
    name: str, argv: Any, expected: str, tmp_path: Path, no_work: None, capsys: Any
) -> None:
    code = cli_main(argv(tmp_path))
    assert_one_line(code, capsys.readouterr().err, expected.replace("{t}", str(tmp_path)))


def test_a_shared_recipe_under_a_mode_from_the_command_line_is_noted_not_refused(
    tmp_path: Path, no_work: None, capsys: Any
) -> None:
    """The recipe's fields are right for its own mode; under a mode (or use_peft) given over it
    on the command line, as smollm2-think.yaml's header suggests for CR+LR, the dry run passes
    and says in one line per reason what has no effect, and why."""
    path = recipe(tmp_path, traac={"scorer": "random", "probe_heads": "gated"}, use_peft=True,
                  lora_r=8)  # fmt: skip
    code = cli_main(["train", "--config", path, "--mode", "cr_lr", "--use-peft", "false",
                     "--dry-run"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    notes = [line for line in out.splitlines() if "the recipe's" in line]
    assert notes == [
        "note: the recipe's traac.scorer, traac.probe_heads have no effect: mode cr_lr never "
        "compresses "
        "(mode cr_lr given over the recipe)",
        "note: the recipe's lora_r has no effect: use_peft is off, so no adapters are trained "
        "(use_peft false given over the recipe)",
    ]


def test_smollm2_think_serves_its_baselines_with_a_note() -> None:
    """The workbench's shared recipe under every experiment variant's mode parses (its
    compression settings are noted under the modes that never compress, never refused)."""
    from traac.pipelines.experiments import ExperimentSettings
    from traac.pipelines.stages import Recipe
    from traac.pipelines.train import parse
    from traac.pipelines.variants import EXPERIMENTS

    think = ROOT / "recipes" / "smollm2-think.yaml"
    script, _ = parse(["--config", str(think), "--mode", "cr_lr"])
    assert script.notes == (
        "the recipe's traac.scorer, traac.scoring_model, traac.probe_layers, traac.probe_heads, "
        "traac.uniformity_calibration have no effect: mode cr_lr never compresses (mode cr_lr "
        "given over the recipe)",
    )
    assert parse(["--config", str(think)])[0].notes == ()
    for name, table in EXPERIMENTS.items():
        settings = ExperimentSettings.make(name, Path("unused"), think, False, None, [0])
        runs = settings.plan()
        assert [r.variant for r in runs] == list(table)
        cr = next(r for r in runs if r.fields["mode"] == "cr")
        script, _ = Recipe(cr.recipe.path, cr.recipe.overrides).parse(Path("m"), Path("o"))
        assert any("mode cr never compresses" in note for note in script.notes)


@pytest.mark.parametrize("command", ["eval", "generate"])
def test_probe_layers_past_the_model_are_named_before_its_weights_load(
    command: str, tmp_path: Path, char_tokenizer: Any, save_tiny: Any, no_work: None, capsys: Any
) -> None:
    """`compress` read config.json first already; eval and generate loaded the weights, then
    failed in the scorer (issue 60, kind 3)."""
    model = save_tiny(tmp_path / "m", char_tokenizer())
    capsys.readouterr()
    argv = [command, "--model", str(model), "--compress-tau", "0.5", "--probe-layers", "7"]
    if command == "eval":
        argv += ["--dataset", "testbed:easy?n=1", "--output", str(tmp_path / "o")]
    else:
        argv += ["--prompt", "1 + 1 ="]
    code = cli_main(argv)
    assert_one_line(code, capsys.readouterr().err, "probe_layers: [7] must be a non-empty set")


@pytest.mark.parametrize("dry_run", [True, False])
def test_train_names_probe_layers_past_the_model_from_its_config(
    dry_run: bool, tmp_path: Path, char_tokenizer: Any, save_tiny: Any, capsys: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """The dry run passed them, and the run loaded the policy and its reference first."""
    monkeypatch.setattr("trl.GRPOTrainer.__init__",
                        lambda *a, **k: pytest.fail("the weights started to load"))  # fmt: skip
    model = save_tiny(tmp_path / "m", char_tokenizer())
    capsys.readouterr()
    argv = ["train", "--config", recipe(tmp_path, model_name_or_path=str(model)),
            "--traac.probe-layers", "1,5", *(["--dry-run"] if dry_run else [])]  # fmt: skip
    code = cli_main(argv)
    assert_one_line(code, capsys.readouterr().err, "probe_layers: [1, 5] must be a non-empty")


def test_an_experiment_store_that_is_a_file_is_named_before_the_base_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """The store was checked only once the base model's stage had started (building the
    testbed when not cached), and the error named --output (issue 60, kind 2)."""
    monkeypatch.setattr("traac.pipelines.experiments.resolve_model",
                        lambda *a, **k: pytest.fail("the base model's stage started"))  # fmt: skip
    store = a_file(tmp_path)
    argv = ["experiment", "ablations", "--quick", "--variants", "CR", "--seeds", "0",
            "--config", str(ROOT / "recipes" / "testbed.yaml"), "--output", str(tmp_path / "r"),
            "--runs", str(store)]  # fmt: skip
    code = cli_main(argv)
    assert_one_line(code, capsys.readouterr().err, f"--runs {store}: is a file")


def test_a_model_directory_without_tokenizer_files_is_one_line(
    tmp_path: Path, char_tokenizer: Any, save_tiny: Any, capsys: Any
) -> None:
    """Such a directory used to load a tokenizer that maps text to nothing, and generation
    failed on a tensor's dtype far from the cause."""
    model = save_tiny(tmp_path / "m", char_tokenizer())
    for path in model.iterdir():
        if path.name not in ("config.json", "model.safetensors", "generation_config.json"):
            path.unlink()
    capsys.readouterr()  # what saving the model printed
    argv = ["eval", "--model", str(model), "--dataset", "testbed:easy?n=1", "--output",
            str(tmp_path / "o"), "--max-new-tokens", "4"]  # fmt: skip
    code = cli_main(argv)
    assert_one_line(code, capsys.readouterr().err, f"no tokenizer files in {model}")


def test_help_shows_every_option_in_the_dash_form(capsys: Any) -> None:
    from traac.cli import COMMANDS

    for command in COMMANDS:
        try:
            code = cli_main([command, "--help"])
        except SystemExit as done:  # argparse's way
            code = done.code
        assert code == 0
        out = capsys.readouterr().out
        listed = [line.split() for line in out.splitlines() if line.strip().startswith("-")]
        options = [w.strip(",[]") for words in listed for w in words if w.startswith("--")]
        assert options, command
        assert not [o for o in options if "_" in o.partition("=")[0]], (command, options)


def test_train_help_is_short_names_config_and_the_way_to_trls_fields(capsys: Any) -> None:
    assert cli_main(["train", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--config RECIPE" in out and "--help-all" in out
    assert "--mode" in out and "--dry-run" in out
    assert out.index("--mode") < out.index("traac train --help-all` lists all")
    assert "--adam-beta1" not in out  # transformers' fields wait for --help-all
    assert len(out.splitlines()) < 400
    assert "alp (--alp.beta, --alp.normalizer)" in out  # a peer's settings, by name only
    assert "(--l1-max.alpha," in out and "--traac.scorer" in out
    assert "global coefficient beta" not in out  # ALP's field help waits for --help-all
    assert cli_main(["train", "--help-all"]) == 0
    full = capsys.readouterr().out
    assert "--adam_beta1" in full and "global coefficient beta" in full


# A few cases as a user runs them: a fresh interpreter, its exit code, and whether torch was
# imported before the error (it must not be: the check comes first).
END_TO_END = [
    ["train", "--max_steps", "-5"],
    ["train", "--lerning_rate", "1e-4"],
    ["train", "--config", "recipes/nope.yaml"],
    ["train", "--max_ste", "5", "--model_name_or_path", "testbd"],
    ["train", "--alp-beta", "2"],  # a method's setting flat: its block named, before torch
    ["train", "--traac.scorr", "random"],
    ["eval", "--num_samples", "0", "--model", "testbed", "--dataset", "x", "--output", "o"],
    ["generate", "--model", "testbd", "--prompt", "hi"],
    ["demo", "--eval-n", "0"],
    ["compress", "--input", "x.txt", "--batch-size", "0"],
]
PROBE = "import sys; from traac.cli import main; code = main(sys.argv[1:]); " \
        "print('torch' in sys.modules); sys.exit(code)"  # fmt: skip


@pytest.mark.parametrize("argv", END_TO_END, ids=[" ".join(a[:2]) for a in END_TO_END])
def test_end_to_end_the_error_comes_before_torch(argv: list[str], tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "TRAAC_CACHE_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, env=env,
        cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stdout.strip() == "False"  # torch not imported when the error was printed


def test_on_a_fresh_cache_a_misspelt_field_is_named_before_torch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The field list is read off the sources (`traac.pipelines.recipe_fields`), so a command
    names a misspelt field without importing torch before any full parse ran on the machine,
    in the words of the full parse."""
    from traac.pipelines.train import build_parser

    monkeypatch.setenv("TRAAC_CACHE_DIR", str(tmp_path / "parsed"))  # the full parse's cache
    with pytest.raises(TraacError, match="no such field; did you mean learning_rate"):
        build_parser().parse_args_and_config(["--config", recipe(tmp_path, learning_rte=1)])
    from traac.pipelines.recipe import precheck

    monkeypatch.setenv("TRAAC_CACHE_DIR", str(tmp_path / "fresh"))
    precheck(["--no-log-on-each-node", "--dry-run", "--gradient_checkpointing", "true"])  # known
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src"),
        "TRAAC_CACHE_DIR": str(tmp_path / "fresh"),
    }
    for argv, expected in (
        (["--config", recipe(tmp_path, learning_rte=1)],
         "recipe field learning_rte: no such field; did you mean learning_rate?"),
        (["--max_ste", "5"], "unknown option --max_ste; did you mean --max-steps?"),
    ):  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-c", PROBE, "train", *argv], capture_output=True, text=True,
            env=env, cwd=tmp_path, timeout=300,
        )  # fmt: skip
        assert done.returncode == 2 and done.stdout.strip() == "False", done.stderr
        assert done.stderr.strip() == f"traac train: error: {expected}"


def test_the_plan_of_ddca_shows_the_scaling_it_trains_with(
    tmp_path: Path, no_work: None, capsys: Any
) -> None:
    """The plan said "scale_rewards group" and TRL divided DDCA's advantage again (issue 72,
    kind 1): the scaling DDCA needs fills `scale_rewards` left unset."""
    assert cli_main(["train", "--config", recipe(tmp_path, mode="ddca"), "--dry-run"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the table wraps long values
    assert "grpo (default): scale_rewards none," in out
