"""One evaluation sample from generation to its line in samples.jsonl: lengths, scoring, and
the append-only, fsynced, self-repairing record file."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from traac.common.items import Item
from traac.compression.formats import ChatFormat, think_tokens_from_ids
from traac.errors import TraacError
from traac.evaluation.harness.results import SampleRecord
from traac.evaluation.inference.responses import Generation
from traac.verification import extract_answer, verify_many

# --------------------------------------------------------------------------------------------
# Lengths


class LengthCounter:
    """Response and think lengths, in the tokenizer's tokens or, without one, in words."""

    def __init__(
        self, tokenizer: Any | None, chat_format: ChatFormat, name: str | None = None
    ) -> None:
        self.tokenizer = tokenizer
        self.chat_format = chat_format
        self.tokenizer_id: str | None = None  # the vocabulary's hash: same tokens, same id
        if tokenizer is None:
            self.unit = "whitespace-separated words (no tokenizer given)"
            self.closer_ids: list[int] = []
        else:
            self.unit = f"tokens of the {name or getattr(tokenizer, 'name_or_path', '')} tokenizer"
            self.closer_ids = tokenizer.encode(chat_format.think_close, add_special_tokens=False)
            vocab = json.dumps(sorted(tokenizer.get_vocab().items()), ensure_ascii=False)
            self.tokenizer_id = hashlib.sha256(vocab.encode()).hexdigest()[:16]

    def count(self, text: str) -> int:
        if self.tokenizer is None:
            return len(text.split())
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """`count` of each text, the tokenizer called once for the batch."""
        if self.tokenizer is None or not texts:
            return [len(t.split()) for t in texts]
        ids = self.tokenizer(list(texts), add_special_tokens=False)["input_ids"]
        return [len(x) for x in ids]

    def lengths(self, text: str, token_ids: Sequence[int] | None = None) -> tuple[int, int]:
        """(response length, think length): think = what precedes the first closer; a response
        that never closes it is all thinking (the OAA metrics then count it as never done)."""
        total = len(token_ids) if token_ids is not None else self.count(text)
        cut = text.find(self.chat_format.think_close)
        if cut < 0:
            return total, total
        if token_ids is not None and self.closer_ids:
            think = think_tokens_from_ids(token_ids, self.closer_ids)
            if think is not None:
                return total, think
        return total, self.count(text[:cut])


# --------------------------------------------------------------------------------------------
# samples.jsonl: append-only, fsynced, self-repairing.


class SamplesFile:
    """The per-sample record file of a run directory."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> dict[tuple[str, int], SampleRecord]:
        """Finished records by (id, sample). A torn last line (no newline, or not JSON) is cut
        off the file so that sample is done again; a bad line elsewhere is an error."""
        if not self.path.exists():
            return {}
        data = self.path.read_bytes()
        keep = len(data)
        lines = data.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        elif lines:  # the last line has no newline: written halfway
            keep -= len(lines.pop())
        records: dict[tuple[str, int], SampleRecord] = {}
        for n, raw in enumerate(lines, start=1):
            record = _parse_record(raw)
            if record is None:
                if n == len(lines):
                    keep -= len(raw) + 1
                    break
                raise TraacError(
                    f"{self.path}: line {n} is not a sample record; fix or delete that line "
                    "(or evaluate into a fresh --output)"
                )
            records.setdefault(record.key, record)
        if keep < len(data):
            with open(self.path, "r+b") as f:
                f.truncate(keep)
                os.fsync(f.fileno())
        return records

    def read(self) -> dict[tuple[str, int], SampleRecord]:
        """The whole records, without repairing anything (for reports): torn or foreign lines
        are skipped."""
        if not self.path.exists():
            return {}
        records: dict[tuple[str, int], SampleRecord] = {}
        for raw in self.path.read_bytes().split(b"\n"):
            record = _parse_record(raw) if raw.strip() else None
            if record is not None:
                records.setdefault(record.key, record)
        return records

    def append(self, records: Iterable[SampleRecord]) -> None:
        """Write whole lines, then flush and fsync: a crash or a full disk leaves at most one
        torn line, which the next `load` cuts off; the lines before it are kept."""
        payload = "".join(json.dumps(r.to_json(), ensure_ascii=False) + "\n" for r in records)
        if not payload:
            return
        try:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(payload)
                f.flush()
                os.fsync(f.fileno())
        except OSError as err:
            raise TraacError(
                f"{self.path}: cannot write ({err.strerror}); the samples written before are "
                "kept: free some space and rerun the same command to resume"
            ) from None


def _parse_record(raw: bytes) -> SampleRecord | None:
    try:
        return SampleRecord.from_json(json.loads(raw))
    except (json.JSONDecodeError, UnicodeDecodeError, TypeError, AttributeError):
        return None


# --------------------------------------------------------------------------------------------
# Scoring


def score_records(
    pairs: Sequence[tuple[Item, int]],
    responses: Sequence[str],
    counter: LengthCounter,
    *,
    prompts: Sequence[str | None] | None = None,
    generations: Sequence[Generation] | None = None,
) -> list[SampleRecord]:
    """One record per (item, sample): lengths, closure, extracted answer, correctness."""
    close = counter.chat_format.think_close
    correct = verify_many([item for item, _ in pairs], list(responses), think_close=close)
    records = []
    for k, ((item, sample), response) in enumerate(zip(pairs, responses, strict=True)):
        gen = generations[k] if generations is not None else None
        n_tokens, n_think = counter.lengths(response, gen.token_ids if gen else None)
        records.append(
            SampleRecord(
                id=item.id,
                sample=sample,
                response=response,
                correct=bool(correct[k]),
                response_tokens=n_tokens,
                think_tokens=n_think,
                closed=counter.chat_format.parse(response).closed,
                data_source=item.data_source,
                tier=item.tier,
                prompt=prompts[k] if prompts is not None else None,
                extracted=extract_answer(response, close),
                task=item.entry["metadata"]["source_dataset"]
                if item.verifier == "task" and item.entry
                else None,
                finish_reason=gen.finish_reason if gen is not None else None,
                interrupted=gen.interrupted if gen is not None else None,
                budget_think_tokens=gen.budget_think_tokens if gen is not None else None,
                extra=dict(gen.extra) if gen is not None else {},
            )
        )
    return records
