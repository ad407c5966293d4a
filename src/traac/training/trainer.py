"""`TRAACTrainer`: TRL's `GRPOTrainer` with TRAAC's rollout step (SPEC section 1).

TRL keeps the GRPO loss, the KL term, the generation backends (transformers, vLLM),
accelerate/DeepSpeed, logging and checkpointing. Once TRL has sampled N rollouts per prompt,
each rollout is verified, each prompt binned by its pass rate, the correct well-formed rollouts
compressed (the attention probe runs on the frozen reference model by default), their answers
regenerated with the same backend from `prompt + opener + compressed reasoning + closer`, and
originals and compressed copies pooled, shuffled and cut back to N. The group TRL scores and
trains on is that pooled group, in full. The rewards then read the step's verdicts and bins as
explicit columns; the length reward pushes the step's lengths into its windows first.

In a peer mode (`traac.training.peer_rewards`) nothing is compressed: the paper's length term
replaces TRAAC's length reward, on the same verdicts and groups. With `dynamic_sampling`, groups
whose rollouts are all right or all wrong (the verifiers' verdicts, never the shaped reward) are
replaced by fresh prompts (`resample`, before compression) and those left are masked out of the
loss (`drop`, and what `resample` could not replace): their completion mask and advantages are
zeroed, as TRL's `mask_truncated_completions` does for truncated ones.

Rollouts of one prompt may sit on several processes. Every decision (pass rate, resampling,
calibration, pooling, dropping) is taken on gathered data with the same seed on every process;
each process generates, compresses and regenerates its own rollouts and keeps its slice of the
pooled batch.

Every use of TRL's private API is in the section marked "TRL adapter" below; the contract test
(`tests/training/test_trl_contract.py`) checks each hook's signature and each attribute.
"""

from __future__ import annotations

import copy
import json
import math
import time
from collections import defaultdict, deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from accelerate.logging import get_logger
from accelerate.utils import gather_object
from torch.distributed.fsdp import FSDPModule
from transformers import AutoModelForCausalLM, TrainerCallback
from transformers.distributed.fsdp import is_fsdp_managed_module
from transformers.integrations.deepspeed import is_deepspeed_zero3_enabled
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from trl import GRPOTrainer
from trl.extras.profiling import profiling_context
from trl.trainer.utils import get_config_model_id

from traac.common.items import Item
from traac.data.training import item_from_row
from traac.errors import TraacError
from traac.method.compression import (
    CompressionResult,
    Compressor,
    ScoredTrace,
    uniformity_rank,
)
from traac.method.factory import build_compressor
from traac.method.formats import ChatFormat
from traac.method.metrics import think_tokens_from_ids
from traac.method.rewards import LengthWindows
from traac.training.config import TRAACConfig
from traac.training.interrupt import StopOnSignal
from traac.training.peer_rewards import PeerRewards, with_length_budgets
from traac.training.rewards import TraacRewards
from traac.training.telemetry import (
    ALL,
    METRICS_FILE,
    RolloutView,
    StepStats,
    append_metrics,
    scope_stats,
    truncate_metrics,
)
from traac.verification import verify_many

logger = get_logger(__name__)
STATE_FILE = "traac_state.json"  # rank 0's; under several processes each also writes its own

# The TRL internals this trainer relies on, as (name, parameters): checked against the
# installed TRL by the contract test, so an upgrade that moves them fails there, not at step 1.
TRL_HOOKS: dict[str, tuple[str, ...]] = {
    "_generate_single_turn": (
        "self", "prompt_ids", "images", "multimodal_fields", "num_generations", "has_tool_images",
    ),
    "_generate_and_score_completions": ("self", "inputs"),
    "_calculate_rewards": ("self", "inputs", "prompts", "completions", "completion_ids_list"),
    "_save_checkpoint": ("self", "model", "trial"),
    "_load_optimizer_and_scheduler": ("self", "checkpoint"),
    "_get_output_dir": ("self", "trial"),
}  # fmt: skip
# TRL internals called but not overridden, likewise checked.
TRL_CALLS: dict[str, tuple[str, ...]] = {"_tokenize_prompts": ("self", "prompts")}
# Keys of the batch TRL generates and `_compute_loss` reads that dynamic sampling rewrites.
TRL_BATCH_KEYS = ("completion_mask", "advantages", "num_items_in_batch")
TRL_ATTRIBUTES = (
    "_tokenizer", "_metrics", "eos_token_ids", "use_vllm", "max_completion_length",
    "reward_func_names", "ref_model", "generation_config", "generation_kwargs",
)  # fmt: skip
TRL_VLLM_ATTRIBUTES = ("vllm_generation",)  # present when use_vllm
TRANSFORMERS_ATTRIBUTES = ("model_wrapped",)  # transformers' Trainer
# What a process with nothing to score feeds the scorer so that its forwards match the others'.
FILLER_REASONING = "."


