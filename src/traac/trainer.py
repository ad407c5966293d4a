"""`TRAACTrainer`: TRL's `GRPOTrainer` with TRAAC's rollout step (SPEC section 1).

TRL keeps the GRPO loss, the KL term, the generation backends (transformers, vLLM),
accelerate/DeepSpeed, logging and checkpointing. TRAAC hooks in at two points:

- `_generate_single_turn`: once TRL has sampled N rollouts per prompt, each rollout is verified,
  each prompt binned by its pass rate, the correct well-formed rollouts compressed (the scorer runs
  on the frozen reference model by default), their answers regenerated with the same backend from
  `prompt + opener + compressed reasoning + closer`, and originals and compressed copies pooled,
  shuffled and cut back to N. The group TRL scores and trains on is that pooled group, in full.
- `_calculate_rewards`: TRL's reward call, with the verdicts and bins of the step as columns;
  the length reward pushes the step's lengths into the windows before scoring (training only).

Rollouts of one prompt may sit on several processes. Every decision (pass rate, calibration,
pooling) is taken on gathered data with the same seed on every process; each process compresses
and regenerates its own rollouts and keeps its slice of the pooled batch.
"""

from __future__ import annotations

import copy
import json
import math
import os
import time
from collections import defaultdict, deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from accelerate.utils import gather_object
from transformers import AutoModelForCausalLM, TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from trl import GRPOTrainer
from trl.extras.profiling import profiling_context
from trl.trainer.utils import get_config_model_id

from traac.compression import (
    CompressionResult,
    Compressor,
    count_tokens,
    evict,
    eviction_fraction,
)
from traac.config import TRAACConfig
from traac.data import item_from_row
from traac.errors import TraacError
from traac.formats import ChatFormat, resolve_chat_format
from traac.interrupt import StopOnSignal
from traac.rewards import LengthWindows, TraacRewards
from traac.scoring import build_scorer
from traac.verify import verify_many

METRICS_FILE = "metrics.jsonl"
STATE_FILE = "traac_state.json"  # rank 0's; under several processes each also writes its own


def rank_state_file(rank: int) -> str:
    """The TRAAC state file of one process in a checkpoint of a multi-process run."""
    return f"traac_state_{rank}.json"


@dataclass
class Rollout:
    """One member of a group: an original sample or the compressed copy of one."""

    completion_ids: list[int]
    logprobs: list[float] | None  # sampling log-probs where the backend reports them
    text: str
    correct: bool
    well_formed: bool
    origin: int  # global index of the original sample (its own index for an original)
    compressed: bool = False


@dataclass
class Compression:
    """Compression of one correct, well-formed original rollout."""

    origin: int
    result: CompressionResult
    tau: float
    uniformity_rank: float | None = None  # the calibrated uniformity, when calibration is on
    prefix_ids: list[int] = field(default_factory=list)  # opener + kept steps + closer

    @property
    def used(self) -> bool:
        """Text was evicted and the think block is re-answered (a compressed rollout)."""
        return bool(self.prefix_ids)

    @property
    def steps_removed(self) -> int:
        """Evicted steps with text (with step scope `probe`, the opener's step is empty when
        the reasoning opens with a split phrase; evicting it removes nothing)."""
        pairs = zip(self.result.steps, self.result.kept, strict=True)
        return sum(bool(step.text) and not kept for step, kept in pairs)

    @property
    def tokens_removed(self) -> int:
        return self.result.tokens_before - self.result.tokens_after


@dataclass
class Group:
    """The N rollouts of one prompt, before and after pooling."""

    index: int
    data_source: str
    pass_rate: float
    bin: str
    originals: list[Rollout]
    compressions: list[Compression]
    pooled: list[Rollout]


@dataclass
class StepRecord:
    """What one TRAAC step did, kept for metrics and inspection (`trainer.last_step`)."""

    step: int
    groups: list[Group]
    metrics: dict[str, float] = field(default_factory=dict)


