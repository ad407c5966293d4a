"""The TRAAC step driven through a `StepHost` (docs/method.md#step, 2-6): `StepDriver`.

`traac.training.step.phases` holds the step's records and pure decisions; this module runs them in
order on one process's sampled rollouts, and does the work that needs the run through the host
(`traac.training.step.host`): decode and verify, dynamic sampling's fresh prompts and rollouts, the
scoring forwards, the answers regenerated after compressed think blocks
(`traac.training.step.rounds`), and the gathers that let every process take the same decisions on
every process's rollouts. `TRAACTrainer` is the host over TRL; a test can be one with scripted
answers. The driver keeps nothing between steps: each step is one value, `StepResult`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from traac.common.items import Item
from traac.compression.difficulty import DifficultySettings
from traac.compression.formats import ChatFormat
from traac.data.training import item_from_row
from traac.training.step.compressor import StepCompressor
from traac.training.step.host import StepHost
from traac.training.step.phases import (
    Compression,
    Rollout,
    StepResult,
    TraacStep,
    bin_groups,
    compressed_completions,
    make_rollouts,
    mark_copies,
    mark_dropped,
    pool,
    replacements,
    select_candidates,
    slice_of,
)
from traac.training.step.rounds import GenerationRounds
from traac.training.telemetry.step_stats import StepClock
from traac.verification import verify_many


class StepDriver:
    """One TRAAC step at a time on one process, through `host`.

    `compressor` is None for a run that does not compress; `dynamic_sampling`,
    `max_resample_rounds` and `seed` are the `TRAACConfig` fields of those names;
    `masks_copy_think` is its `copy_loss: answer_only` (`CopySettings.masks_think`).
    """

    def __init__(
        self,
        host: StepHost,
        *,
        tokenizer: Any,
        chat_format: ChatFormat,
        difficulty: DifficultySettings,
        compressor: StepCompressor | None,
        max_completion_length: int,
        seed: int,
        dynamic_sampling: str = "none",
        max_resample_rounds: int = 1,
        masks_copy_think: bool = False,
    ) -> None:
        self.host = host
        self.tokenizer = tokenizer
        self.chat_format = chat_format
        self.difficulty = difficulty
        self.compressor = compressor
        self.max_completion_length = max_completion_length
        self.seed = seed
        self.dynamic_sampling = dynamic_sampling
        self.max_resample_rounds = max_resample_rounds
        self.masks_copy_think = masks_copy_think
        self.rounds = GenerationRounds(host, chat_format, tokenizer, max_completion_length)

    def step(
        self,
        rows: list[dict[str, Any]],
        prompt_ids: list[list[int]],
        completion_ids: list[list[int]],
        logprobs: list[list[float]] | None,
        n: int,
        clock: StepClock,
    ) -> StepResult:
        """The step on this process's sampled rollouts (dataset rows, prompt and completion
        token ids, sampling log-probs if any, `n` per prompt): verify, resample, bin, compress,
        re-answer, pool, drop. Returns this process's slice of the pooled groups, its rows and
        prompt ids (resampled ones replaced in new lists; the arguments are left as they were)
        and every process's groups. Compression and dynamic sampling run only while the host
        trains; `clock` times the phases."""
        host = self.host
        rows, prompt_ids = list(rows), [list(ids) for ids in prompt_ids]
        offset = host.rank * len(rows)
        items = [item_from_row(row) for row in rows]
        local = self.rollouts(items, completion_ids, logprobs, offset, clock)
        originals: list[Rollout] = host.gather(local)
        sampling = self.dynamic_sampling if host.training else "none"
        resampled, rounds = [0] * (len(originals) // n), 0
        if sampling == "resample":
            originals, resampled, rounds = self.resample(
                rows, items, prompt_ids, local, originals, n, offset, clock
            )
        sources: list[str] = host.gather([item.data_source for item in items])
        tiers: list[str | None] = host.gather([item.tier for item in items])
        rates, bins = bin_groups([r.correct for r in originals], n, self.difficulty)
        compressions: list[Compression] = []
        compressed: list[Rollout] = []
        if host.training and self.compressor is not None:
            compressions, compressed = self.compress(
                self.compressor, items, prompt_ids, local, [bins[r.origin // n] for r in local],
                offset, clock,
            )  # fmt: skip
        step = host.global_step
        seed = (self.seed, step)
        groups = pool(originals, compressed, compressions, sources, rates, bins, n, seed, tiers)
        mark_dropped(groups, resampled, sampling)
        return StepResult(
            TraacStep(step + 1, groups, resample_rounds=rounds),
            rows,
            prompt_ids,
            slice_of(groups, offset, len(rows), n, sampling, self.masks_copy_think),
            logprobs is not None,
            clock.seconds,
        )

    def resample(
        self,
        rows: list[dict[str, Any]],
        items: list[Item],
        prompt_ids: list[list[int]],
        local: list[Rollout],
        originals: list[Rollout],
        n: int,
        offset: int,
        clock: StepClock,
    ) -> tuple[list[Rollout], list[int], int]:
        """DAPO's dynamic sampling: while some groups' verdicts all agree (at most
        `max_resample_rounds` times), give each such group a training prompt drawn at random
        (`replacements`) and sample its N rollouts afresh; each process samples the rows it
        holds. `rows`, `items`, `prompt_ids` and `local` (the step's own lists) are updated in
        place; `originals` are every process's rollouts. Returns the gathered originals, how
        often each group was replaced, and the rounds run."""
        host = self.host
        replaced = [0] * (len(originals) // n)
        rounds = 0
        for round_ in range(1, self.max_resample_rounds + 1):
            seed = (self.seed, host.global_step, round_)
            picks = replacements(originals, n, host.dataset_size, seed)
            if not picks:
                break
            fresh = {g: host.dataset_row(k) for g, k in picks.items()}
            mine = [i for i in range(len(rows)) if (offset + i) // n in fresh]
            for i in mine:
                rows[i] = dict(fresh[(offset + i) // n])
                items[i] = item_from_row(rows[i])
            new_ids = host.prompt_ids([rows[i]["prompt"] for i in mine])
            for i, ids in zip(mine, new_ids, strict=True):
                prompt_ids[i] = ids
            with clock.phase("resample"):
                outputs = self.rounds.generate_padded(
                    [prompt_ids[i] for i in mine], self.max_completion_length, prompt_ids[0]
                )
            new = self.rollouts(
                [items[i] for i in mine],
                [ids for ids, _ in outputs],
                None if not outputs or outputs[0][1] is None else [lp for _, lp in outputs],
                0,
                clock,
            )
            for i, rollout in zip(mine, new, strict=True):
                rollout.origin = offset + i
                local[i] = rollout
            originals = host.gather(local)
            for g in picks:
                replaced[g] += 1
            rounds = round_
        return originals, replaced, rounds

    def compress(
        self,
        compressor: StepCompressor,
        items: list[Item],
        prompt_ids: list[list[int]],
        local: list[Rollout],
        bins: list[str],
        offset: int,
        clock: StepClock,
    ) -> tuple[list[Compression], list[Rollout]]:
        """Score and evict (`compressor`) this process's candidates among `local` (`bins[i]`:
        the bin of `local[i]`'s group), then re-answer each compressed think block. Returns
        every process's compressions and every process's compressed copies."""
        host = self.host
        candidates = select_candidates(local, bins, self.difficulty)
        mine = compressor(
            candidates,
            [prompt_ids[r.origin - offset] for r, _ in candidates],
            prompt_ids[0],
            pad=host.collective_forwards,  # as many scoring forwards as every other process
            scoring=host.scoring(clock),
            items=[items[r.origin - offset] for r, _ in candidates],  # the early exits'
        )
        used = [c for c in mine if c.used]
        with clock.phase("regenerate"):
            answers = self.rounds.regenerate(
                [prompt_ids[c.origin - offset] + c.prefix_ids for c in used],
                [len(c.prefix_ids) for c in used],
                prompt_ids[0],
            )
        ids, lps = compressed_completions(used, answers)
        new = self.rollouts([items[c.origin - offset] for c in used], ids, lps, 0, clock)
        mark_copies(new, used)
        return host.gather(mine), host.gather(new)

    def rollouts(
        self,
        items: Sequence[Item],
        completion_ids: Sequence[list[int]],
        logprobs: Sequence[list[float] | None] | None,
        origin: int,
        clock: StepClock,
    ) -> list[Rollout]:
        """Decode, parse and verify rollouts (`origin`: global index of the first)."""
        if not completion_ids:
            return []
        texts = self.tokenizer.batch_decode(completion_ids, skip_special_tokens=True)
        with clock.phase("verify"):
            correct = verify_many(items, texts, think_close=self.chat_format.think_close)
        return make_rollouts(completion_ids, logprobs, texts, correct, self.chat_format, origin)
