"""Refilled batches sample what padded ones do: each request its own seeded stream, whichever
rows it shares the batch with."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from traac.common.models import load_model, load_tokenizer
from traac.data.datasets import load_items
from traac.errors import TraacError
from traac.evaluation.harness.prompts import build_prompt
from traac.evaluation.inference.generation import Sampling, TransformersBackend
from traac.evaluation.inference.refill import RefillBackend

pytestmark = pytest.mark.slow


def test_refilled_rows_sample_the_padded_batch_tokens(quick_testbed):
    model, tokenizer = (
        load_model(str(quick_testbed), device="cpu"),
        load_tokenizer(str(quick_testbed)),
    )
    items = load_items("testbed:easy?n=6")
    prompts = [build_prompt(it, tokenizer, "question") for it in items]
    keys = [f"{it.id}#0" for it in items]
    sampling = Sampling(temperature=1.0, top_p=0.9, max_new_tokens=40, seed=3)
    padded = TransformersBackend(model, tokenizer).generate(prompts, sampling, keys)
    lengths = {len(g.token_ids) for g in padded}
    assert len(lengths) > 1 and {g.finish_reason for g in padded} == {"stop", "length"}
    counted: list[int] = []
    for slots in (1, 4):
        refilled = RefillBackend(model, tokenizer, slots).generate(
            prompts, sampling, keys, on_tokens=counted.append
        )
        assert refilled == padded
    # Every sampled token is counted once per run, the stop tokens included.
    produced = sum(len(g.token_ids) + (g.finish_reason == "stop") for g in padded)
    assert sum(counted) == 2 * produced


def test_eval_with_batching_refill_writes_the_padded_records(tmp_path, quick_testbed):
    from traac.commands.eval import main

    argv = ["--model", str(quick_testbed), "--dataset", "testbed:easy?n=5", "--num-samples",
            "2", "--max-new-tokens", "32", "--batch-size", "3"]  # fmt: skip
    assert main([*argv, "--output", str(tmp_path / "padded")]) == 0
    assert main([*argv, "--output", str(tmp_path / "refill"), "--batching", "refill"]) == 0
    # in the same order: the paired bootstraps draw problems in the file's order
    assert _records(tmp_path / "refill") == _records(tmp_path / "padded")


def _records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]


def test_a_refilled_call_saves_its_responses_as_they_end(tmp_path, quick_testbed, monkeypatch):
    """One call of 24 requests (16 batches of 3 hold them all), which end out of order: saves of
    3 or more as they end, before the call returns, in request order (the padded run's file);
    stopped at the first save, a rerun makes the records of an uninterrupted run."""
    from traac.commands.eval import main
    from traac.evaluation.harness.samples import SamplesFile

    argv = ["--model", str(quick_testbed), "--dataset", "testbed:all?n=4", "--num-samples",
            "2", "--max-new-tokens", "48", "--batch-size", "3", "--batching", "refill"]  # fmt: skip
    padded = [a for a in argv if a not in ("--batching", "refill")]
    assert main([*padded, "--output", str(tmp_path / "padded")]) == 0
    saves: list[tuple[int, bool]] = []  # (records, whether the call had returned)
    returned = False
    generate, append = RefillBackend.generate, SamplesFile.append

    def generating(self, *args, **kwargs):
        nonlocal returned
        out = generate(self, *args, **kwargs)
        returned = True
        return out

    def appending(self, records):
        saves.append((len(records), returned))
        append(self, records)

    monkeypatch.setattr(RefillBackend, "generate", generating)
    monkeypatch.setattr(SamplesFile, "append", appending)
    assert main([*argv, "--output", str(tmp_path / "whole")]) == 0
    assert sum(n for n, _ in saves) == 24 and len(saves) > 1
    assert all(n >= 3 and not after for n, after in saves[:-1])
    assert _records(tmp_path / "whole") == _records(tmp_path / "padded")

    def stopping(self, records):
        append(self, records)
        raise KeyboardInterrupt

    monkeypatch.setattr(SamplesFile, "append", stopping)
    with pytest.raises(KeyboardInterrupt):
        main([*argv, "--output", str(tmp_path / "stopped")])
    assert len(_records(tmp_path / "stopped")) == saves[0][0]
    monkeypatch.setattr(SamplesFile, "append", append)
    assert main([*argv, "--output", str(tmp_path / "stopped")]) == 0
    assert _records(tmp_path / "stopped") == _records(tmp_path / "whole")


@pytest.mark.parametrize("extra", [["--think-budget", "8"], ["--backend", "vllm"]])
def test_refill_with_thinking_or_vllm_fails_before_the_model_loads(tmp_path, monkeypatch, extra):
    from traac.commands.eval import main

    monkeypatch.setattr("traac.common.models.load_model", lambda *a, **k: pytest.fail("loaded"))
    argv = ["--model", str(tmp_path), "--dataset", "testbed:easy", "--output", str(tmp_path / "o")]
    with pytest.raises(TraacError, match=re.escape("--batching refill: plain generation")):
        main([*argv, "--batching", "refill", *extra])


def test_waiting_prompts_are_prefilled_slots_at_a_time(quick_testbed):
    model, tokenizer = (
        load_model(str(quick_testbed), device="cpu"),
        load_tokenizer(str(quick_testbed)),
    )
    prompts = [build_prompt(it, tokenizer, "question") for it in load_items("testbed:easy?n=10")]
    sampling = Sampling(temperature=1.0, top_p=1.0, max_new_tokens=24, seed=1)
    widths: list[int] = []
    forward = model.forward

    def counting(*args, **kwargs):
        widths.append(kwargs["input_ids"].shape[1])
        return forward(*args, **kwargs)

    model.forward = counting
    out = RefillBackend(model, tokenizer, 4).generate(
        prompts, sampling, [str(i) for i in range(10)]
    )
    assert len(out) == 10
    # 10 prompts, 4 slots: three prefills (4, 4 and 2 prompts), the rest one-token steps.
    assert sum(w > 1 for w in widths) == 3
