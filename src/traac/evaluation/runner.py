"""The evaluation loop: items x samples -> samples.jsonl -> summary.json / summary.md.

Every (item, sample) pair is one line of `samples.jsonl`, appended, flushed and fsynced batch
by batch, so an interrupted run loses at most the batch in flight; a rerun into the same
directory skips the pairs it finds and redoes a half-written last line. `run.json` pins the
settings that decide what a sample is (model, dataset, prompt, decoding): a rerun that changes
them into the same directory is refused rather than mixing two experiments in one file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from traac.errors import TraacError
from traac.evaluation.generation import Backend, Generation, Sampling
from traac.evaluation.prompts import PROMPT_STYLES, build_prompt
from traac.formats import ChatFormat
from traac.items import Item

SAMPLES_FILE = "samples.jsonl"
RUN_FILE = "run.json"
SUMMARY_JSON = "summary.json"
SUMMARY_MD = "summary.md"
TIER_ORDER = ("easy", "medium", "hard")
RECORD_KEYS = ("id", "sample", "response", "correct")


@dataclass(frozen=True)
class EvalSettings:
    """What a sample depends on. Stored in run.json; a rerun must match it exactly.

    Not here, so they may change between reruns: how many samples and items (a rerun can add
    samples), batch size, backend and device.
    """

    dataset: str
    model: str | None = None
    responses: str | None = None  # path of a responses file (scoring mode)
    responses_sha256: str | None = None
    tokenizer: str | None = None
    prompt_style: str = "base"
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 10000
    seed: int = 0
    chat_format: str = "auto"
    test_time_compression: float | None = None  # tau of test-time compression, if on

    def __post_init__(self) -> None:
        if (self.model is None) == (self.responses is None):
            raise TraacError("evaluate either a --model or a --responses file (exactly one)")
        tau = self.test_time_compression
        if tau is not None and not 0.0 <= tau <= 1.0:
            raise TraacError(f"--test-time-compression {tau} must lie in [0, 1]")
        if tau is not None and self.model is None:
            raise TraacError("--test-time-compression needs --model (it changes generation)")
        if self.prompt_style not in PROMPT_STYLES:
            raise TraacError(
                f"prompt style {self.prompt_style!r}: use one of {', '.join(PROMPT_STYLES)}"
            )


# --------------------------------------------------------------------------------------------
# Lengths


class LengthCounter:
    """Response and think lengths, in the tokenizer's tokens or, without one, in words."""

    def __init__(
        self, tokenizer: Any | None, chat_format: ChatFormat, name: str | None = None
    ) -> None:
        self.tokenizer = tokenizer
        self.chat_format = chat_format
        if tokenizer is None:
            self.unit = "whitespace-separated words (no tokenizer given)"
            self.closer_ids: list[int] = []
        else:
            self.unit = f"tokens of the {name or getattr(tokenizer, 'name_or_path', '')} tokenizer"
            self.closer_ids = tokenizer.encode(chat_format.think_close, add_special_tokens=False)

    def count(self, text: str) -> int:
        if self.tokenizer is None:
            return len(text.split())
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def lengths(self, text: str, token_ids: Sequence[int] | None = None) -> tuple[int, int]:
        """(response length, think length): think = what precedes the first closer; a response
        that never closes it is all thinking (the OAA metrics then count it as never done)."""
        from traac import metrics

        total = len(token_ids) if token_ids is not None else self.count(text)
        cut = text.find(self.chat_format.think_close)
        if cut < 0:
            return total, total
        if token_ids is not None and self.closer_ids:
            think = metrics.think_tokens_from_ids(token_ids, self.closer_ids)
            if think is not None:
                return total, think
        return total, self.count(text[:cut])


# --------------------------------------------------------------------------------------------
# samples.jsonl: append-only, fsynced, self-repairing.


