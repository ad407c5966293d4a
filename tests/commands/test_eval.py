"""`traac eval` on a real pretrained model: SmolLM2 by name, on a file in UnderthinkingBench's
layout (rows made here by reasoning-gym, never a copy of the benchmark)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import reasoning_gym

from traac.cli import main as cli_main
from traac.evaluation.prompts import THINK_INSTRUCTION

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
