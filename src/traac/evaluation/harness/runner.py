"""The evaluation loop: items x samples -> samples.jsonl -> summary.json / summary.md.

Every (item, sample) pair is one line of `samples.jsonl`, appended, flushed and fsynced batch
by batch, so an interrupted run loses at most the batch in flight; a rerun into the same
directory skips the pairs it finds and redoes a half-written last line. Each sample draws from
its own random stream, seeded by its item, its index and the run's seed, so what a resumed run
makes is what an uninterrupted one would have made, however its batches fall. `run.json` pins the
settings that decide what a sample is (model, dataset, prompt, decoding): a rerun that changes
them into the same directory is refused rather than mixing two experiments in one file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from traac.common.items import Item
from traac.common.outputs import output_dir, write_text
from traac.common.progress import NullProgress, Progress
from traac.compression.formats import resolve_chat_format
from traac.data.datasets import OTB_OVERTHINK, OTB_UNDERTHINK, load_items
from traac.data.files import json_value, read_text
from traac.errors import TraacError
from traac.evaluation.harness.otb_official import with_official_otb
from traac.evaluation.harness.overthinking import overthinking_by_tier
from traac.evaluation.harness.paper_metrics import OTB_SCORINGS, PAPER_T_MAX
from traac.evaluation.harness.prompts import PROMPT_STYLES, build_prompt
from traac.evaluation.harness.results import (
    EvalSummary,
    SampleRecord,
    summarize,
    summary_markdown,
)
from traac.evaluation.harness.samples import LengthCounter, SamplesFile, score_records
from traac.evaluation.harness.votes import answer_votes
from traac.evaluation.inference import engines
from traac.evaluation.inference.generation import Backend, Sampling, check_sampling
from traac.evaluation.inference.responses import Generation

SAMPLES_FILE = "samples.jsonl"
RUN_FILE = "run.json"
SUMMARY_JSON = "summary.json"
SUMMARY_MD = "summary.md"


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
    compress_tau: float | None = None  # tau of test-time compression, if on
    compression: dict[str, Any] | None = None  # its settings (CompressionSettings), if on
    scoring_model: str | None = None  # the model that scores its steps, if not `model`
    think_budget: int | None = None  # think tokens before the model is interrupted, if set

    def __post_init__(self) -> None:
        if (self.model is None) == (self.responses is None):
            raise TraacError("evaluate either a --model or a --responses file (exactly one)")
        if self.compress_tau is not None and self.model is None:
            raise TraacError("--compress-tau needs --model (it changes generation)")
        budget = self.think_budget
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int)):
            raise TraacError(f"--think-budget {budget!r}: must be a whole number of tokens")
        if budget is not None and budget < 1:
            raise TraacError(f"--think-budget {budget}: must be at least 1 token")
        if budget is not None and self.model is None:
            raise TraacError("--think-budget needs --model (it changes generation)")
        if self.prompt_style not in PROMPT_STYLES:
            raise TraacError(
                f"prompt style {self.prompt_style!r}: use one of {', '.join(PROMPT_STYLES)}"
            )
        check_sampling(self.temperature, self.top_p, self.max_new_tokens)


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
    write_text(output / RUN_FILE, json.dumps(record, indent=2) + "\n", "run file")


@contextlib.contextmanager
def run_lock(output: Path, wait: bool = False) -> Iterator[None]:
    """One writer per directory: two runs appending to one file would duplicate samples. A
    user's second `traac eval` is refused; a pipeline's (`wait`: experiments sharing a store,
    whose arms all evaluate the base model there) waits for the first and resumes what it left,
    usually nothing."""
    lock = FileLock(output / ".lock")
    try:
        lock.acquire(timeout=0)
    except Timeout:
        if not wait:
            raise TraacError(
                f"another traac eval is writing {output}; wait for it or use another --output"
            ) from None
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


# --------------------------------------------------------------------------------------------
# The two modes.


@dataclass
class RunResult:
    summary: EvalSummary
    records: list[SampleRecord]
    done_before: int  # samples found finished in the directory
    new: int  # samples made by this run
    notes: list[str] = field(default_factory=list)


CALL_REQUESTS = engines.CALL_REQUESTS  # requests per call to vLLM (`engines.CALL_REQUESTS`)


@dataclass
class _Saving:
    """One call's responses scored and saved as they end, `every` at a time and in request
    order (the file's order, which the paired bootstraps read), so a stopped run loses the rows
    in flight and those ended after the oldest of them, not the call."""

    pairs: Sequence[tuple[Item, int]]
    prompts: Sequence[str]
    counter: LengthCounter
    store: SamplesFile
    done: dict[tuple[str, int], SampleRecord]
    on_saved: Callable[[int], None]
    every: int
    ended: dict[int, Generation] = field(default_factory=dict)  # by request, not yet saved
    ready: int = 0  # requests before this one have all ended
    saved: int = 0  # requests before this one are saved

    def add(self, request: int, generation: Generation) -> None:
        self.ended[request] = generation
        while self.ready in self.ended:
            self.ready += 1
        if self.ready - self.saved >= self.every:
            self.save()

    def save(self) -> None:
        rows = range(self.saved, self.ready)
        if not rows:
            return
        generations = [self.ended.pop(i) for i in rows]
        records = score_records(
            [self.pairs[i] for i in rows],
            [g.text for g in generations],
            self.counter,
            prompts=[self.prompts[i] for i in rows],
            generations=generations,
        )
        self.store.append(records)
        self.done.update((r.key, r) for r in records)
        self.on_saved(len(rows))
        self.saved = self.ready


def generate_samples(
    items: Sequence[Item],
    num_samples: int,
    backend: Backend,
    settings: EvalSettings,
    counter: LengthCounter,
    store: SamplesFile,
    done: dict[tuple[str, int], SampleRecord],
    *,
    batch_size: int = 8,
    progress: Progress | None = None,
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
    start, produced = time.monotonic(), 0
    with (progress or NullProgress()).task("generating", len(pending)) as task:

        def on_tokens(n: int) -> None:
            nonlocal produced
            produced += n
            task.update(info=f"{produced / max(time.monotonic() - start, 1e-6):,.0f} tok/s")

        # An engine that schedules its own batch (vLLM) takes CALL_REQUESTS requests a call;
        # one that refills its batch, several batches' worth.
        step = batch_size * getattr(backend, "batches_per_call", 1)
        if getattr(backend, "batch_all", False):
            step = CALL_REQUESTS
        for lo in range(0, len(pending), step):
            batch = pending[lo : lo + step]
            texts = [prompts[it.id] for it, _ in batch]
            batch_sampling = _fit_context(sampling, texts, backend)
            if batch_sampling.max_new_tokens < sampling.max_new_tokens:
                caps.append(batch_sampling.max_new_tokens)
            keys = [f"{it.id}#{s}" for it, s in batch]
            saving = _Saving(batch, texts, counter, store, done, task.advance, every=batch_size)
            streams = getattr(backend, "streams", False)  # hands each response on as it ends
            options = {"on_generation": saving.add} if streams else {}
            generations = backend.generate(
                texts, batch_sampling, keys, on_tokens=on_tokens, **options
            )
            if not streams:
                for request, generation in enumerate(generations):
                    saving.add(request, generation)
            saving.save()
    notes = []
    if caps:
        notes.append(
            f"max_new_tokens {sampling.max_new_tokens} does not fit the model's context of "
            f"{backend.max_context} tokens after the prompt; {len(caps)} of "
            f"{-(-len(pending) // step)} batches were capped at {min(caps)}-{max(caps)} "
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
    where = f"responses file {str(path)!r}"
    for n, line in enumerate(read_text(path, where).split("\n"), start=1):
        if not line.strip():
            continue
        row = json_value(line, f"{where}: line {n}")
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


def select_responses(
    items: Sequence[Item],
    responses: dict[tuple[str, int], dict[str, Any]],
    *,
    num_samples: int | None = None,
    known_ids: set[str] | None = None,
) -> list[tuple[Item, int]]:
    """The (item, sample) pairs a responses file answers, in dataset order; checked before
    anything is written, so a wrong file leaves the run directory free for the right one.

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
    return selected


def score_responses(
    selected: Sequence[tuple[Item, int]],
    responses: dict[tuple[str, int], dict[str, Any]],
    counter: LengthCounter,
    store: SamplesFile,
    done: dict[tuple[str, int], SampleRecord],
    *,
    chunk: int = 256,
    progress: Progress | None = None,
) -> int:
    """Score the selected responses not scored yet; returns how many were."""
    pending = [p for p in selected if (p[0].id, p[1]) not in done]
    with (progress or NullProgress()).task("scoring", len(pending)) as task:
        for lo in range(0, len(pending), chunk):
            batch = pending[lo : lo + chunk]
            rows = [responses[(it.id, s)] for it, s in batch]
            records = score_records(
                batch,
                [r["response"] for r in rows],
                counter,
                prompts=[r.get("prompt") for r in rows],
            )
            store.append(records)
            done.update((r.key, r) for r in records)
            task.advance(len(batch))
    return len(pending)


# --------------------------------------------------------------------------------------------
# Summary


def write_summary(output: Path, summary: EvalSummary, title: str) -> str:
    write_text(output / SUMMARY_JSON, json.dumps(summary.to_json(), indent=2) + "\n", "summary")
    text = summary_markdown(summary, title)
    write_text(output / SUMMARY_MD, text, "summary")
    return text


def read_summary(output: Path) -> EvalSummary:
    """The summary of a run directory."""
    path = output / SUMMARY_JSON
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise TraacError(f"{path}: cannot read it ({err})") from None
    return EvalSummary.from_json(data, str(path))


def with_overthinking(
    summary: EvalSummary,
    records: Sequence[SampleRecord],
    items: Sequence[Item],
    counter: LengthCounter,
) -> EvalSummary:
    """The summary with overthinking added: each right response checked step by step by its
    item's verifier (time-bounded in the verification pool)."""
    fmt = counter.chat_format
    overall, tiers = overthinking_by_tier(
        records,
        {it.id: it for it in items},
        counter.count_many,
        think_open=fmt.think_open,
        think_close=fmt.think_close,
    )
    return replace(summary, overthinking=overall, overthinking_by_tier=tiers)


# --------------------------------------------------------------------------------------------
# The whole run.


def check_otb_halves(items: Sequence[Item], dataset: str, scoring: str) -> None:
    """`--otb-scoring` scores OptimalThinkingBench, whose F1 needs both of its halves: on items
    without them it would change nothing. The official scoring counts a half's math rows in it
    (`otb-overthink-math`: `otb_official`), the paper's its general rows alone."""
    sources = {item.data_source for item in items}

    def holds(half: str) -> bool:
        return any(s == half or (scoring == "official" and s.startswith(half)) for s in sources)

    missing = [half for half in (OTB_OVERTHINK, OTB_UNDERTHINK) if not holds(half)]
    if missing:
        raise TraacError(
            f"--otb-scoring {scoring}: no effect on {dataset!r}, whose items hold no "
            f"{' nor '.join(missing)} (the OTB score needs both halves: --dataset otb); drop it"
        )


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
    progress: Progress | None = None,
    t_max: int = PAPER_T_MAX,
    otb_scoring: str | None = None,
    wait: bool = False,
) -> RunResult:
    """Evaluate (or score) into `output`, resuming what is there; writes the summary files.
    Another writer of `output` is refused, or waited for with `wait` (`run_lock`).

    `t_max` (AUC_OAA's, in the run's length unit) and `otb_scoring` (`OTB_SCORINGS`; None:
    `paper`, not asked for) shape only the summary, not the samples: a rerun may change them and
    rewrites the summary. A scoring asked for on items without both halves of
    OptimalThinkingBench, which it could not change, is refused before any model loads.

    `make_backend(tokenizer)` builds the generation backend (generation mode only), so that
    argument checks and the dataset fail fast before a model is loaded. run.json is written
    only once everything, the model included, has passed: a failed run leaves the directory
    free for the corrected one.
    """
    if num_samples is not None and num_samples < 1:
        raise TraacError(f"--num-samples {num_samples} must be >= 1")
    if limit is not None and limit < 1:
        raise TraacError(f"--limit {limit} must be >= 1")
    if batch_size < 1:
        raise TraacError(f"--batch-size {batch_size} must be >= 1")
    if isinstance(t_max, bool) or not isinstance(t_max, int) or t_max < 1:
        raise TraacError(f"--t-max {t_max!r}: must be a whole number of tokens, at least 1")
    if otb_scoring is not None and otb_scoring not in OTB_SCORINGS:
        raise TraacError(f"--otb-scoring {otb_scoring!r}: use one of {', '.join(OTB_SCORINGS)}")
    if otb_scoring == "official" and tokenizer is None:
        raise TraacError("--otb-scoring official counts think tokens: give a tokenizer")
    output_dir(output)
    with run_lock(output, wait):
        check_run_file(output, settings)
        all_items = load_items(settings.dataset)
        items = all_items[:limit]
        if not items:
            raise TraacError(f"dataset {settings.dataset!r} has no items")
        if otb_scoring is not None:
            check_otb_halves(items, settings.dataset, otb_scoring)
        responses = read_responses(Path(settings.responses)) if settings.responses else None
        if responses is not None:
            pairs = select_responses(
                items, responses, num_samples=num_samples, known_ids={it.id for it in all_items}
            )
        else:
            pairs = [(it, s) for it in items for s in range(num_samples or 5)]
        chat_format = resolve_chat_format(settings.chat_format, tokenizer=tokenizer)
        store = SamplesFile(output / SAMPLES_FILE)
        done = store.load()
        backend = None
        if responses is None and any((it.id, s) not in done for it, s in pairs):
            if make_backend is None:
                raise TraacError("generation needs a backend")
            backend = make_backend(tokenizer)  # a model that does not load fails here
        # Everything is checked: only now does the directory belong to these settings.
        write_run_file(output, settings, args or {})
        counter = LengthCounter(tokenizer, chat_format, settings.tokenizer or settings.model)
        new, notes = 0, list[str]()
        if responses is not None:
            new = score_responses(pairs, responses, counter, store, done, progress=progress)
        elif backend is not None:
            new, notes = generate_samples(
                items,
                num_samples or 5,
                backend,
                settings,
                counter,
                store,
                done,
                batch_size=batch_size,
                progress=progress,
            )
        records = [done[(it.id, s)] for it, s in pairs]
        summary = summarize(
            records,
            dataset=settings.dataset,
            model=str(settings.model or settings.responses),
            t_max=t_max,
            length_unit=counter.unit,
            notes=notes,
            tokenizer_id=counter.tokenizer_id,
            votes=answer_votes(records, items, chat_format.think_close),
        )
        summary = with_overthinking(summary, records, items, counter)
        if otb_scoring == "official":
            summary = with_official_otb(summary, records, items, tokenizer, chat_format)
        write_summary(output, summary, title=f"{summary.model} on {settings.dataset}")
        return RunResult(summary, records, done_before=len(records) - new, new=new, notes=notes)