class SamplesFile:
    """The per-sample record file of a run directory."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> dict[tuple[str, int], dict[str, Any]]:
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
        records: dict[tuple[str, int], dict[str, Any]] = {}
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
            records.setdefault((record["id"], record["sample"]), record)
        if keep < len(data):
            with open(self.path, "r+b") as f:
                f.truncate(keep)
                os.fsync(f.fileno())
        return records

    def append(self, records: Iterable[dict[str, Any]]) -> None:
        """Write whole lines, then flush and fsync: a crash leaves at most one torn line."""
        payload = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
        if not payload:
            return
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())


def _parse_record(raw: bytes) -> dict[str, Any] | None:
    try:
        record = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    if not isinstance(record, dict) or any(k not in record for k in RECORD_KEYS):
        return None
    return record


# --------------------------------------------------------------------------------------------
# Run directory: run.json and an exclusive lock.


def check_run_file(output: Path, settings: EvalSettings) -> None:
    """Refuse a directory that holds a run with other settings (or samples of unknown origin)."""
    path = output / RUN_FILE
    identity = asdict(settings)
    if not path.exists() and (output / SAMPLES_FILE).exists():
        raise TraacError(f"{output} has a {SAMPLES_FILE} but no {RUN_FILE}; use another --output")
    if path.exists():
        try:
            previous = json.loads(path.read_text())["settings"]
        except (json.JSONDecodeError, KeyError, TypeError):
            raise TraacError(f"{path} is not a traac run file; use another --output") from None
        changed = [k for k in identity if previous.get(k) != identity[k]]
        if changed:
            diffs = ", ".join(f"{k}: {previous.get(k)!r} -> {identity[k]!r}" for k in changed)
            raise TraacError(
                f"{output} holds an evaluation with other settings ({diffs}); "
                "use another --output, or the same settings to resume"
            )


def write_run_file(output: Path, settings: EvalSettings, args: dict[str, Any]) -> None:
    """run.json: the settings a rerun must match, and this run's exact arguments."""
    record = {
        "settings": asdict(settings),
        "args": args,
        "updated": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    (output / RUN_FILE).write_text(json.dumps(record, indent=2) + "\n")


@contextlib.contextmanager
def run_lock(output: Path) -> Iterator[None]:
    """One writer per directory: two runs appending to one file would duplicate samples."""
    import fcntl

    with open(output / ".lock", "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise TraacError(
                f"another traac eval is writing {output}; wait for it or use another --output"
            ) from None
        yield


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


# --------------------------------------------------------------------------------------------
# Scoring


def score_records(
    pairs: Sequence[tuple[Item, int]],
    responses: Sequence[str],
    counter: LengthCounter,
    *,
    prompts: Sequence[str | None] | None = None,
    generations: Sequence[Generation] | None = None,
) -> list[dict[str, Any]]:
    """One record per (item, sample): lengths, closure, extracted answer, correctness."""
    from traac.verify import extract_answer, verify_many

    close = counter.chat_format.think_close
    correct = verify_many([item for item, _ in pairs], list(responses), think_close=close)
    records = []
    for k, ((item, sample), response) in enumerate(zip(pairs, responses, strict=True)):
        gen = generations[k] if generations is not None else None
        n_tokens, n_think = counter.lengths(response, gen.token_ids if gen else None)
        record: dict[str, Any] = {
            "id": item.id,
            "sample": sample,
            "data_source": item.data_source,
            "difficulty": item.difficulty,
            "prompt": prompts[k] if prompts is not None else None,
            "response": response,
            "response_tokens": n_tokens,
            "think_tokens": n_think,
            "closed": counter.chat_format.parse(response).closed,
            "extracted": extract_answer(response, close),
            "correct": bool(correct[k]),
        }
        if item.verifier == "task" and item.entry:
            record["task"] = item.entry["metadata"]["source_dataset"]
        if gen is not None:
            record["finish_reason"] = gen.finish_reason
            record.update(gen.extra)
        records.append(record)
    return records


# --------------------------------------------------------------------------------------------
# The two modes.


@dataclass
class RunResult:
    summary: dict[str, Any]
    records: list[dict[str, Any]]
    done_before: int  # samples found finished in the directory
    new: int  # samples made by this run
    notes: list[str] = field(default_factory=list)


def generate_samples(
    items: Sequence[Item],
    num_samples: int,
    backend: Backend,
    settings: EvalSettings,
    counter: LengthCounter,
    store: SamplesFile,
    done: dict[tuple[str, int], dict[str, Any]],
    *,
    batch_size: int = 8,
    progress: Any = None,
) -> tuple[int, list[str]]:
    """Generate and score the missing samples, batch by batch; returns (new samples, notes)."""
    pending = [(it, s) for it in items for s in range(num_samples) if (it.id, s) not in done]
    if not pending:
        return 0, []
    sampling = Sampling(
        settings.temperature, settings.top_p, settings.max_new_tokens, settings.seed
    )
    prompts = {
        it.id: build_prompt(it, backend.tokenizer, settings.prompt_style) for it, _ in pending
    }
    caps: list[int] = []  # new-token budgets the model's context forced below max_new_tokens
    task = progress.add_task("generating", total=len(pending), info="") if progress else None
    start, produced = time.monotonic(), 0

    def on_tokens(n: int) -> None:
        nonlocal produced
        produced += n
        if progress is not None:
            rate = produced / max(time.monotonic() - start, 1e-6)
            progress.update(task, info=f"{rate:,.0f} tok/s")

    for lo in range(0, len(pending), batch_size):
        batch = pending[lo : lo + batch_size]
        texts = [prompts[it.id] for it, _ in batch]
        batch_sampling = _fit_context(sampling, texts, backend)
        if batch_sampling.max_new_tokens < sampling.max_new_tokens:
            caps.append(batch_sampling.max_new_tokens)
        keys = [f"{it.id}#{s}" for it, s in batch]
        generations = backend.generate(texts, batch_sampling, keys, on_tokens=on_tokens)
        records = score_records(
            batch, [g.text for g in generations], counter, prompts=texts, generations=generations
        )
        store.append(records)
        for r in records:
            done[(r["id"], r["sample"])] = r
        if progress is not None:
            progress.advance(task, len(batch))
    notes = []
    if caps:
        notes.append(
            f"max_new_tokens {sampling.max_new_tokens} does not fit the model's context of "
            f"{backend.max_context} tokens after the prompt; {len(caps)} of "
            f"{-(-len(pending) // batch_size)} batches were capped at {min(caps)}-{max(caps)} "
            "new tokens"
        )
    return len(pending), notes


def _fit_context(sampling: Sampling, prompts: Sequence[str], backend: Backend) -> Sampling:
    """Shrink max_new_tokens where prompt + response would overflow the model's context."""
    if not backend.max_context:
        return sampling
    longest = max(len(backend.tokenizer.encode(p, add_special_tokens=False)) for p in prompts)
    room = backend.max_context - longest
    if room < 1:
        raise TraacError(
            f"a prompt of {longest} tokens leaves no room in the context of {backend.max_context}"
        )
    if room >= sampling.max_new_tokens:
        return sampling
    return Sampling(sampling.temperature, sampling.top_p, room, sampling.seed)


def read_responses(path: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """A responses file: JSONL lines {id, response[, sample][, prompt]}. Without `sample`,
    the responses of an id are numbered in file order."""
    if not path.is_file():
        raise TraacError(f"responses file {str(path)!r}: no such file")
    out: dict[tuple[str, int], dict[str, Any]] = {}
    counts: dict[str, int] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise TraacError(
                f"responses file {str(path)!r}: line {n} is not JSON ({err.msg})"
            ) from None
        if not isinstance(row, dict) or "id" not in row or not isinstance(row.get("response"), str):
            raise TraacError(
                f"responses file {str(path)!r}: line {n} needs an 'id' and a 'response' text field"
            )
        item_id = str(row["id"])
        sample = row.get("sample", counts.get(item_id, 0))
        if not isinstance(sample, int) or sample < 0:
            raise TraacError(
                f"responses file {str(path)!r}: line {n}: 'sample' must be an integer >= 0"
            )
        if (item_id, sample) in out:
            raise TraacError(
                f"responses file {str(path)!r}: line {n} repeats id {item_id!r} sample {sample}"
            )
        counts[item_id] = max(counts.get(item_id, 0), sample + 1)
        out[(item_id, sample)] = row
    if not out:
        raise TraacError(f"responses file {str(path)!r}: no responses")
    return out


def score_responses(
    items: Sequence[Item],
    responses: dict[tuple[str, int], dict[str, Any]],
    counter: LengthCounter,
    store: SamplesFile,
    done: dict[tuple[str, int], dict[str, Any]],
    *,
    num_samples: int | None = None,
    known_ids: set[str] | None = None,
    chunk: int = 256,
    progress: Any = None,
) -> tuple[list[tuple[Item, int]], int]:
    """Score a responses file against the items; returns (the selected pairs, newly scored).

    `known_ids`: every id of the dataset when `items` is a prefix of it (--limit); responses
    to the rest are left out, responses to ids the dataset lacks are an error.
    """
    by_id = {it.id: it for it in items}
    known = known_ids if known_ids is not None else set(by_id)
    unknown = sorted({i for i, _ in responses if i not in known})
    if unknown:
        raise TraacError(
            f"responses file: {len(unknown)} id(s) are not in the dataset (first: {unknown[0]!r}); "
            "is it the dataset the responses were made for?"
        )
    order = {it.id: k for k, it in enumerate(items)}
    selected = sorted(
        (
            (by_id[i], s)
            for i, s in responses
            if i in by_id and (num_samples is None or s < num_samples)
        ),
        key=lambda pair: (order[pair[0].id], pair[1]),
    )
    answered = {it.id for it, _ in selected}
    missing = [it.id for it in items if it.id not in answered]
    if missing:
        raise TraacError(
            f"responses file: no response for {len(missing)} of {len(items)} items "
            f"(first: {missing[0]!r}); pass --limit to score a prefix of the dataset"
        )
    pending = [p for p in selected if (p[0].id, p[1]) not in done]
    task = progress.add_task("scoring", total=len(pending), info="") if progress else None
    for lo in range(0, len(pending), chunk):
        batch = pending[lo : lo + chunk]
        rows = [responses[(it.id, s)] for it, s in batch]
        records = score_records(
            batch, [r["response"] for r in rows], counter, prompts=[r.get("prompt") for r in rows]
        )
        store.append(records)
        for r in records:
            done[(r["id"], r["sample"])] = r
        if progress is not None:
            progress.advance(task, len(batch))
    return selected, len(pending)


# --------------------------------------------------------------------------------------------
# Summary


def _stats(records: Sequence[dict[str, Any]], t_max: int) -> dict[str, Any]:
    from traac import metrics

    correct = [bool(r["correct"]) for r in records]
    think = [int(r["think_tokens"]) for r in records]
    closed = [bool(r["closed"]) for r in records]
    return {
        "n_items": len({r["id"] for r in records}),
        "n_samples": len(records),
        "accuracy": 100.0 * metrics.accuracy(correct),
        "mean_response_tokens": _mean([r["response_tokens"] for r in records]),
        "mean_think_tokens": _mean(think),
        "closed_rate": 100.0 * _mean(closed),
        "auc_oaa": 100.0 * metrics.auc_oaa(correct, think_or_none(records), t_max),
    }


def think_or_none(records: Sequence[dict[str, Any]]) -> list[int | None]:
    """Think lengths as the OAA metrics read them: None where the block never closed."""
    return [int(r["think_tokens"]) if r["closed"] else None for r in records]


def _mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values)) if values else 0.0


