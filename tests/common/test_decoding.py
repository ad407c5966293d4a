"""The decode loops read the device a constant number of times per step, and the static-cache
path (a GPU's) samples the tokens of the dynamic one (a CPU's)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import pairwise
from typing import Any

import pytest
import torch

from traac.common import decoding
from traac.common.decoding import (
    RowSampler,
    decode_padded,
    decode_refilled,
    decode_rows,
    fast_decoding,
)

# Every way Python code reads a tensor's values back to the host: on a GPU each waits for the
# device (the C++ ops that sync by themselves, such as nonzero, are counted too).
READS = ("item", "tolist", "numpy", "nonzero", "__bool__", "__int__", "__float__", "__index__")


@contextmanager
def counted_reads() -> Iterator[list[int]]:
    """Counts host reads of tensors within the block (one list item: the running count)."""
    count = [0]
    saved = {name: getattr(torch.Tensor, name) for name in READS}

    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        def read(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            count[0] += 1
            return original(self, *args, **kwargs)

        return read

    for name, original in saved.items():
        setattr(torch.Tensor, name, wrap(original))
    try:
        yield count
    finally:
        for name, original in saved.items():
            setattr(torch.Tensor, name, original)


def reads_per_step(model: Any, run: Callable[[], object]) -> list[int]:
    """Host reads between consecutive forwards of `model` during `run` (one entry a forward;
    the last holds what followed the last forward)."""
    marks: list[int] = []
    with counted_reads() as count:
        handle = model.register_forward_pre_hook(lambda *_: marks.append(count[0]))
        try:
            run()
        finally:
            handle.remove()
        marks.append(count[0])
    return [b - a for a, b in pairwise(marks)]


def prompts(batch: int) -> list[list[int]]:
    return [[5 + r % 7, 9, 11 + r % 3, 4] for r in range(batch)]


ENGINES = {
    "refill": lambda model, ids, sampler, stop: decode_refilled(
        model, ids, sampler, max_new_tokens=12, stop_ids=stop, pad_id=0, slots=len(ids)
    ),
    "padded": lambda model, ids, sampler, stop: decode_padded(
        model, ids, sampler, max_new_tokens=12, stop_ids=stop, pad_id=0
    ),
    "static": lambda model, ids, sampler, stop: decode_padded(
        model, ids, sampler, max_new_tokens=12, stop_ids=stop, pad_id=0, static=True
    ),
}


@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize("stop", [set(), {3, 7}], ids=["no-stop", "stops"])
def test_host_reads_per_decode_step_do_not_grow_with_the_batch(tiny_model, engine, stop):
    model = tiny_model(vocab_size=40)
    seen = {}
    for batch in (2, 16):
        sampler = RowSampler(1.0, 1.0, range(batch))
        steps = reads_per_step(
            model, lambda b=batch, s=sampler: ENGINES[engine](model, prompts(b), s, stop)
        )
        assert len(steps) > 4  # the loop ran several decoding steps
        seen[batch] = max(steps)
    # A row reading its own token would make 16 rows read 8x what 2 do.
    assert seen[16] == seen[2] <= 6, seen


def test_think_decoding_reads_per_step_do_not_grow_with_the_batch(tiny_model):
    from traac.compression.formats import ChatFormat
    from traac.evaluation.inference.think_decode import TorchThinkEngine

    class Tokens:  # what the engine reads of a tokenizer: the think tags' ids and pad/eos
        pad_token_id, eos_token_id = 0, 1

        def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
            return [2] if text == "<think>" else [3]

        def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
            return " ".join(map(str, ids))

    model = tiny_model(vocab_size=40, eos_token_id=1)
    engine = TorchThinkEngine(model, Tokens(), ChatFormat(), aux_prompt="")
    seen = {}
    for batch in (2, 16):
        session = engine.session(1.0, 1.0, list(range(batch)))
        rows = prompts(batch)
        steps = reads_per_step(
            model.base_model, lambda s=session, r=rows: s.decode(r, [12] * len(r), None, think=True)
        )
        assert len(steps) > 4
        seen[batch] = max(steps)
    assert seen[16] == seen[2] <= 6, seen


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_the_static_cache_samples_the_dynamic_caches_tokens(tiny_model, temperature):
    """The GPU's path (static cache; compiled there, eager here) against the CPU's: refilled
    rows, one padded batch, and padded static batches of 3 rows all give the same tokens."""
    model = tiny_model(vocab_size=40)
    ids = [[5, 9, 11, 4], [6, 4], [8, 8, 8, 8, 8, 2], [7], [5, 5, 9]]

    def run(**options: Any) -> list[tuple[list[int], bool]]:
        sampler = RowSampler(temperature, 0.9, [11, 12, 13, 14, 15])
        ended: dict[int, tuple[list[int], bool]] = {}

        def on_done(request: int, tokens: list[int], stopped: bool) -> None:
            assert request not in ended  # each response reported once, as it ends
            ended[request] = (list(tokens), stopped)

        out = decode_rows(model, ids, sampler, max_new_tokens=20, stop_ids={3}, pad_id=0,
                          slots=3, on_done=on_done, **options)  # fmt: skip
        assert [ended[i] for i in range(len(ids))] == out
        return out

    refilled = run(static=False)
    assert any(stopped for _, stopped in refilled)  # some rows end early, some run to the limit
    assert any(not stopped for _, stopped in refilled)
    assert run(static=True) == refilled
    sampler = RowSampler(temperature, 0.9, [11, 12, 13, 14, 15])
    padded = decode_padded(model, ids, sampler, max_new_tokens=20, stop_ids={3}, pad_id=0)
    assert padded == refilled


def test_a_gpu_decodes_on_the_static_cache_and_a_cpu_refills(tiny_model, monkeypatch):
    model = tiny_model(vocab_size=40)
    assert not fast_decoding(model)
    chosen: list[str] = []
    monkeypatch.setattr(decoding, "decode_refilled", lambda *a, **k: chosen.append("refill"))
    monkeypatch.setattr(
        decoding, "decode_padded", lambda *a, **k: chosen.append(f"static={k['static']}") or []
    )
    options = {"max_new_tokens": 4, "stop_ids": {3}, "pad_id": 0, "slots": 2}
    decode_rows(model, prompts(3), RowSampler(1.0, 1.0, range(3)), **options)
    monkeypatch.setattr(decoding, "input_device", lambda m: torch.device("cuda", 0))
    assert fast_decoding(model)
    decode_rows(model, prompts(3), RowSampler(1.0, 1.0, range(3)), **options)
    assert chosen == ["refill", "static=True", "static=True"]  # 3 rows in batches of 2
