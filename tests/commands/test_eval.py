"""`traac eval` on a real pretrained model: SmolLM2 by name, on a file in UnderthinkingBench's
layout (rows made here by reasoning-gym, never a copy of the benchmark)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import reasoning_gym
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from traac.cli import main as cli_main
from traac.commands.eval import main as eval_main
from traac.compression.factory import build_compressor
from traac.compression.formats import ChatFormat
from traac.compression.settings import CompressionSettings
from traac.errors import TraacError
from traac.evaluation.harness.prompts import THINK_INSTRUCTION

pytestmark = pytest.mark.slow


def underthink_file(path: Path) -> Path:
    rows = [
        {**entry, "puzzle": "chain_sum", "uuid": f"u{k}"}
        for k, entry in enumerate(reasoning_gym.create_dataset("chain_sum", size=2, seed=3))
    ]
    path.write_text(json.dumps(rows))
    return path


def test_smollm2_by_name_on_a_benchmark_file(smollm2: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    argv = ["eval", "--model", "smollm2", "--dataset", str(underthink_file(tmp_path / "u.json")),
            "--num-samples", "1", "--max-new-tokens", "8", "--output", str(out)]  # fmt: skip
    assert cli_main(argv) == 0
    assert re.search(r"\ball +│ +2 │ +2 │", capsys.readouterr().out)  # the table, drawn
    records = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert len(records) == 2 and all(r["task"] == "chain_sum" for r in records)
    # SmolLM2's chat template opens no think block, so the prompt asks for one.
    assert all(THINK_INSTRUCTION in r["prompt"] for r in records)
    assert all(r["prompt"].endswith("<|im_start|>assistant\n") for r in records)
    run = json.loads((out / "run.json").read_text())
    assert run["settings"]["model"] == str(smollm2) and run["settings"]["prompt_style"] == "think"


def test_a_device_map_decodes_as_one_device(quick_testbed: Path, tmp_path: Path, capsys) -> None:
    """`--device-map auto` (the whole model on the CPU here) through the think-budget decode
    loop: the same records as `--device cpu`; a conflicting or misplaced map exits 2 first."""
    common = ["eval", "--model", "testbed-quick", "--dataset", "testbed:easy?n=2", "--num-samples",
              "1", "--max-new-tokens", "24", "--think-budget", "8"]  # fmt: skip
    texts = []
    for name, placement in (("one", ["--device", "cpu"]), ("mapped", ["--device-map", "auto"])):
        assert cli_main([*common, *placement, "--output", str(tmp_path / name)]) == 0
        rows = (tmp_path / name / "samples.jsonl").read_text().splitlines()
        texts.append([json.loads(r)["response"] for r in rows])
    assert texts[0] == texts[1] and len(texts[0]) == 2
    for bad in (
        ["--device", "cpu", "--device-map", "auto"],
        ["--backend", "vllm", "--device-map", "auto"],
    ):
        assert cli_main([*common, *bad, "--output", str(tmp_path / "bad")]) == 2
        assert "--device-map" in capsys.readouterr().err and not (tmp_path / "bad").exists()


def ttc_records(path: Path) -> list[dict]:
    return [json.loads(line) for line in (path / "samples.jsonl").read_text().splitlines()]


def test_a_scoring_model_prunes_what_its_own_compressor_does(
    quick_testbed: Path, smollm2: Path, tmp_path: Path, fake_vllm
) -> None:
    """The quick testbed decodes, SmolLM2 (another tokenizer) scores: each record keeps the
    steps a Compressor built from SmolLM2 keeps, on vLLM as on transformers; naming the model
    itself, or nothing, gives the on-policy records."""
    argv = ["eval", "--model", str(quick_testbed), "--dataset", "testbed:easy?n=3",
            "--num-samples", "1", "--temperature", "0", "--max-new-tokens", "40",
            "--compress-tau", "0.6"]  # fmt: skip
    runs = {"own": [], "itself": ["--scoring-model", str(quick_testbed)],
            "foreign": ["--scoring-model", "smollm2"],
            "vllm": ["--scoring-model", "smollm2", "--backend", "vllm"]}  # fmt: skip
    for name, extra in runs.items():
        assert cli_main([*argv, *extra, "--output", str(tmp_path / name)]) == 0
    rows = {name: ttc_records(tmp_path / name) for name in runs}
    assert rows["itself"] == rows["own"]
    settings = json.loads((tmp_path / "foreign" / "run.json").read_text())["settings"]
    assert settings["scoring_model"] == str(smollm2) and settings["compress_tau"] == 0.6
    for name in ("own", "itself"):
        run = json.loads((tmp_path / name / "run.json").read_text())["settings"]
        assert run["scoring_model"] is None
    scorer = AutoModelForCausalLM.from_pretrained(smollm2, dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(smollm2)
    compressor = build_compressor(CompressionSettings(), scorer, tokenizer, ChatFormat())
    foreign = rows["foreign"]
    results = compressor([r["ttc_original_reasoning"] for r in foreign], [0.6] * len(foreign))
    assert any(r.compressed for r in results), "nothing evicted"
    for record, result, own in zip(foreign, results, rows["own"], strict=True):
        assert record["ttc_step_kept"] == result.kept
        assert record["ttc_original_reasoning"] == own["ttc_original_reasoning"]
    assert [r["ttc_step_kept"] for r in rows["vllm"]] == [r["ttc_step_kept"] for r in foreign]
    assert [r["response"] for r in rows["vllm"]] == [r["response"] for r in foreign]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "--scoring-model smollm2: scores the steps test-time compression prunes; add"),
        (["--compress-tau", "0.4", "--scorer", "random"], "use --scorer attention"),
    ],
)
def test_a_scoring_model_without_compression_fails_before_any_model_loads(
    tmp_path: Path, monkeypatch, extra: list[str], message: str
) -> None:
    monkeypatch.setattr("traac.common.models.load_model", lambda *a, **k: pytest.fail("loaded"))
    monkeypatch.setattr("traac.common.models.load_tokenizer", lambda *a: pytest.fail("loaded"))
    argv = ["--model", str(tmp_path), "--dataset", "testbed:easy", "--output", str(tmp_path / "o"),
            "--scoring-model", "smollm2", *extra]  # fmt: skip
    with pytest.raises(TraacError, match=re.escape(message)) as err:
        eval_main(argv)
    assert "\n" not in str(err.value) and not (tmp_path / "o").exists()


def test_scoring_responses_imports_no_model_stack() -> None:
    """`traac eval --responses` (and a re-report) loads the command without the modules only a
    model needs: the testbed's builder (peft, TRL), the attention probe (accelerate) and the hub
    loader (datasets), whose imports were most of a fresh re-report's seconds."""
    model_only = [
        "accelerate",
        "datasets",
        "peft",
        "trl",
        "traac.evaluation.inference.refill",
        "traac.compression.scoring",
        "traac.pipelines.model_registry",
        "traac.testbed.build",
    ]
    probe = f"import sys, traac.commands.eval; print([m for m in {model_only} if m in sys.modules])"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