def _sharded(model: torch.nn.Module) -> bool:
    """FSDP 1 or 2, however it was applied (accelerate, transformers or `fully_shard`)."""
    return isinstance(model, FSDPModule) or is_fsdp_managed_module(model)


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
    closed: bool
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
    resampled: int = 0  # times dynamic sampling replaced this group's prompt
    dropped: bool = False  # masked out of the loss: its pooled verdicts all agree


@dataclass
class TraacStep:
    """What one TRAAC step did, kept for telemetry and inspection (`trainer.last_step`)."""

    step: int
    groups: list[Group]
    stats: StepStats | None = None
    resample_rounds: int = 0  # extra generation rounds dynamic sampling ran


@dataclass(frozen=True)
class StepColumns:
    """The per-rollout columns the reward functions read for this process's slice."""

    correct: list[bool]
    difficulty_bin: list[str]
    compressed: list[bool]


class TRAACTrainer(GRPOTrainer):
    """GRPO with difficulty-aware attentive compression of correct rollouts (TRAAC).

    Arguments are `GRPOTrainer`'s; `args` is a `TRAACConfig`. Without `reward_funcs` the mode's
    rewards are used (correctness; + format + TRAAC's length reward except in `cr`; in a peer
    mode + format + the peer's length term). Training rows need the columns of
    `traac.data.training.items_to_dataset` (prompt, id, answer, verifier, data_source, entry);
    in mode `l1_max` each row gets its budget (`with_length_budgets`) unless it has one.
    `last_step` holds the groups of the latest step (originals, compressions, pooled rollouts)
    and its telemetry, which also goes to TRL's logs and to `metrics.jsonl` in `output_dir`.

    `train()` checkpoints and stops at the end of the step during which SIGINT or SIGTERM
    arrives (`traac.training.interrupt`); `interrupted` then names the signal. A run that starts
    (or resumes) at step N first drops the lines of `metrics.jsonl` after step N: those steps are
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
        funcs = self.rewards.funcs
        self.peer: PeerRewards | None = None
        if args.peer_mode:
            self.peer = PeerRewards(
                args.peer_settings(),
                verdicts=self.rewards.verdicts,
                num_generations=args.num_generations,
                gather=gather_object,
            )
            funcs = [*funcs, self.peer.func]
        if args.mode == "l1_max" and train_dataset is not None:
            train_dataset = with_length_budgets(train_dataset, args.peer_settings(), args.seed)
        super().__init__(model, reward_funcs or funcs, args, train_dataset, **kwargs)
        if self.peer is not None:
            self.peer.rank = self.accelerator.process_index
        self.tokenizer = self._tokenizer
        self.chat_format: ChatFormat = args.resolve(self.tokenizer)
        self.rewards.chat_format = self.chat_format  # known once TRL has the tokenizer
        self.uniformities: deque[float] = deque(maxlen=args.calibration_window)
        self.last_step: TraacStep | None = None
        self._columns: StepColumns | None = None
        self._dropped: list[bool] | None = None  # this batch's rows masked by dynamic sampling
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
        """The model the probe runs through: the frozen reference model, or the policy (always
        for the confidence scorer, which reads the policy's own sampling distribution).

        With `beta=0` TRL keeps no reference model; TRAAC then loads its own frozen copy of the
        initial policy (the paper's scoring model), which costs one model's memory; choose
        `scoring_model: policy` to avoid it.
        """
        if self.args.scorer in ("random", "confidence") or self.args.scoring_model == "policy":
            return None  # random reads no model; the policy is looked up at each step
        if hasattr(self.model, "peft_config"):
            raise TraacError("TRAACTrainer: PEFT models are not supported yet")
        if self.ref_model is not None:
            return self.accelerator.unwrap_model(self.ref_model)
        logger.warning(
            "TRAAC: beta=0 leaves TRL without a reference model; loading a frozen copy of the "
            "initial policy to score steps (set scoring_model=policy to score with the policy)."
        )
        frozen = AutoModelForCausalLM.from_pretrained(
            get_config_model_id(self.model.config), dtype=self.model.dtype
        )
        frozen.requires_grad_(False)
        return frozen.to(self.accelerator.device).eval()

    def _build_compressor(self) -> Compressor:
        args = self.args
        model = self._scoring_model or self.accelerator.unwrap_model(self.model)
        layers = args.resolved_probe_layers(model.config.get_text_config().model_type)
        settings = copy.copy(args)
        settings.probe_layers = layers
        return build_compressor(settings, model, self.tokenizer, self.chat_format, seed=args.seed)

    # ================================================================ TRL adapter
    # Every override of a TRL hook and every private TRL attribute this trainer touches.

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        """TRL's, then dynamic sampling's mask. Resampling replaces rows of `inputs` in place,
        and their prompt ids in the list TRL tokenized, so TRL scores and trains on the
        resampled prompts."""
        self._rows = inputs  # the dataset rows of this batch, one per rollout
        self._dropped = None
        try:
            output = super()._generate_and_score_completions(inputs)
        finally:
            self._rows = None
        dropped, self._dropped = self._dropped, None
        return output if dropped is None else self._mask_dropped(output, dropped)

    def _mask_dropped(self, output: dict[str, Any], dropped: list[bool]) -> dict[str, Any]:
        """Dropped rows contribute nothing to the loss (policy term and KL): their completion
        mask and advantages are zeroed and the token count TRL normalises by is recounted
        (every process calls this, so the gather matches)."""
        mask = output["completion_mask"]
        keep = torch.tensor([not d for d in dropped], device=mask.device)
        output["completion_mask"] = mask * keep.unsqueeze(1).to(mask.dtype)
        output["advantages"] = output["advantages"] * keep.to(output["advantages"].dtype)
        output["num_items_in_batch"] = self.accelerator.gather(
            output["completion_mask"].sum()
        ).sum()
        return output

    def _generate_single_turn(
        self,
        prompt_ids: list[list[int]],
        images: Any,
        multimodal_fields: dict,
        num_generations: int,
        has_tool_images: bool = False,
    ) -> tuple[list[list[int]], list[list[float]] | None]:
        rows = getattr(self, "_rows", None)
        if rows is None:  # a nested call (answer regeneration) or no batch context
            return super()._generate_single_turn(
                prompt_ids, images, multimodal_fields, num_generations, has_tool_images
            )
        self._seconds = defaultdict(float)
        with self._phase("generate"):
            completion_ids, logprobs = super()._generate_single_turn(
                prompt_ids, images, multimodal_fields, num_generations, has_tool_images
            )
        self._rows = None
        try:
            pooled = self.traac_step(rows, prompt_ids, completion_ids, logprobs, num_generations)
        finally:
            self._rows = rows
        ids = [r.completion_ids for r in pooled]
        return ids, None if logprobs is None else [r.logprobs for r in pooled]

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        """TRL's reward call on copies of the rows that carry this step's verdicts, bins and
        compression flags. Evaluation batches score against a copy of the length windows, so
        only training steps advance them. `prompts` is TRL's list: resampled rows' prompts are
        written into it, so its logs show what was trained on."""
        prompts[:] = [row["prompt"] for row in inputs]
        columns, self._columns = self._columns, None
        if columns is not None:
            inputs = [
                {**row, "correct": ok, "difficulty_bin": b, "compressed": c}
                for row, ok, b, c in zip(
                    inputs, columns.correct, columns.difficulty_bin, columns.compressed, strict=True
                )
            ]
        if self.model.training:
            rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
            if self.last_step is not None:
                self._log_step(self.last_step, rewards)
            return rewards
        windows = self.rewards.windows
        self.rewards.windows = copy.deepcopy(windows)
        try:
            return super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        finally:
            self.rewards.windows = windows

    def _sample_answers(
        self, prompts: list[list[int]], budget: int
    ) -> tuple[list[list[int]], list[list[float]] | None]:
        """One answer per prompt from TRL's generation backend, capped at `budget` tokens."""
        with self._max_new_tokens(budget):
            return super()._generate_single_turn(prompts, None, {}, 1)

    def _prompt_ids(self, prompts: list[Any]) -> list[list[int]]:
        """Token ids of dataset prompts, exactly as TRL tokenizes them for generation."""
        if not prompts:
            return []
        ids, _, _ = self._tokenize_prompts(prompts)
        return [list(x) for x in ids]

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

    @contextmanager
    def _phase(self, name: str) -> Iterator[None]:
        """Time a part of the step: TRL's profiling (report_to) and this step's telemetry."""
        with profiling_context(self, f"traac.{name}"):
            begin = time.perf_counter()
            yield
            self._seconds[name] += time.perf_counter() - begin

    def _log_step(self, step: TraacStep, rewards_per_func: torch.Tensor) -> None:
        """The step's telemetry into TRL's metrics (so report_to sees it) and a JSONL."""
        rewards = rewards_per_func.detach().float().cpu().numpy()
        stats = step_stats(
            step,
            self.difficulty.bins,
            self.tokenizer,
            self.chat_format,
            self.eos_token_ids,
            dict(self._seconds),
            {
                name: float(np.nanmean(rewards[:, k]))
                for k, name in enumerate(self.reward_func_names)
            },
            self.args.dynamic_sampling,
        )
        step.stats = stats
        for key, value in stats.flat().items():
            self._metrics["train"][key].append(value)
        if self.accelerator.is_main_process:
            append_metrics(self.args.output_dir, stats)

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

    # ================================================================ the TRAAC step

    def traac_step(
        self,
        rows: list[dict[str, Any]],
        prompt_ids: list[list[int]],
        completion_ids: list[list[int]],
        logprobs: list[list[float]] | None,
        n: int,
    ) -> list[Rollout]:
        """SPEC section 1, steps 2-6, on this process's sampled rollouts (dataset rows, prompt and
        completion token ids, sampling log-probs if any, `n` per prompt): verify, resample
        (dynamic sampling), bin, compress, re-answer, pool, drop. Returns this process's slice
        of the pooled groups; `last_step` holds all of them. Compression and dynamic sampling
        run only while the model is in training mode. Resampling replaces entries of `rows`
        and `prompt_ids` in place (they are TRL's lists)."""
        offset = self.accelerator.process_index * len(rows)
        items = [item_from_row(row) for row in rows]
        local = self._rollouts(items, completion_ids, logprobs, offset)
        originals: list[Rollout] = gather_object(local)
        n_groups = len(originals) // n
        sampling = self.args.dynamic_sampling if self.model.training else "none"
        resampled, rounds = [0] * n_groups, 0
        if sampling == "resample":
            originals, resampled, rounds = self._resample(
                rows, items, prompt_ids, local, originals, n, offset
            )
        sources: list[str] = gather_object([item.data_source for item in items])
        pass_rates = [
            sum(r.correct for r in originals[g * n : (g + 1) * n]) / n for g in range(n_groups)
        ]
        bins = [self.difficulty.bin_of(p) for p in pass_rates]

        compressions: list[Compression] = []
        compressed: list[Rollout] = []
        if self.model.training and self.args.compresses:
            mine = self._compress(local, [bins[r.origin // n] for r in local], prompt_ids, offset)
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
        for group, count in zip(groups, resampled, strict=True):
            group.resampled = count
            # Correctness alone decides: a group whose verdicts all agree has no GRPO signal
            # on correctness, whatever its shaped rewards say.
            group.dropped = sampling != "none" and len({r.correct for r in group.pooled}) == 1
        pooled = [r for g in groups for r in g.pooled]
        self.last_step = TraacStep(self.state.global_step + 1, groups, resample_rounds=rounds)
        mine = pooled[offset : offset + len(rows)]
        self._columns = StepColumns(
            correct=[r.correct for r in mine],
            difficulty_bin=[groups[(offset + i) // n].bin for i in range(len(mine))],
            compressed=[r.compressed for r in mine],
        )
        if sampling != "none":
            self._dropped = [groups[(offset + i) // n].dropped for i in range(len(mine))]
        return mine

    def _resample(
        self,
        rows: list[dict[str, Any]],
        items: list[Item],
        prompt_ids: list[list[int]],
        local: list[Rollout],
        originals: list[Rollout],
        n: int,
        offset: int,
    ) -> tuple[list[Rollout], list[int], int]:
        """DAPO's dynamic sampling: while some groups' verdicts all agree (at most
        `max_resample_rounds` times), give each such group a training prompt drawn at random
        (seeded by seed, step and round, so every process draws the same) and sample its N
        rollouts afresh; each process samples the rows it holds. `rows`, `items`,
        `prompt_ids` and `local` are updated in place. Returns the gathered originals, how
        often each group was replaced, and the rounds run."""
        n_groups = len(originals) // n
        replaced = [0] * n_groups
        rounds = 0
        for round_ in range(1, self.args.max_resample_rounds + 1):
            todo = [
                g
                for g in range(n_groups)
                if len({r.correct for r in originals[g * n : (g + 1) * n]}) == 1
            ]
            if not todo:
                break
            rng = np.random.default_rng([self.args.seed, self.state.global_step, round_])
            picks = rng.integers(len(self.train_dataset), size=len(todo))
            fresh = {g: dict(self.train_dataset[int(k)]) for g, k in zip(todo, picks, strict=True)}
            mine = [i for i in range(len(rows)) if (offset + i) // n in fresh]
            for i in mine:
                rows[i] = dict(fresh[(offset + i) // n])
                items[i] = item_from_row(rows[i])
            new_ids = self._prompt_ids([rows[i]["prompt"] for i in mine])
            for i, ids in zip(mine, new_ids, strict=True):
                prompt_ids[i] = ids
            with self._phase("resample"):
                outputs = self._generate_padded(
                    [prompt_ids[i] for i in mine], self.max_completion_length, prompt_ids[0]
                )
            new = self._rollouts(
                [items[i] for i in mine],
                [ids for ids, _ in outputs],
                None if not outputs or outputs[0][1] is None else [lp for _, lp in outputs],
                0,
            )
            for i, rollout in zip(mine, new, strict=True):
                rollout.origin = offset + i
                local[i] = rollout
            originals = gather_object(local)
            for g in todo:
                replaced[g] += 1
            rounds = round_
        return originals, replaced, rounds

    def _rollouts(
        self,
        items: Sequence[Item],
        completion_ids: Sequence[list[int]],
        logprobs: Sequence[list[float] | None] | None,
        origin: int,
    ) -> list[Rollout]:
        """Decode, parse and verify rollouts (`origin`: global index of the first)."""
        if not completion_ids:
            return []
        texts = self.tokenizer.batch_decode(completion_ids, skip_special_tokens=True)
        with self._phase("verify"):
            correct = verify_many(items, texts, think_close=self.chat_format.think_close)
        logprobs = logprobs if logprobs is not None else [None] * len(texts)
        out = []
        for i, (ids, lp, text, ok) in enumerate(
            zip(completion_ids, logprobs, texts, correct, strict=True)
        ):
            parsed = self.chat_format.parse(text)
            out.append(
                Rollout(list(ids), lp, text, ok, parsed.well_formed, parsed.closed, origin + i)
            )
        return out

    def _compress(
        self,
        local: list[Rollout],
        bins: list[str],
        prompt_ids: list[list[int]],
        offset: int,
    ) -> list[Compression]:
        """Score, calibrate and evict this process's correct, well-formed rollouts (every
        scored candidate is returned; those that lost steps carry their new think block)."""
        assert self.compressor is not None
        todo = [
            (r, self.difficulty.tau_of(b))
            for r, b in zip(local, bins, strict=True)
            if r.correct and r.well_formed
        ]
        reasonings = [self.chat_format.parse(r.text).reasoning for r, _ in todo]
        contexts = [self._context(prompt_ids[r.origin - offset]) for r, _ in todo]
        if self._collective_forwards:  # as many scoring forwards as every other process
            real = sum(bool(r.strip()) for r in reasonings)
            pad = max(gather_object([real])) - real
            reasonings += [FILLER_REASONING] * pad
            contexts += [self._context(prompt_ids[0])] * pad
        with self._phase("score"), self._scoring_mode():
            traces = self.compressor.score(reasonings, contexts)[: len(todo)]
        scored = [(r, tau, t) for (r, tau), t in zip(todo, traces, strict=True) if t.steps]
        # Calibration ranks against every process's uniformities of this step and recent ones.
        fresh: list[float] = gather_object([t.uniformity for _, _, t in scored])
        if self.args.uniformity_calibration == "rank":
            self.uniformities.extend(fresh)
        out = []
        for rollout, tau, trace in scored:
            compression = self._evict(rollout.origin, trace, tau)
            if compression.result.compressed:
                prefix = self.chat_format.answer_prefix(compression.result.text)
                ids = self.tokenizer(prefix, add_special_tokens=False)["input_ids"]
                # A think block that leaves no room for an answer is not used.
                compression.prefix_ids = ids if len(ids) < self.max_completion_length else []
            out.append(compression)
        return out

    def _context(self, prompt_ids: list[int]) -> str:
        """What the policy read before the reasoning: the prompt and, where the response opens
        the block, the opener (the confidence scorer's input)."""
        prompt = self.tokenizer.decode(prompt_ids, skip_special_tokens=False)
        return prompt if self.chat_format.opener_in_prompt else prompt + self.chat_format.think_open

    def _evict(self, origin: int, trace: ScoredTrace, tau: float) -> Compression:
        """The eviction rule, with the uniformity replaced by its rank among recent ones when
        the rank calibration is on."""
        assert self.compressor is not None
        rank = None
        if self.args.uniformity_calibration == "rank":
            rank = uniformity_rank(trace.uniformity, self.uniformities)
        return Compression(origin, self.compressor.evict(trace, tau, rank), tau, rank)

    @property
    def _collective_forwards(self) -> bool:
        """Whether each forward is a collective across processes (FSDP, ZeRO-3): then every
        process must run as many as the others, or the run deadlocks."""
        if self.accelerator.num_processes == 1:
            return False
        if is_deepspeed_zero3_enabled():
            return True
        models = (self.model_wrapped, self.model, self.ref_model, self._scoring_model)
        return any(m is not None and _sharded(m) for m in models)

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

        The token budget keeps every compressed rollout within `max_completion_length`.
        """
        shortest = gather_object([min(prefix_lengths)] if prefix_lengths else [])
        if not shortest:
            return []
        with self._phase("regenerate"):
            sampled = self._generate_padded(
                prompts, self.max_completion_length - min(shortest), filler
            )
        out = []
        for (ids, lps), prefix_length in zip(sampled, prefix_lengths, strict=True):
            limit = self.max_completion_length - prefix_length
            out.append((list(ids[:limit]), None if lps is None else list(lps[:limit])))
        return out

    def _generate_padded(
        self, prompts: list[list[int]], budget: int, filler: list[int]
    ) -> list[tuple[list[int], list[float] | None]]:
        """One completion per prompt, up to `budget` tokens, as (ids, sampling log-probs or
        None). Every process calls it; vLLM and sharded models (every forward a collective) need
        the same number of prompts on every process, so those are padded with `filler` (and the
        padding dropped)."""
        counts = gather_object([len(prompts)])
        if max(counts) == 0:
            return []
        batch = list(prompts)
        if self.use_vllm or self._collective_forwards:
            batch += [filler] * (max(counts) - len(prompts))
        if not batch:
            return []
        ids, logprobs = self._sample_answers(batch, budget)
        return [
            (list(ids[k]), None if logprobs is None else list(logprobs[k]))
            for k in range(len(prompts))
        ]

    def _compressed_rollouts(
        self,
        items: Sequence[Item],
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


def step_stats(
    step: TraacStep,
    bins: Sequence[str],
    tokenizer: Any,
    chat_format: ChatFormat,
    eos_ids: Sequence[int],
    seconds: dict[str, float],
    rewards: dict[str, float],
    sampling: str = "none",
) -> StepStats:
    """The telemetry of one step: the pooled group and each difficulty bin; with dynamic
    `sampling` (drop or resample) the groups dropped per scope, with resample what it did."""
    close_ids = tokenizer.encode(chat_format.think_close, add_special_tokens=False)
    stop = set(eos_ids)

    def view(r: Rollout) -> RolloutView:
        ids = r.completion_ids
        body = ids[:-1] if ids and ids[-1] in stop else ids
        think = think_tokens_from_ids(body, close_ids) if close_ids else None
        answer = 0 if think is None else len(body) - think - len(close_ids)
        return RolloutView(
            correct=r.correct,
            closed=r.closed,
            clipped=not ids or ids[-1] not in stop,
            compressed=r.compressed,
            response_tokens=len(ids),
            think_tokens=len(body) if think is None else think,
            answer_tokens=answer,
        )

    def scope(groups: Sequence[Group]) -> Any:
        candidates = [c for g in groups for c in g.compressions]
        return scope_stats(
            [g.pass_rate for g in groups],
            [view(r) for g in groups for r in g.pooled],
            [c.result for c in candidates],
            [c.result for c in candidates if c.used],
            sum(g.dropped for g in groups) if sampling != "none" else None,
        )

    scopes = {ALL: scope(step.groups)}
    for name in bins:
        scopes[name] = scope([g for g in step.groups if g.bin == name])
    counts = {}
    if sampling == "resample":
        counts = {
            "resampled_groups": float(sum(g.resampled for g in step.groups)),
            "resample_rounds": float(step.resample_rounds),
        }
    return StepStats(step.step, scopes, seconds, rewards, counts)


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
