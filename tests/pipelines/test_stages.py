"""What the demo and the experiments share: compression during training per difficulty bin,
read back from a run's `metrics.jsonl`, and its table."""

from __future__ import annotations

import json
import logging
import multiprocessing
import signal
from dataclasses import replace

import pytest
import torch

from traac.evaluation.harness.runner import SAMPLES_FILE, SamplesFile
from traac.pipelines import stages
from traac.pipelines.stages import (
    BinCompression,
    HeldOut,
    Recipe,
    compression_table,
    evaluating_beside,
    training_compression,
)


def test_training_compression_reads_the_per_bin_metrics(tmp_path):
    rows = [
        {"step": 1, "traac/all/prompts": 4, "traac/easy/prompts": 2,
         "traac/easy/compressed_frac": 0.5, "traac/easy/steps_removed": 3.0,
         "traac/easy/tokens_removed": 40.0, "traac/hard/prompts": 2,
         "traac/hard/compressed_frac": 0.0, "traac/seconds/compress": 1.5},
        {"step": 2, "traac/all/prompts": 4, "traac/easy/prompts": 1,
         "traac/easy/compressed_frac": 0.25, "traac/easy/steps_removed": 1.0,
         "traac/easy/tokens_removed": 20.0, "traac/hard/prompts": 3,
         "traac/hard/compressed_frac": 0.1, "traac/hard/steps_removed": 2.0,
         "traac/hard/tokens_removed": 10.0},
    ]  # fmt: skip
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"step": 3, "traac/ea')
    bins = training_compression(path)
    assert bins["easy"] == BinCompression(
        prompts=3, compressed_frac=0.375, steps_removed=2.0, tokens_removed=30.0
    )
    assert bins["hard"].prompts == 5 and bins["hard"].compressed_frac == pytest.approx(0.05)
    assert (bins["hard"].steps_removed, bins["hard"].tokens_removed) == (2.0, 10.0)
    assert bins["medium"] == BinCompression(0, None, None, None)  # no medium prompt was seen
    assert training_compression(tmp_path / "none.jsonl") == {}
    assert "evicted" not in compression_table(bins).markdown()  # no step kinds were logged


def test_evicted_step_kinds_are_averaged_where_logged(tmp_path):
    """Testbed prompts log the kinds of the steps the probe evicted: the mean over the steps
    that compressed something, each kind on its own."""
    rows = [
        {"step": 1, "traac/easy/prompts": 2, "traac/easy/evicted_compute": 0.0,
         "traac/easy/evicted_conclude": 1.0, "traac/easy/evicted_recheck": 3.0,
         "traac/easy/compute_loss": 0.0},
        {"step": 2, "traac/easy/prompts": 2},  # nothing compressed: no eviction keys
        {"step": 3, "traac/easy/prompts": 2, "traac/easy/evicted_compute": 1.0,
         "traac/easy/evicted_conclude": 0.0, "traac/easy/evicted_recheck": 2.0,
         "traac/easy/compute_loss": 0.2},
    ]  # fmt: skip
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    easy = training_compression(path)["easy"]
    assert easy.evicted == {"compute": 0.5, "conclude": 0.5, "recheck": 2.5}
    assert easy.compute_loss == pytest.approx(0.1)
    table = compression_table(training_compression(path)).markdown()
    assert "recheck evicted" in table and "| easy | 6 |" in table and "10.0%" in table


def test_a_saved_adapter_is_a_trained_model_and_a_checkpoint_alone_is_not(tmp_path):
    """An experiment rerun keeps a finished LoRA run: before, only a full model's config.json
    counted, so every rerun trained a finished adapter one step further."""
    run = tmp_path / "model"
    (run / "checkpoint-60").mkdir(parents=True)
    (run / "checkpoint-60" / "adapter_config.json").write_text("{}")
    (run / "checkpoint-60" / "adapter_model.safetensors").write_bytes(b"weights")
    assert not Recipe.trained(run)
    (run / "adapter_config.json").write_text("{}")
    assert not Recipe.trained(run)  # a config without its weights: a save cut short
    (run / "adapter_model.safetensors").write_bytes(b"weights")
    assert Recipe.trained(run)