def summarize(
    records: Sequence[dict[str, Any]], *, t_max: int, length_unit: str, notes: Sequence[str] = ()
) -> dict[str, Any]:
    """Accuracy (%), mean lengths, AUC_OAA (%); per tier, source and task where they vary; the
    OptimalThinkingBench F1 when both of its halves are present."""
    from traac import metrics
    from traac.evaluation.datasets import OTB_OVERTHINK, OTB_UNDERTHINK

    if not records:
        raise TraacError("nothing to summarise: no samples")
    summary: dict[str, Any] = {**_stats(records, t_max), "t_max": t_max, "length_unit": length_unit}
    by_sample: dict[int, list[bool]] = {}
    for r in records:
        by_sample.setdefault(int(r["sample"]), []).append(bool(r["correct"]))
    per_run = [100.0 * _mean(v) for _, v in sorted(by_sample.items())]
    summary["accuracy_by_sample"] = per_run
    summary["accuracy_std_over_samples"] = _std(per_run)
    truncated = [r for r in records if r.get("finish_reason") == "length"]
    if any("finish_reason" in r for r in records):
        summary["truncated_rate"] = 100.0 * len(truncated) / len(records)
    for key, name in (
        ("difficulty", "by_difficulty"),
        ("data_source", "by_source"),
        ("task", "by_task"),
    ):
        groups: dict[str, list[dict[str, Any]]] = {}
        for r in records:
            if r.get(key) is not None:
                groups.setdefault(str(r[key]), []).append(r)
        if (key == "difficulty" and groups) or len(groups) > 1:
            order = sorted(groups, key=lambda g: (TIER_ORDER.index(g) if g in TIER_ORDER else 9, g))
            summary[name] = {g: _stats(groups[g], t_max) for g in order}
    sources = summary.get("by_source", {})
    if OTB_OVERTHINK in sources and OTB_UNDERTHINK in sources:
        auc, acc_ut = sources[OTB_OVERTHINK]["auc_oaa"], sources[OTB_UNDERTHINK]["accuracy"]
        summary["otb"] = {
            "auc_oaa": auc,
            "underthink_accuracy": acc_ut,
            "f1": metrics.otb_f1(auc, acc_ut),
        }
    if notes:
        summary["notes"] = list(notes)
    return summary