class TRAACTrainer(GRPOTrainer):
    """GRPO with difficulty-aware attentive compression of correct rollouts (TRAAC).

    Arguments are `GRPOTrainer`'s; `args` is a `TRAACConfig`. Without `reward_funcs` the mode's
    rewards are used (correctness; + format + length except in `cr`). Training rows need the
    columns of `traac.data.items_to_dataset` (prompt, id, answer, verifier, data_source, entry).
    `last_step` holds the groups of the latest step (originals, compressions, pooled rollouts)
    and its metrics, which also go to TRL's logs and to `metrics.jsonl` in `output_dir`.

    `train()` checkpoints and stops at the end of the step during which SIGINT or SIGTERM
    arrives (`traac.interrupt`); `interrupted` then names the signal. A run that starts (or
    resumes) at step N first drops the lines of `metrics.jsonl` after step N: those steps are
    done again, so each step appears once.
    """

    _tag_names: ClassVar[list[str]] = ["trl", "grpo", "traac"]
    _name = "TRAAC"

    def __init__(
        self,
        model: Any,
        reward_funcs: Any = None,
        args: TRAACConfig | None = None,
        train_dataset: Any = None,
        **kwargs: Any,
    ) -> None:
        if args is None:
            args = TRAACConfig(output_dir="traac-output")
        if not isinstance(args, TRAACConfig):
            raise TraacError("TRAACTrainer: args must be a TRAACConfig")
        for unsupported in ("tools", "environment_factory", "rollout_func", "peft_config"):
            if kwargs.get(unsupported) is not None:
                raise TraacError(f"TRAACTrainer: {unsupported} is not supported")
        self.difficulty = args.difficulty_config()
        self.rewards = TraacRewards(
            args.reward_config(),
            difficulty=self.difficulty,
            windows=LengthWindows(args.length_window_steps),
            num_generations=args.num_generations,
            gather=gather_object,
        )
        super().__init__(model, reward_funcs or self.rewards.funcs, args, train_dataset, **kwargs)
        self.chat_format: ChatFormat = resolve_chat_format(
            args.chat_format,
            think_open=args.think_open,
            think_close=args.think_close,
            tokenizer=self._tokenizer,
        )
        self.rewards.chat_format = self.chat_format  # known once TRL has the tokenizer
        self.uniformities: deque[float] = deque(maxlen=args.calibration_window)
        self.last_step: StepRecord | None = None
        self._rows: list[dict[str, Any]] | None = None
        self._seconds: defaultdict[str, float] = defaultdict(float)  # this step's phases
        self._scoring_model = self._load_scoring_model() if args.compresses else None
        self.compressor = self._build_compressor() if args.compresses else None
        self.stop_on_signal = StopOnSignal()
        self.add_callback(self.stop_on_signal)
        self.add_callback(MetricsFromStart())

    def train(self, *args: Any, **kwargs: Any) -> Any:
        """`Trainer.train`, with SIGINT/SIGTERM turned into checkpoint-and-stop."""
        with self.stop_on_signal.installed():
            return super().train(*args, **kwargs)

    @property
    def interrupted(self) -> int | None:
        """The signal the last `train()` stopped for (checkpoint saved), else None."""
        return self.stop_on_signal.stopped

    # ---------------------------------------------------------------- set-up

    def _load_scoring_model(self) -> Any:
        """The model the probe runs through: the frozen reference model, or the policy.

        With `beta=0` TRL keeps no reference model; TRAAC then loads its own frozen copy of the
        initial policy (the paper's scoring model), which costs one model's memory; choose
        `scoring_model: policy` to avoid it.
        """
        if self.args.scorer == "random":
            return None
        if hasattr(self.model, "peft_config"):
            raise TraacError("TRAACTrainer: PEFT models are not supported yet")
        if self.args.scoring_model == "policy":
            return None  # looked up at each step: the policy being trained
        if self.ref_model is not None:
            return self.accelerator.unwrap_model(self.ref_model)
        from transformers.utils import logging

        logging.get_logger(__name__).warning(
            "TRAAC: beta=0 leaves TRL without a reference model; loading a frozen copy of the "
            "initial policy to score steps (set scoring_model=policy to score with the policy)."
        )
        frozen = AutoModelForCausalLM.from_pretrained(
            get_config_model_id(self.model.config), dtype=self.model.dtype
        )
        frozen.requires_grad_(False)
        return frozen.to(self.accelerator.device).eval()

    def _build_compressor(self) -> Compressor:
        """The compressor reports raw scores and uniformity (gate and cap open); the gate, cap
        and optional calibration are applied in `_evict`, so both paths share one rule."""
        args = self.args
        model = self._scoring_model or self.accelerator.unwrap_model(self.model)
        scorer = build_scorer(
            args.scorer,
            None if args.scorer == "random" else model,
            self._tokenizer,
            args.probe_layers,
            args.seed,
            think_close=self.chat_format.think_close,
            phrases=args.split_phrases,
        )
        return Compressor(
            scorer,
            chat_format=self.chat_format,
            aux_prompt=args.aux_prompt,
            phrases=tuple(args.split_phrases) if args.split_phrases else None,
            scope=args.step_scope,
            gate=1.0,
            cap=1.0,
        )

    # ---------------------------------------------------------------- TRL hooks

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        self._rows = inputs  # the dataset rows of this batch, one per rollout
        try:
            return super()._generate_and_score_completions(inputs)
        finally:
            self._rows = None

    def _generate_single_turn(
        self,
        prompt_ids: list[list[int]],
        images: Any,
        multimodal_fields: dict,
        num_generations: int,
        has_tool_images: bool = False,
    ) -> tuple[list[list[int]], list[list[float]] | None]:
        if self._rows is None:  # a nested call (answer regeneration) or no batch context
            return super()._generate_single_turn(
                prompt_ids, images, multimodal_fields, num_generations, has_tool_images
            )
        self._seconds = defaultdict(float)
        with self._phase("generate"):
            completion_ids, logprobs = super()._generate_single_turn(
                prompt_ids, images, multimodal_fields, num_generations, has_tool_images
            )
        rows, self._rows = self._rows, None
        try:
            pooled = self._traac_step(rows, prompt_ids, completion_ids, logprobs, num_generations)
        finally:
            self._rows = rows
        ids = [r.completion_ids for r in pooled]
        return ids, None if logprobs is None else [r.logprobs for r in pooled]

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        """TRL's reward call; the length reward pushes this step into the windows. Evaluation
        batches score against a copy, so only training steps advance the windows."""
        if self.model.training:
            rewards_per_func = super()._calculate_rewards(
                inputs, prompts, completions, completion_ids_list
            )
            if self.last_step is not None:
                self._log_step(self.last_step, rewards_per_func)
            return rewards_per_func
        windows = self.rewards.windows
        self.rewards.windows = copy.deepcopy(windows)
        try:
            return super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        finally:
            self.rewards.windows = windows

    # ---------------------------------------------------------------- the TRAAC step

    def _traac_step(
        self,
        rows: list[dict[str, Any]],
        prompt_ids: list[list[int]],
        completion_ids: list[list[int]],
        logprobs: list[list[float]] | None,
        n: int,
    ) -> list[Rollout]:
        """SPEC section 1, steps 2-6, for this process's rollouts; returns its pooled slice."""
        offset = self.accelerator.process_index * len(rows)
        items = [item_from_row(row) for row in rows]
        local = self._rollouts(items, completion_ids, logprobs, offset)
        originals: list[Rollout] = gather_object(local)
        sources: list[str] = gather_object([item.data_source for item in items])
        n_groups = len(originals) // n
        pass_rates = [
            sum(r.correct for r in originals[g * n : (g + 1) * n]) / n for g in range(n_groups)
        ]
        bins = [self.difficulty.bin_of(p) for p in pass_rates]

        compressions: list[Compression] = []
        compressed: list[Rollout] = []
        if self.model.training and self.args.compresses:
            mine = self._compress(local, [bins[r.origin // n] for r in local])
            used = [c for c in mine if c.used]
            answers = self._regenerate(
                [prompt_ids[c.origin - offset] + c.prefix_ids for c in used],
                [len(c.prefix_ids) for c in used],
                filler=prompt_ids[0],
            )
            new = self._compressed_rollouts(items, used, answers, offset)
            compressions = gather_object(mine)
            compressed = gather_object(new)

        groups = self._pool(originals, compressed, compressions, sources, pass_rates, bins, n)
        pooled = [r for g in groups for r in g.pooled]
        self.last_step = StepRecord(step=self.state.global_step + 1, groups=groups)
        mine = pooled[offset : offset + len(rows)]
        for i, (row, rollout) in enumerate(zip(rows, mine, strict=True)):
            # Columns the reward functions read: verdict and bin (no second verification).
            row["correct"] = rollout.correct
            row["difficulty_bin"] = groups[(offset + i) // n].bin
            row["compressed"] = rollout.compressed
        return mine

    def _rollouts(
        self,
        items: Sequence[Any],
        completion_ids: Sequence[list[int]],
        logprobs: Sequence[list[float] | None] | None,
        origin: int,
    ) -> list[Rollout]:
        """Decode, parse and verify rollouts (`origin`: global index of the first)."""
        if not completion_ids:
            return []
        texts = self._tokenizer.batch_decode(completion_ids, skip_special_tokens=True)
        with self._phase("verify"):
            correct = verify_many(items, texts, think_close=self.chat_format.think_close)
        logprobs = logprobs if logprobs is not None else [None] * len(texts)
        return [
            Rollout(list(ids), lp, text, ok, self.chat_format.parse(text).well_formed, origin + i)
            for i, (ids, lp, text, ok) in enumerate(
                zip(completion_ids, logprobs, texts, correct, strict=True)
            )
        ]

    def _compress(self, local: list[Rollout], bins: list[str]) -> list[Compression]:
        """Score and compress this process's correct, well-formed rollouts (every candidate is
        returned; those that lost steps carry the token ids of their new think block)."""
        todo = [
            (r, self.difficulty.tau_of(b))
            for r, b in zip(local, bins, strict=True)
            if r.correct and r.well_formed
        ]
        reasonings = [self.chat_format.parse(r.text).reasoning for r, _ in todo]
        with self._phase("score"), self._scoring_mode():
            results = self.compressor(reasonings, [tau for _, tau in todo])
        scored = [(r, tau, res) for (r, tau), res in zip(todo, results, strict=True) if res.steps]
        # Calibration ranks against every process's uniformities of this step and recent ones.
        fresh: list[float] = gather_object([res.uniformity for _, _, res in scored])
        if self.args.uniformity_calibration == "rank":
            self.uniformities.extend(fresh)
        out = []
        for rollout, tau, res in scored:
            compression = self._evict(rollout.origin, res, tau)
            if compression.result.text != compression.result.reasoning:
                prefix = self.chat_format.answer_prefix(compression.result.text)
                ids = self._tokenizer(prefix, add_special_tokens=False)["input_ids"]
                # A think block that leaves no room for an answer is not used.
                compression.prefix_ids = ids if len(ids) < self.max_completion_length else []
            out.append(compression)
        return out

    def _evict(self, origin: int, result: CompressionResult, tau: float) -> Compression:
        """The uniformity gate and eviction rule (SPEC section 2) on a raw-scored trace."""
        u, rank = result.uniformity, None
        if self.args.uniformity_calibration == "rank":
            window = np.asarray(self.uniformities, dtype=np.float64)
            rank = float(((window < u).sum() + 0.5 * (window == u).sum()) / len(window))
            u = rank
        e = eviction_fraction(u, tau, self.args.uniformity_gate, self.args.eviction_cap)
        kept = evict(result.scores, e, result.evictable)
        text = "".join(s.text for s, k in zip(result.steps, kept, strict=True) if k)
        after = (
            result.tokens_before
            if text == result.reasoning
            else count_tokens(self._tokenizer, text)
        )
        result = replace(result, kept=kept, eviction_fraction=e, text=text, tokens_after=after)
        return Compression(origin, result, tau, rank)

    @contextmanager
    def _phase(self, name: str) -> Iterator[None]:
        """Time a part of the step: TRL's profiling (report_to) and this step's metrics."""
        start = time.perf_counter()
        with profiling_context(self, f"traac.{name}"):
            yield
        self._seconds[name] += time.perf_counter() - start

    @contextmanager
    def _scoring_mode(self) -> Iterator[None]:
        """Score with the policy in eval mode (no dropout) when it is the scoring model."""
        policy = self.accelerator.unwrap_model(self.model)
        if self._scoring_model is not None or self.args.scorer == "random":
            yield
            return
        was_training = policy.training
        policy.eval()
        try:
            yield
        finally:
            policy.train(was_training)

    def _regenerate(
        self, prompts: list[list[int]], prefix_lengths: list[int], filler: list[int]
    ) -> list[tuple[list[int], list[float] | None]]:
        """Answers sampled by the generation backend after each compressed think block.

        The token budget keeps every compressed rollout within `max_completion_length`. vLLM
        collectives need the same number of prompts on every process, so those are padded.
        """
        counts = gather_object([len(prompts)])
        shortest = gather_object([min(prefix_lengths)] if prefix_lengths else [])
        if max(counts) == 0:
            return []
        budget = self.max_completion_length - min(shortest)
        batch = list(prompts)
        if self.use_vllm:
            batch += [filler] * (max(counts) - len(prompts))
        if not batch:
            return []
        with self._phase("regenerate"), self._max_new_tokens(budget):
            ids, logprobs = super()._generate_single_turn(batch, None, {}, 1)
        out = []
        for k, prefix_length in enumerate(prefix_lengths):
            limit = self.max_completion_length - prefix_length
            lps = None if logprobs is None else list(logprobs[k][:limit])
            out.append((list(ids[k][:limit]), lps))
        return out

    @contextmanager
    def _max_new_tokens(self, budget: int) -> Iterator[None]:
        """Temporarily cap the backend's completion length (answers only need the rest)."""
        if self.use_vllm:
            saved = self.vllm_generation.max_completion_length
            self.vllm_generation.max_completion_length = budget
            try:
                yield
            finally:
                self.vllm_generation.max_completion_length = saved
            return
        saved = self.generation_config.max_new_tokens, self.generation_kwargs["max_new_tokens"]
        self.generation_config.max_new_tokens = budget
        self.generation_kwargs["max_new_tokens"] = budget
        try:
            yield
        finally:
            self.generation_config.max_new_tokens, self.generation_kwargs["max_new_tokens"] = saved

    def _compressed_rollouts(
        self,
        items: Sequence[Any],
        used: Sequence[Compression],
        answers: Sequence[tuple[list[int], list[float] | None]],
        offset: int,
    ) -> list[Rollout]:
        """Compressed think block + regenerated answer: the rollout trained on in full.

        The think block was not sampled in this context, so it has no sampling log-probs: NaN,
        which TRL's importance-sampling correction reads as "no correction" for those tokens.
        """
        ids = [c.prefix_ids + answer for c, (answer, _) in zip(used, answers, strict=True)]
        logprobs = None
        if answers and answers[0][1] is not None:
            logprobs = [
                [math.nan] * len(c.prefix_ids) + list(lps)
                for c, (_, lps) in zip(used, answers, strict=True)
            ]
        rollouts = self._rollouts([items[c.origin - offset] for c in used], ids, logprobs, 0)
        for rollout, c in zip(rollouts, used, strict=True):
            rollout.origin, rollout.compressed = c.origin, True
        return rollouts

    def _pool(
        self,
        originals: list[Rollout],
        compressed: list[Rollout],
        compressions: list[Compression],
        sources: list[str],
        pass_rates: list[float],
        bins: list[str],
        n: int,
    ) -> list[Group]:
        """Per prompt: originals + compressed copies, shuffled (seeded), the first N kept."""
        extra: dict[int, list[Rollout]] = defaultdict(list)
        for r in compressed:
            extra[r.origin // n].append(r)
        records: dict[int, list[Compression]] = defaultdict(list)
        for c in compressions:
            records[c.origin // n].append(c)
        groups = []
        for g, rate in enumerate(pass_rates):
            members = originals[g * n : (g + 1) * n]
            pooled = list(members)
            if extra[g]:
                candidates = members + extra[g]
                rng = np.random.default_rng([self.args.seed, self.state.global_step, g])
                pooled = [candidates[k] for k in rng.permutation(len(candidates))[:n]]
            groups.append(Group(g, sources[g * n], rate, bins[g], members, records[g], pooled))
        return groups

    # ---------------------------------------------------------------- metrics

    def _log_step(self, record: StepRecord, rewards_per_func: torch.Tensor) -> None:
        """TRAAC metrics of this step into TRL's metrics (so report_to sees them) and a JSONL."""
        metrics = step_metrics(record.groups, self.difficulty.bins)
        metrics.update({f"traac/seconds/{k}": v for k, v in self._seconds.items()})
        rewards = rewards_per_func.detach().float().cpu().numpy()
        for k, name in enumerate(self.reward_func_names):
            metrics[f"traac/reward/{name}"] = float(np.nanmean(rewards[:, k]))
        record.metrics = metrics
        for key, value in metrics.items():
            self._metrics["train"][key].append(value)
        if self.accelerator.is_main_process:
            path = Path(self.args.output_dir) / METRICS_FILE
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a") as f:
                f.write(json.dumps({"step": record.step, **metrics}) + "\n")

    # ---------------------------------------------------------------- checkpoints

    def traac_state_dict(self) -> dict[str, Any]:
        """Length windows and calibration window: what a resumed run needs beyond TRL's state."""
        return {
            "length_windows": self.rewards.windows.state_dict(),
            "uniformities": list(self.uniformities),
        }

    def load_traac_state_dict(self, state: dict[str, Any]) -> None:
        self.rewards.windows.load_state_dict(state["length_windows"])
        self.uniformities.clear()
        self.uniformities.extend(state["uniformities"])

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        """TRL's checkpoint plus the TRAAC state: rank 0's in `traac_state.json`, and under
        several processes each rank's own (as transformers does with the RNG states), which
        also lets anyone check that the ranks agree."""
        super()._save_checkpoint(model, trial)
        folder = Path(self._get_output_dir(trial=trial)) / (
            f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        )
        names = [STATE_FILE] if self.args.should_save else []
        if self.accelerator.num_processes > 1:
            names.append(rank_state_file(self.accelerator.process_index))
        state = json.dumps(self.traac_state_dict())
        for name in names:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(state)

    def _load_optimizer_and_scheduler(self, checkpoint: str | None) -> None:
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is None:
            return
        for name in (rank_state_file(self.accelerator.process_index), STATE_FILE):
            path = Path(checkpoint) / name
            if path.exists():
                self.load_traac_state_dict(json.loads(path.read_text()))
                return


def step_metrics(groups: Sequence[Group], bins: Sequence[str]) -> dict[str, float]:
    """Per-step TRAAC metrics: bins, pass rate, compression per bin, response length per bin.

    Candidates are the correct, well-formed originals sent to compression; `steps_removed` and
    `tokens_removed` are means over the compressed rollouts of a bin (absent when it has none).
    """
    out: dict[str, float] = {}
    if not groups:
        return out
    out["traac/rollouts"] = float(sum(len(g.originals) for g in groups))
    out["traac/pass_rate"] = float(np.mean([g.pass_rate for g in groups]))
    out["traac/compressed_frac"] = float(
        np.mean([np.mean([r.compressed for r in g.pooled]) for g in groups])
    )
    candidates = [c for g in groups for c in g.compressions]
    if candidates:
        out["traac/uniformity"] = float(np.mean([c.result.uniformity for c in candidates]))
        out["traac/eviction_fraction"] = float(
            np.mean([c.result.eviction_fraction for c in candidates])
        )
    for name in bins:
        members = [g for g in groups if g.bin == name]
        out[f"traac/{name}/prompts"] = float(len(members))
        if not members:
            continue
        pooled = [r for g in members for r in g.pooled]
        out[f"traac/{name}/pass_rate"] = float(np.mean([g.pass_rate for g in members]))
        out[f"traac/{name}/compressed_frac"] = float(np.mean([r.compressed for r in pooled]))
        out[f"traac/{name}/response_length"] = float(
            np.mean([len(r.completion_ids) for r in pooled])
        )
        scored = [c for g in members for c in g.compressions]
        done = [c for c in scored if c.used]
        out[f"traac/{name}/candidates"] = float(len(scored))
        out[f"traac/{name}/compressed_rollouts"] = float(len(done))
        if done:
            out[f"traac/{name}/steps_removed"] = float(np.mean([c.steps_removed for c in done]))
            out[f"traac/{name}/tokens_removed"] = float(np.mean([c.tokens_removed for c in done]))
    return out


class MetricsFromStart(TrainerCallback):
    """Keep `metrics.jsonl` to the steps before the one training starts from.

    A run resumed from checkpoint-N redoes the steps after N that a crash left in the file, and
    a fresh run (N = 0) into an existing `output_dir` starts a new file; either way each step
    ends up in the file once. The file is rewritten only to drop those lines.
    """

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if state.is_world_process_zero:
            truncate_metrics(Path(args.output_dir) / METRICS_FILE, state.global_step)
        return control


def truncate_metrics(path: Path, last_step: int) -> None:
    """Drop the lines of a metrics JSONL whose step is after `last_step` (atomic replace); a
    line a crash cut short is dropped too."""
    if not path.exists():
        return
    lines = path.read_text().splitlines()
    kept = [line for line in lines if _step_of(line) <= last_step]
    if len(kept) == len(lines):
        return
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(f"{line}\n" for line in kept))
    os.replace(tmp, path)


def _step_of(line: str) -> float:
    """The step of a metrics line; infinity for a line that is not a whole record."""
    try:
        return json.loads(line)["step"]
    except (json.JSONDecodeError, KeyError, TypeError):
        return math.inf