@pytest.mark.slow
def test_held_out_refill_batching_writes_the_padded_samples(quick_testbed, tmp_path):
    """The demo's refilled evaluation samples each request's own stream, as padded batches do."""
    held = HeldOut(per_tier=2, num_samples=2, max_new_tokens=48, batch_size=3)
    runs = {b: tmp_path / b / "run" for b in ("padded", "refill")}
    summaries = {b: replace(held, batching=b).evaluate(quick_testbed, runs[b]) for b in runs}
    samples = {b: SamplesFile(runs[b] / SAMPLES_FILE).read() for b in runs}
    assert len(samples["padded"]) == 3 * 2 * 2
    assert samples["refill"] == samples["padded"]
    assert summaries["refill"] == summaries["padded"]


BESIDE = HeldOut(per_tier=2, num_samples=2, max_new_tokens=48, batch_size=3, batching="refill")


@pytest.mark.slow
def test_an_evaluation_beside_writes_the_samples_the_caller_would_have(
    quick_testbed, tmp_path, monkeypatch
):
    """The child (one thread, another process) leaves every sample; the caller's evaluation
    then only reads them back, and they are the ones an evaluation in place writes."""
    monkeypatch.setattr(stages, "cores", lambda: 2)  # as on a 2-core machine, whatever this is
    beside, here = tmp_path / "beside" / "run", tmp_path / "here" / "run"
    with evaluating_beside(BESIDE, quick_testbed, beside):
        pass  # the block's end waits for the child
    written = SamplesFile(beside / SAMPLES_FILE).read()
    assert len(written) == 3 * 2 * 2
    assert (tmp_path / "beside" / "run.beside.log").is_file()
    summary = BESIDE.evaluate(quick_testbed, beside)
    assert SamplesFile(beside / SAMPLES_FILE).read() == written  # nothing decoded again
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the child's: another CPU may decode other floats on two
    try:
        assert BESIDE.evaluate(quick_testbed, here) == summary
    finally:
        torch.set_num_threads(threads)
    assert SamplesFile(here / SAMPLES_FILE).read() == written


def test_on_one_core_nothing_runs_beside(monkeypatch, tmp_path):
    monkeypatch.setattr(stages, "cores", lambda: 1)
    with evaluating_beside(BESIDE, tmp_path / "no-model", tmp_path / "eval" / "run") as child:
        assert child is None and multiprocessing.active_children() == []
    assert not (tmp_path / "eval").exists()


@pytest.mark.slow
def test_a_failed_evaluation_beside_is_logged_and_left_to_the_caller(tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(stages, "cores", lambda: 2)
    with (
        caplog.at_level(logging.WARNING, logger=stages.__name__),
        evaluating_beside(BESIDE, tmp_path / "no-model", tmp_path / "eval" / "run") as child,
    ):
        pass
    assert child is not None and child.exitcode == 1
    assert "the evaluation beside failed (exit 1;" in caplog.text
    assert "no-model" in (tmp_path / "eval" / "run.beside.log").read_text()


@pytest.mark.slow
def test_an_exception_in_the_block_stops_the_evaluation_beside(
    quick_testbed, tmp_path, monkeypatch
):
    """Stopped (SIGTERM), not waited for: a training that fails does not wait on the base
    evaluation, which a rerun resumes."""
    monkeypatch.setattr(stages, "cores", lambda: 2)
    with (
        pytest.raises(RuntimeError, match="training failed"),
        evaluating_beside(BESIDE, quick_testbed, tmp_path / "eval" / "run") as child,
    ):
        raise RuntimeError("training failed")
    assert child is not None and child.exitcode == -signal.SIGTERM
    assert multiprocessing.active_children() == []
