"""The step driver against a scripted `StepHost`: no GRPOTrainer, no model weights.

The host's backend answers each prompt with text a test scripts from the prompt (right or
wrong for its row's question, a think block or only an answer after one); verdicts come from
the real verifier on the testbed's items, compression from the real `StepCompressor` with the
random scorer (which needs no model). Two processes are two threads whose gathers meet.
"""

from __future__ import annotations

import math
import random
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

from traac.compression.difficulty import DifficultySettings
from traac.compression.factory import build_compressor
from traac.compression.formats import ChatFormat
from traac.compression.settings import CompressionSettings
from traac.data.testbed_problems import make_items
from traac.data.training import item_from_row, items_to_dataset
from traac.testbed.config import TeacherSettings
from traac.testbed.traces import teach
from traac.training.step.compressor import StepCompressor
from traac.training.step.driver import StepDriver
from traac.training.step.host import StepHost
from traac.training.step.phases import StepResult
from traac.training.telemetry.step_stats import StepClock

N = 4  # rollouts per prompt
SEED = 7  # the run's seed
STEP = 3  # optimizer steps done before the step under test
MAX_LENGTH = 400  # max_completion_length
FORMAT = ChatFormat()
Script = Callable[[str, str, int], str]  # (prompt text, gold answer, k-th ask) -> completion


def render(prompt: list[dict[str, str]]) -> str:
    """The host's chat template: the messages' text, then a line break."""
    return "".join(m["content"] for m in prompt) + "\n"


def right(gold: str) -> str:
    return f"<think>{gold}</think>The answer is \\boxed{{{gold}}}."


def wrong(gold: str) -> str:
    return f"<think>no</think>The answer is \\boxed{{{gold}1}}."


class ScriptedHost:
    """A `StepHost` whose backend writes `script(prompt, gold, k)` for each prompt (`k`: how
    often that prompt's question was asked before) and records every call. `gather` joins the
    other simulated processes (`Collective`); alone, it returns this process's values."""

    def __init__(
        self,
        dataset: list[dict[str, Any]],
        tokenizer: Any,
        script: Script,
        *,
        rank: int = 0,
        collective: Collective | None = None,
        generation_group: int = 1,
        collective_forwards: bool = False,
        logprobs: bool = False,
        training: bool = True,
    ) -> None:
        self.dataset = dataset
        self.tokenizer = tokenizer
        self.script = script
        self.rank = rank
        self.collective = collective
        self.generation_group = generation_group
        self.collective_forwards = collective_forwards
        self.logprobs = logprobs
        self.training = training
        self.global_step = STEP
        self.gold = {render(row["prompt"]): str(row["answer"]) for row in dataset}
        self.asked: Counter[str] = Counter()
        self.calls: list[tuple[list[list[int]], int, list[list[int]]]] = []  # prompts, budget, ids
        self.scored = 0

    @property
    def dataset_size(self) -> int:
        return len(self.dataset)

    def dataset_row(self, index: int) -> dict[str, Any]:
        return dict(self.dataset[index])

    def prompt_ids(self, prompts: list[Any]) -> list[list[int]]:
        return [self.encode(render(p)) for p in prompts]

    def encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def sample_answers(
        self, prompts: list[list[int]], budget: int
    ) -> tuple[list[list[int]], list[list[float]] | None]:
        out = []
        for ids in prompts:
            text = self.tokenizer.decode(ids)
            question = text[: text.index("\n") + 1]
            out.append(self.encode(self.script(text, self.gold[question], self.asked[question])))
            out[-1] = (out[-1] + [self.tokenizer.eos_token_id])[:budget]
            self.asked[question] += 1
        self.calls.append(([list(p) for p in prompts], budget, out))
        return out, ([[-0.5] * len(a) for a in out] if self.logprobs else None)

    def gather(self, values: list[Any]) -> list[Any]:
        return (
            list(values) if self.collective is None else self.collective.gather(self.rank, values)
        )

    @contextmanager
    def scoring(self, clock: StepClock) -> Iterator[None]:
        self.scored += 1
        with clock.phase("score"):
            yield


