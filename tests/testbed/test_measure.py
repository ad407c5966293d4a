"""Sampling the card's and the mechanism's responses, resumably."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from traac.data.testbed_problems import EVAL_SEED, make_items
from traac.evaluation.reports.mechanism import Mechanism
from traac.testbed.measure import SavedDraws, generate

pytestmark = pytest.mark.slow


def test_a_stopped_sampling_resumes_with_the_draws_of_an_unstopped_one(
    tmp_path, quick_testbed, monkeypatch
):
    model = AutoModelForCausalLM.from_pretrained(quick_testbed).eval()
    tokenizer = AutoTokenizer.from_pretrained(quick_testbed)
    items = make_items("all", 3, EVAL_SEED, "eval")  # 9 problems: batches of 4, 4 and 1

    def draw(saved: SavedDraws | None = None) -> list:
        torch.manual_seed(5)
        return generate(model, tokenizer, items, 1, 1.0, 24, 4, saved=saved)

    whole = draw()
    path = tmp_path / "draws.jsonl"
    add = SavedDraws.add

    def stop_after_one(self, ids):
        add(self, ids)
        raise KeyboardInterrupt

    monkeypatch.setattr(SavedDraws, "add", stop_after_one)
    with pytest.raises(KeyboardInterrupt):
        draw(SavedDraws(path, "model a"))
    monkeypatch.setattr(SavedDraws, "add", add)
    with path.open("a") as f:
        f.write('{"ids": [[1, 2')  # a line torn by the stop
    saved = SavedDraws(path, "model a")
    assert len(saved.batches) == 1
    torch.manual_seed(99)  # the saved state, not the seed, decides the next batch
    assert generate(model, tokenizer, items, 1, 1.0, 24, 4, saved=saved) == whole
    assert len(SavedDraws(path, "model a").batches) == 3
    assert SavedDraws(path, "model b").batches == []  # another model's draws start over
    path.write_text('{"key": "model a"}\n[1, 2]\n')  # a line no batch writes: drawn again
    assert SavedDraws(path, "model a").batches == []
    path.write_bytes(b"\xff\xfe")
    assert SavedDraws(path, "model a").batches == [] and path.read_text() == '{"key": "model a"}\n'


def test_a_mechanism_whose_draws_cannot_be_kept_is_measured_all_the_same(
    tmp_path, quick_testbed, monkeypatch, capsys
):
    from traac import cli

    def read_only(self, path, key):
        raise PermissionError(13, "Permission denied")

    measured: list[int] = []

    def tables(model, tokenizer, responses, *args, **kwargs):  # whatever the build gets right
        measured.append(len(responses))
        return Mechanism([], [])

    monkeypatch.setenv("TRAAC_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(SavedDraws, "__init__", read_only)
    monkeypatch.setattr("traac.testbed.mechanism.mechanism", tables)
    argv = ["testbed", "mechanism", "--long", "interleaved", "--per-tier", "3", "--output",
            str(quick_testbed)]  # fmt: skip
    assert cli.main(argv) == 0
    out = capsys.readouterr()
    assert "the draws are not kept" in out.err and "Permission denied" in out.err
    assert f"{measured[0]} right, well-formed responses of 9 drawn" in " ".join(out.out.split())