def _std(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    mean = _mean(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def summary_markdown(summary: dict[str, Any], title: str) -> str:
    """summary.md: the headline numbers, then one table per breakdown."""
    unit = "tokens" if summary["length_unit"].startswith("tokens") else "words"
    lines = [
        f"# {title}",
        "",
        f"{summary['n_items']} items, {summary['n_samples']} samples; lengths in "
        f"{summary['length_unit']}; AUC_OAA with t_max = {summary['t_max']}.",
        "",
    ]
    header = (
        f"| group | items | samples | Acc (%) | Len ({unit}) | Think ({unit}) | closed (%) "
        "| AUC_OAA (%) |"
    )
    rule = "|---|---:|---:|---:|---:|---:|---:|---:|"

    def row(name: str, s: dict[str, Any]) -> str:
        return (
            f"| {name} | {s['n_items']} | {s['n_samples']} | {s['accuracy']:.2f} | "
            f"{s['mean_response_tokens']:.1f} | {s['mean_think_tokens']:.1f} | "
            f"{s['closed_rate']:.1f} | {s['auc_oaa']:.2f} |"
        )

    lines += [header, rule, row("all", summary)]
    for name in ("by_difficulty", "by_source", "by_task"):
        for group, s in summary.get(name, {}).items():
            lines.append(row(f"{name[3:]}: {group}", s))
    if "otb" in summary:
        o = summary["otb"]
        lines += [
            "",
            f"OptimalThinkingBench: AUC_OAA {o['auc_oaa']:.2f}, UnderthinkingBench accuracy "
            f"{o['underthink_accuracy']:.2f}, F1 {o['f1']:.2f}",
        ]
    if len(summary["accuracy_by_sample"]) > 1:
        runs = ", ".join(f"{a:.2f}" for a in summary["accuracy_by_sample"])
        lines += [
            "",
            f"Accuracy per sample index: {runs} (std {summary['accuracy_std_over_samples']:.2f})",
        ]
    if "truncated_rate" in summary:
        lines += ["", f"Responses cut at max_new_tokens: {summary['truncated_rate']:.1f}%"]
    for note in summary.get("notes", []):
        lines += ["", f"Note: {note}"]
    return "\n".join(lines) + "\n"


def write_summary(output: Path, summary: dict[str, Any], title: str) -> str:
    (output / SUMMARY_JSON).write_text(json.dumps(summary, indent=2) + "\n")
    text = summary_markdown(summary, title)
    (output / SUMMARY_MD).write_text(text)
    return text


# --------------------------------------------------------------------------------------------
# The whole run.


def run_eval(
    settings: EvalSettings,
    output: Path,
    *,
    num_samples: int | None = None,
    limit: int | None = None,
    batch_size: int = 8,
    args: dict[str, Any] | None = None,
    make_backend: Callable[[Any], Backend] | None = None,
    tokenizer: Any = None,
    console: Any = None,
) -> RunResult:
    """Evaluate (or score) into `output`, resuming what is there; writes the summary files.

    `make_backend(tokenizer)` builds the generation backend (generation mode only), so that
    argument checks, run.json and the dataset fail fast before a model is loaded.
    """
    from traac.evaluation.datasets import load_items
    from traac.formats import resolve_chat_format
    from traac.progress import make_progress

    if num_samples is not None and num_samples < 1:
        raise TraacError(f"--num-samples {num_samples} must be >= 1")
    if limit is not None and limit < 1:
        raise TraacError(f"--limit {limit} must be >= 1")
    if batch_size < 1:
        raise TraacError(f"--batch-size {batch_size} must be >= 1")
    output.mkdir(parents=True, exist_ok=True)
    with run_lock(output):
        check_run_file(output, settings)
        all_items = load_items(settings.dataset)
        items = all_items[:limit]
        if not items:
            raise TraacError(f"dataset {settings.dataset!r} has no items")
        responses = read_responses(Path(settings.responses)) if settings.responses else None
        try:
            chat_format = resolve_chat_format(settings.chat_format, tokenizer=tokenizer)
        except ValueError as err:
            raise TraacError(str(err)) from None
        write_run_file(output, settings, args or {})
        counter = LengthCounter(tokenizer, chat_format, settings.tokenizer or settings.model)
        store = SamplesFile(output / SAMPLES_FILE)
        done = store.load()
        notes: list[str] = []
        with make_progress(console) as progress:
            if responses is not None:
                pairs, new = score_responses(
                    items,
                    responses,
                    counter,
                    store,
                    done,
                    num_samples=num_samples,
                    known_ids={it.id for it in all_items},
                    progress=progress,
                )
            else:
                n = num_samples or 5
                pairs = [(it, s) for it in items for s in range(n)]
                if any(key not in done for key in ((it.id, s) for it, s in pairs)):
                    if make_backend is None:
                        raise TraacError("generation needs a backend")
                    backend = make_backend(tokenizer)
                    new, notes = generate_samples(
                        items,
                        n,
                        backend,
                        settings,
                        counter,
                        store,
                        done,
                        batch_size=batch_size,
                        progress=progress,
                    )
                else:
                    new = 0
        records = [done[(it.id, s)] for it, s in pairs]
        summary = summarize(
            records, t_max=settings.max_new_tokens, length_unit=counter.unit, notes=notes
        )
        summary["dataset"], summary["model"] = (
            settings.dataset,
            settings.model or settings.responses,
        )
        write_summary(output, summary, title=f"{summary['model']} on {settings.dataset}")
        return RunResult(summary, records, done_before=len(records) - new, new=new, notes=notes)