class Collective:
    """`size` simulated processes (threads): each gather waits for all, then hands every one
    the values of all in rank order."""

    def __init__(self, size: int) -> None:
        self.slots: list[list[Any]] = [[] for _ in range(size)]
        self.barrier = threading.Barrier(size, timeout=120)  # a deadlock fails, not hangs

    def gather(self, rank: int, values: list[Any]) -> list[Any]:
        self.slots[rank] = list(values)
        self.barrier.wait()
        out = [v for slot in self.slots for v in slot]
        self.barrier.wait()  # every process has read before any writes again
        return out

    def run(self, jobs: list[Callable[[], Any]]) -> list[Any]:
        """Run `jobs[rank]` as process `rank`, all at once; their results in rank order."""
        results: list[Any] = [None] * len(jobs)
        errors: list[BaseException] = []

        def process(rank: int) -> None:
            try:
                results[rank] = jobs[rank]()
            except BaseException as error:  # the others must not wait for this one
                errors.append(error)
                self.barrier.abort()

        threads = [threading.Thread(target=process, args=(r,)) for r in range(len(jobs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        return results


@pytest.fixture(scope="module")
def tokenizer(char_tokenizer: Callable[..., Any]) -> Any:
    """Characters as tokens; the think delimiters are plain text, kept by decoding."""
    return char_tokenizer(("<pad>", "<eos>"), eos="<eos>")


@pytest.fixture(scope="module")
def dataset() -> list[dict[str, Any]]:
    return [dict(row) for row in items_to_dataset(make_items("easy", 12, seed=1, split="rl"))]


def driver(host: StepHost, tokenizer: Any, **options: Any) -> StepDriver:
    compressor = None
    if options.pop("compress", False):
        settings = CompressionSettings(scorer="random")
        compressor = StepCompressor(
            build_compressor(settings, None, tokenizer, FORMAT, seed=SEED), FORMAT, tokenizer,
            MAX_LENGTH, host.gather,
        )  # fmt: skip
    return StepDriver(
        host, tokenizer=tokenizer, chat_format=FORMAT, difficulty=DifficultySettings(),
        compressor=compressor, max_completion_length=MAX_LENGTH, seed=SEED, **options,
    )  # fmt: skip


def batch(
    host: ScriptedHost, rows: list[dict[str, Any]], texts: Callable[[int, str], list[str]]
) -> tuple[list[dict[str, Any]], list[list[int]], list[list[int]]]:
    """N rollouts of each row: `texts(g, gold)` writes group g's N completions."""
    out_rows, prompts, completions = [], [], []
    for g, row in enumerate(rows):
        for text in texts(g, str(row["answer"])):
            out_rows.append(dict(row))
            prompts.append(host.prompt_ids([row["prompt"]])[0])
            completions.append([*host.encode(text), host.tokenizer.eos_token_id])
    return out_rows, prompts, completions


def three_groups(g: int, gold: str) -> list[str]:
    """Group 0 all right, group 1 all wrong, group 2 mixed."""
    return [[right(gold)] * N, [wrong(gold)] * N, [right(gold), wrong(gold)] * (N // 2)][g]


def drawn(round_: int, degenerate: list[int], size: int) -> dict[int, int]:
    """The rows dynamic sampling draws in a round: the run's seed, the step and the round seed
    the draw, one row per degenerate group (docs/method.md#step, 2)."""
    picks = np.random.default_rng([SEED, STEP, round_]).integers(size, size=len(degenerate))
    return dict(zip(degenerate, (int(k) for k in picks), strict=True))


def alternating(prompt: str, gold: str, k: int) -> str:
    return right(gold) if k % 2 == 0 else wrong(gold)


def always_right(prompt: str, gold: str, k: int) -> str:
    return right(gold)


def step_of(
    host: ScriptedHost, rows: Any, prompts: Any, completions: Any, **options: Any
) -> StepResult:
    logprobs = options.pop("logprobs", None)
    d = driver(host, host.tokenizer, **options)
    return d.step(rows, prompts, completions, logprobs, N, StepClock())


# ------------------------------------------------------------------------- dynamic sampling


def test_resampling_gives_degenerate_groups_a_drawn_prompt_and_fresh_rollouts(
    tokenizer: Any, dataset: list[dict[str, Any]]
) -> None:
    host = ScriptedHost(dataset, tokenizer, alternating)
    rows, prompts, completions = batch(host, dataset[:3], three_groups)
    given = [dict(r) for r in rows], [list(p) for p in prompts]
    step = step_of(host, rows, prompts, completions, dynamic_sampling="resample",
                   max_resample_rounds=2)  # fmt: skip
    assert (rows, prompts) == given  # the caller's lists are left as they were
    groups = step.record.groups
    # One round: groups 0 and 1 drew a row each, sampled N rollouts of it in one call, which
    # the script answered right and wrong in turn: mixed, so no second round.
    picks = drawn(1, [0, 1], len(dataset))
    assert [g.resampled for g in groups] == [1, 1, 0] and step.record.resample_rounds == 1
    ((asked, budget, answers),) = host.calls
    assert budget == MAX_LENGTH
    for g, k in picks.items():
        assert step.rows[g * N : (g + 1) * N] == [dataset[k]] * N
        assert step.prompt_ids[g * N : (g + 1) * N] == host.prompt_ids([dataset[k]["prompt"]]) * N
    assert asked == step.prompt_ids[: 2 * N]
    assert [r.completion_ids for g in groups[:2] for r in g.originals] == answers
    assert [r.origin for g in groups for r in g.originals] == list(range(3 * N))
    # The mixed group kept its row, prompt and rollouts; nothing is left degenerate.
    assert step.rows[2 * N :] == rows[2 * N :] and step.prompt_ids[2 * N :] == prompts[2 * N :]
    assert [r.completion_ids for r in groups[2].originals] == completions[2 * N :]
    assert [g.pass_rate for g in groups] == [0.5, 0.5, 0.5]
    assert step.dropped == [False] * 3 * N
    assert [r.completion_ids for r in step.rollouts] == [
        r.completion_ids for g in groups for r in g.pooled
    ]


def test_resampling_gives_up_after_its_rounds_and_drops_what_is_still_degenerate(
    tokenizer: Any, dataset: list[dict[str, Any]]
) -> None:
    host = ScriptedHost(dataset, tokenizer, always_right)
    rows, prompts, completions = batch(host, dataset[:3], three_groups)
    step = step_of(host, rows, prompts, completions, dynamic_sampling="resample",
                   max_resample_rounds=2)  # fmt: skip
    groups = step.record.groups
    assert step.record.resample_rounds == 2 and [g.resampled for g in groups] == [2, 2, 0]
    assert len(host.calls) == 2
    # Round 2 redrew both groups (all right again) with its own seed; its rows are final.
    for g, k in drawn(2, [0, 1], len(dataset)).items():
        assert step.rows[g * N : (g + 1) * N] == [dataset[k]] * N
    assert host.calls[1][0] == step.prompt_ids[: 2 * N]
    assert [g.dropped for g in groups] == [True, True, False]
    assert step.dropped == [True] * 2 * N + [False] * N


def test_drop_samples_nothing_and_masks_the_degenerate_groups(
    tokenizer: Any, dataset: list[dict[str, Any]]
) -> None:
    host = ScriptedHost(dataset, tokenizer, always_right)
    rows, prompts, completions = batch(host, dataset[:3], three_groups)
    step = step_of(host, rows, prompts, completions, dynamic_sampling="drop")
    assert not host.calls and step.rows == rows and step.record.resample_rounds == 0
    assert [g.dropped for g in step.record.groups] == [True, True, False]
    assert step.dropped == [True] * 2 * N + [False] * N
    assert step.every_dropped == step.dropped  # one process: its rows are every row
    assert step.left_out == step.dropped
    step.filtered = [True, False] * (3 * N // 2)  # the keep phase (GFPO's filter) on the rest
    assert step.left_out == [True] * 2 * N + [False, True] * (N // 2)


def test_outside_training_neither_resamples_nor_compresses(
    tokenizer: Any, dataset: list[dict[str, Any]]
) -> None:
    host = ScriptedHost(dataset, tokenizer, always_right, training=False)
    rows, prompts, completions = batch(host, dataset[:3], three_groups)
    step = step_of(host, rows, prompts, completions, dynamic_sampling="resample", compress=True)
    assert not host.calls and not host.scored and step.dropped is None
    assert all(g.pooled == g.originals and not g.compressions for g in step.record.groups)


# ------------------------------------------------------------------------------ compression


def teacher(g: int, gold: str, rows: list[dict[str, Any]]) -> list[str]:
    """The testbed teacher's right traces (several steps, re-checks after the answer), but in
    group 1 the last is wrong and the third closes its think block twice (malformed)."""
    item = item_from_row(rows[g])
    rng = random.Random(g)
    out = []
    for k in range(N):
        trace = teach(item.entry, rng, TeacherSettings(slip_prob=0.0, guess_prob=0.0,
                                                     interrupt_prob=0.0))  # fmt: skip
        while trace.n_rechecks < 3:
            trace = teach(item.entry, rng, TeacherSettings(slip_prob=0.0, guess_prob=0.0,
                                                         interrupt_prob=0.0))  # fmt: skip
        text = trace.response()
        if g == 1 and k == N - 1:
            text = text.replace("\\boxed{", "\\boxed{1")
        if g == 1 and k == 2:
            text = text.replace("</think>", "</think></think>")
        out.append(text)
    return out


def long_answer(prompt: str, gold: str, k: int) -> str:
    """After a compressed think block, an answer longer than any budget (cut by the driver)."""
    assert prompt.endswith("</think>")  # only re-answers are asked for
    return f"The answer is \\boxed{{{gold}}}." + " So." * 200


@pytest.mark.parametrize("logprobs", [False, True])
def test_compressed_copies_are_reanswered_within_the_length_cap_and_pooled(
    tokenizer: Any, dataset: list[dict[str, Any]], logprobs: bool
) -> None:
    host = ScriptedHost(dataset, tokenizer, long_answer, logprobs=logprobs)
    rows = dataset[:2]
    rows_in, prompts, completions = batch(host, rows, lambda g, gold: teacher(g, gold, rows))
    sampled = [[-1.0] * len(c) for c in completions] if logprobs else None
    step = step_of(host, rows_in, prompts, completions, compress=True, logprobs=sampled)
    groups = step.record.groups
    assert [g.pass_rate for g in groups] == [1.0, 0.75] and [g.bin for g in groups] == [
        "easy",
        "medium",
    ]
    # Every right, well-formed original is a candidate, scored once (one scoring context).
    originals = [r for g in groups for r in g.originals]
    candidates = [r.origin for r in originals if r.correct and r.well_formed]
    assert candidates == [0, 1, 2, 3, 4, 5] and host.scored == 1
    used = [c for g in groups for c in g.compressions if c.used]
    assert [c.origin for g in groups for c in g.compressions] == candidates
    assert used and all(c.result.n_evicted > 0 for c in used)
    # One re-answer round: each prompt + its compressed think block, in one call, with the
    # budget of the shortest think block; each answer cut to what its own block leaves.
    ((asked, budget, _),) = host.calls
    assert asked == [prompts[c.origin] + c.prefix_ids for c in used]
    assert budget == MAX_LENGTH - min(len(c.prefix_ids) for c in used)

    def reanswered(c: Any) -> list[int]:  # the copy of `c`: think block + the answer, cut
        answer = host.encode(long_answer("</think>", str(rows[c.origin // N]["answer"]), 0))
        return c.prefix_ids + answer[: MAX_LENGTH - len(c.prefix_ids)]

    copies = {r.origin: r for g in groups for r in g.pooled if r.compressed}
    assert copies  # some copies made it into the pool
    for c in used:
        if c.origin not in copies:
            continue
        copy = copies[c.origin]
        assert copy.completion_ids == reanswered(c)
        assert len(copy.completion_ids) == MAX_LENGTH and copy.correct
        assert copy.think_prefix == len(c.prefix_ids)
        assert tokenizer.decode(c.prefix_ids) == f"<think>{c.result.text}</think>"
        if logprobs:  # the think block was not sampled in this context: no correction there
            assert all(math.isnan(x) for x in copy.logprobs[: copy.think_prefix])
            assert copy.logprobs[copy.think_prefix :] == [-0.5] * (MAX_LENGTH - copy.think_prefix)
        else:
            assert copy.logprobs is None
    # Pooled: per group, the first N of originals + its copies shuffled with (seed, step, group).
    for g in groups:
        made = [reanswered(c) for c in used if c.origin // N == g.index]
        pool = [r.completion_ids for r in g.originals] + made
        order = np.random.default_rng([SEED, STEP, g.index]).permutation(len(pool))[:N]
        expected = [pool[k] for k in order] if made else pool
        assert [r.completion_ids for r in g.pooled] == expected
    if not logprobs:  # the originals' own log-probs (none here) and the rest as sampled
        assert all(r.logprobs is None for r in step.rollouts)
    assert [r.completion_ids for r in step.rollouts] == [
        r.completion_ids for g in groups for r in g.pooled
    ]
    assert step.columns.compressed == [r.compressed for r in step.rollouts]
    assert step.columns.bin == ["easy"] * N + ["medium"] * N
    assert step.record.step == STEP + 1


# -------------------------------------------------------------------------- two processes


def reanswer_or_one_right(prompt: str, gold: str, k: int) -> str:
    """A prompt closed by a think block (a re-answer, or a process's padding) gets an answer;
    a fresh prompt a whole rollout, right once in N."""
    if prompt.endswith("</think>"):
        return f"The answer is \\boxed{{{gold}}}."
    return right(gold) if k % N == 0 else wrong(gold)


def test_two_processes_pad_each_round_to_the_busiest_and_take_the_same_decisions(
    tokenizer: Any, dataset: list[dict[str, Any]]
) -> None:
    """Process 0 holds an all-wrong group (resampled), process 1 a mixed group of teacher traces
    (compressed). With a generation group of both and collective forwards, in each round the
    process with fewer prompts pads with its own first prompt closed by an empty think block,
    and drops those answers; each scores as many reasonings as the busiest."""
    collective = Collective(2)
    hosts = [
        ScriptedHost(dataset, tokenizer, reanswer_or_one_right, rank=rank, collective=collective,
                     generation_group=2, collective_forwards=True)
        for rank in range(2)
    ]  # fmt: skip
    batches = [
        batch(hosts[0], dataset[:1], lambda g, gold: [wrong(gold)] * N),
        batch(hosts[1], dataset[1:2], lambda g, gold: teacher(1, gold, dataset)),
    ]
    drivers = [driver(h, tokenizer, compress=True, dynamic_sampling="resample") for h in hosts]
    scored: list[list[int]] = [[], []]
    for rank, d in enumerate(drivers):
        assert d.compressor is not None
        scorer = d.compressor.compressor.scorer
        score = scorer.score

        def counted(requests: Any, rank: int = rank, score: Any = score) -> Any:
            scored[rank].append(len(requests))
            return score(requests)

        scorer.score = counted  # type: ignore[method-assign]
    jobs = [
        (lambda d=d, b=b: d.step(*b[:3], None, N, StepClock()))
        for d, b in zip(drivers, batches, strict=True)
    ]
    steps = collective.run(jobs)

    def decided(step: StepResult) -> list[Any]:
        return [(g.pass_rate, g.bin, g.resampled, g.dropped, [r.completion_ids for r in g.pooled])
                for g in step.record.groups]  # fmt: skip

    assert decided(steps[0]) == decided(steps[1])  # every process took the same decisions
    groups = steps[0].record.groups
    assert [g.resampled for g in groups] == [1, 0] and steps[0].record.resample_rounds == 1
    for rank, step in enumerate(steps):
        assert [r.completion_ids for r in step.rollouts] == [
            r.completion_ids for r in groups[rank].pooled
        ]
    # Resampling: process 0 asked for its group's N fresh prompts, process 1 padded to N.
    (k,) = drawn(1, [0], len(dataset)).values()
    assert steps[0].rows == [dataset[k]] * N and steps[1].rows == batches[1][0]
    empty_think = tokenizer("<think></think>", add_special_tokens=False)["input_ids"]
    filler = [batches[1][1][0] + empty_think]
    assert hosts[0].calls[0][0] == steps[0].prompt_ids
    assert hosts[1].calls[0][0] == filler * N
    # Compression: both scored as many reasonings as the busier: process 0 its one right
    # rollout and a filler, process 1 its two right, well-formed traces.
    real = [sum(1 for r in g.originals if r.correct and r.well_formed) for g in groups]
    assert real == [1, 2] and scored == [[2], [2]]
    # Re-answers: each process asked for as many as the busier, its shortfall padded.
    used = [[c for c in g.compressions if c.used] for g in groups]
    assert used[1]
    for rank, host in enumerate(hosts):
        asked = host.calls[-1][0]
        own = [steps[rank].prompt_ids[c.origin - rank * N] + c.prefix_ids for c in used[rank]]
        pad = [steps[rank].prompt_ids[0] + empty_think] * (max(map(len, used)) - len(own))
        assert asked == own + pad
