"""The engine-independent part of test-time decoding: what every `DecodeSession.decode` does
before its engine runs, and how an engine opens sessions."""

from __future__ import annotations

import pytest

from traac.compression.formats import ChatFormat
from traac.evaluation.inference.think_decode import Decoded, DecodeSession, Draw, Phase, ThinkEngine
from traac.evaluation.inference.vllm_thinking import VLLMThinkEngine


class _Tokenizer:
    """One id per character: enough for the think tags' ids."""

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return [ord(c) for c in text]


class _Echo(DecodeSession):
    """Decodes each live row as its first `budget` prompt ids, recording the phases."""

    def __init__(self, engine: ThinkEngine, draw: Draw) -> None:
        super().__init__(engine, draw)
        self.phases: list[Phase] = []

    def _decode(self, phase: Phase) -> list[Decoded]:
        self.phases.append(phase)
        return [Decoded(phase.rows[i][: phase.budgets[i]], "eos") for i in phase.live]


class _Engine(ThinkEngine):
    session_type = _Echo


def _engine() -> _Engine:
    return _Engine(_Tokenizer(), ChatFormat(), {0}, max_positions=64)


def test_decode_runs_only_rows_with_budget_and_keeps_their_order_and_requests():
    session = _engine().session(0.7, 0.9, [11, 12, 13])
    out = session.decode([[1, 2, 3], [4], [5, 6]], [2, 0, 1], None, think=True, requests=[2, 0, 1])
    assert out == [Decoded([1, 2], "eos"), Decoded([], "length"), Decoded([5], "eos")]
    (phase,) = session.phases
    assert (phase.live, list(phase.requests), phase.think, phase.interrupt) == (
        [0, 2],
        [2, 0, 1],
        True,
        False,
    )


def test_decode_without_budget_calls_no_engine_and_requests_default_to_rows():
    session = _engine().session(1.0, 1.0, [7, 8])
    assert session.decode([[1], [2]], [0, 0], None) == [Decoded([], "length")] * 2
    assert session.phases == []
    session.decode([[1], [2]], [1, 1], None)
    assert list(session.phases[0].requests) == [0, 1]


def test_an_engine_opens_its_session_type_with_the_draw_and_knows_its_tags():
    engine = _engine()
    script = object()
    session = engine.session(0.5, 0.8, [3, 4], script)  # type: ignore[arg-type]
    assert isinstance(session, _Echo) and session.engine is engine
    assert session.draw == Draw(0.5, 0.8, [3, 4], script)  # type: ignore[arg-type]
    assert engine.close_ids == [ord(c) for c in ChatFormat().think_close]
    assert engine.open_ids == [ord(c) for c in ChatFormat().think_open]


def test_the_vllm_engine_refuses_a_logits_processor():
    engine = VLLMThinkEngine(object(), _Tokenizer(), ChatFormat(), {0})
    with pytest.raises(ValueError, match="takes no logits processor"):
        engine.session(1.0, 1.0, [0], lambda ids, logits: logits)
