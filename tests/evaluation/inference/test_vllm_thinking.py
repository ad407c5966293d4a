"""Think budgets and test-time compression on vLLM: the orchestration that decodes with the
transformers engine, run on a fake `vllm` (tests/fakes/vllm_fake, which speaks
`LLM.generate` and decodes with the same weights), writes the same records."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from traac.commands.eval import main
from traac.errors import TraacError
from traac.evaluation.harness import runner
from traac.evaluation.inference.generation import VLLMSettings, load_vllm

THINKING = {
    "budget": ["--think-budget", "12"],
    "compress": ["--compress-tau", "0.4"],
    "budget+compress": ["--think-budget", "12", "--compress-tau", "0.4"],
}


# The probe's scores: the transformers engine reads them from the cache it built while
# decoding, vLLM's from one forward over the finished trace (equal to 1e-5, test_testtime.py).
SCORES = ("ttc_step_scores", "ttc_uniformity")


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in (path / "samples.jsonl").read_text().splitlines()]


def split_scores(rows: list[dict]) -> tuple[list[dict], list[list[float]]]:
    """The records without their probe scores, and the scores."""
    scores = [[*r.get("ttc_step_scores", []), r.get("ttc_uniformity") or 0.0] for r in rows]
    return [{k: v for k, v in r.items() if k not in SCORES} for r in rows], scores


@pytest.mark.slow
@pytest.mark.parametrize(
    ("model", "thinking"),
    [
        ("quick_testbed", "budget"),
        ("quick_testbed", "compress"),  # closed think blocks, pruned
        ("smollm2", "budget"),
        ("smollm2", "budget+compress"),  # interrupted think blocks, pruned
    ],
)
def test_vllm_writes_the_records_of_the_transformers_engine(
    request, tmp_path, fake_vllm, model, thinking
):
    path = str(request.getfixturevalue(model))
    argv = ["--model", path, "--dataset", "testbed:easy?n=2", "--num-samples", "1",
            "--temperature", "0", "--max-new-tokens", "40", *THINKING[thinking]]  # fmt: skip
    assert main([*argv, "--output", str(tmp_path / "transformers")]) == 0
    assert main([*argv, "--output", str(tmp_path / "vllm"), "--backend", "vllm"]) == 0
    ours, our_scores = split_scores(records(tmp_path / "transformers"))
    theirs, their_scores = split_scores(records(tmp_path / "vllm"))
    assert theirs == ours
    for mine, other in zip(our_scores, their_scores, strict=True):
        assert other == pytest.approx(mine, rel=1e-5, abs=1e-7)
    (llm,) = fake_vllm.INSTANCES
    # Every request of a phase in one generate call: 2 think blocks, then 2 answers or fewer.
    assert llm.calls[0] == 2 and len(llm.calls) <= 2
    if "budget" in thinking:
        assert any(r["interrupted"] for r in ours)
    if "compress" in thinking:
        assert all("ttc_tokens_saved" in r for r in ours)


@pytest.mark.slow
def test_engine_settings_reach_vllm_and_plain_eval_sends_every_request_at_once(
    tmp_path, quick_testbed, fake_vllm
):
    argv = ["--model", str(quick_testbed), "--dataset", "testbed:easy?n=3", "--num-samples",
            "2", "--max-new-tokens", "8", "--backend", "vllm", "--tensor-parallel-size", "1",
            "--max-model-len", "256", "--gpu-memory-utilization", "0.5", "--seed", "7",
            "--output", str(tmp_path / "out")]  # fmt: skip
    assert main(argv) == 0
    (llm,) = fake_vllm.INSTANCES
    assert llm.options == {"seed": 7, "dtype": "auto", "tensor_parallel_size": 1,
                           "gpu_memory_utilization": 0.5, "max_model_len": 256}  # fmt: skip
    assert llm.calls == [6]  # the whole list, not batches of --batch-size
    assert len(records(tmp_path / "out")) == 6


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--backend", "vllm", "--max-model-len", "0"], "--max-model-len 0: must be at least 1"),
        (["--backend", "vllm", "--tensor-parallel-size", "0"], "--tensor-parallel-size 0: must"),
        (["--backend", "vllm", "--gpu-memory-utilization", "1.5"], "--gpu-memory-utilization 1.5"),
        (["--backend", "vllm", "--gpu-memory-utilization", "nan"], "--gpu-memory-utilization nan"),
        (["--tensor-parallel-size", "2"], "--tensor-parallel-size sets the vLLM engine"),
        (["--max-model-len", "512"], "--max-model-len sets the vLLM engine"),
    ],
)
def test_bad_engine_settings_fail_before_any_model_loads(tmp_path, monkeypatch, extra, message):
    monkeypatch.setattr("traac.common.models.load_model", lambda *a, **k: pytest.fail("loaded"))
    monkeypatch.setattr("traac.common.models.load_tokenizer", lambda *a: pytest.fail("loaded"))
    argv = ["--model", str(tmp_path), "--dataset", "testbed:easy", "--output", str(tmp_path / "o")]
    with pytest.raises(TraacError, match=re.escape(message)) as err:
        main([*argv, *extra])
    assert "\n" not in str(err.value)


def test_a_lora_adapter_is_refused_before_vllm_loads(tmp_path, quick_testbed):
    (tmp_path / "adapter_config.json").write_text(
        json.dumps({"base_model_name_or_path": str(quick_testbed)})
    )
    with pytest.raises(TraacError, match="is a LoRA adapter; merge it into its base first"):
        load_vllm(str(tmp_path), 0, VLLMSettings(), None)


@pytest.mark.slow
def test_vllm_samples_reach_the_file_call_by_call_and_survive_a_crash(
    tmp_path, quick_testbed, fake_vllm, monkeypatch
):
    """vLLM gets the requests in calls of `CALL_REQUESTS` (4 here), each call's samples
    written before the next: an out-of-memory error in the second call keeps the first's 4
    samples, and the rerun makes only the other 2."""
    monkeypatch.setattr(runner, "CALL_REQUESTS", 4, raising=False)
    generate = fake_vllm.LLM.generate

    def out_of_memory_on_the_second_call(self, *args, **kwargs):
        if self.calls:
            raise RuntimeError("CUDA out of memory")
        return generate(self, *args, **kwargs)

    monkeypatch.setattr(fake_vllm.LLM, "generate", out_of_memory_on_the_second_call)
    argv = ["--model", str(quick_testbed), "--dataset", "testbed:easy?n=3", "--num-samples",
            "2", "--max-new-tokens", "8", "--backend", "vllm",
            "--output", str(tmp_path / "o")]  # fmt: skip
    with pytest.raises(RuntimeError, match="out of memory"):
        main(argv)
    assert len(records(tmp_path / "o")) == 4
    monkeypatch.setattr(fake_vllm.LLM, "generate", generate)
    assert main(argv) == 0
    assert len(records(tmp_path / "o")) == 6
    assert fake_vllm.INSTANCES[-1].calls == [2]
