"""`TRAACTrainer`: TRL's `GRPOTrainer` running the TRAAC step (docs/method.md#step).

TRL keeps the GRPO loss, the KL term, the generation backends (transformers, vLLM),
accelerate/DeepSpeed, logging and checkpointing. The step's records and decisions (verify, bin,
select, evict, pool, drop) are `traac.training.step.phases`; their order, and the work that crosses
processes (resampling, the scoring forwards, the re-answers after compressed think blocks), is
`traac.training.step.driver`, which reaches the run through the `StepHost` Protocol
(`traac.training.step.host`). This trainer is that host over TRL: its generation backend (vLLM woken
once per step), its tokenization, its processes, its training set, the probe's model; and it
hands the step's result to TRL's scoring and loss. The step is one value (`StepResult`), made
and consumed inside one TRL hook; each process keeps its slice of the pooled batch, which TRL
scores and trains on in full.

The TRL and transformers hooks overridden, what changes, and why:

- `_generate_and_score_completions` -> runs the step on TRL's rows before TRL's own body, which
  then scores and prepares the step's pooled rollouts (new rows, resampled prompts included,
  carrying the step's verdicts, bins and compression flags); TRL's `rollout_func`, bound for
  that one call, hands it the pooled ids; afterwards the telemetry, and the loss mask on the
  rows the step leaves out (`StepResult.left_out`) -> the pooled group must be what GRPO
  normalises and trains on, and TRL has no hook between its generation and its scoring that
  sees the rows.
- `_calculate_rewards` -> the step's keep phase: the method's filter (GFPO) chooses on the
  rewards, and a left-out row's rewards become NaN, out of the group means and the batch's
  standard deviation (advantage 0); the choice and the rewards go to the step's result ->
  dynamic sampling drops a group before the normalisation, as DAPO does; masking it afterwards
  would leave its rewards in the batch scale of every other group (`scale_rewards: batch`).
- `_get_per_token_logps_and_entropies` -> each chunk of rows is cut to the columns its rows
  use before TRL's forward (`traac.training.trl_adapter.padding`) -> TRL pads every rollout to the
  longest of the generation batch, and a micro-batch of short rollouts would pay for the longest in
  its reference, loss and backward passes.
- `evaluation_loop` (transformers', `HeldOutEvaluation`) -> adds per-tier accuracy and lengths
  of the evaluation's rollouts, summed from TRL's eval metrics -> TRL's eval metrics are
  per-batch means, not per-tier counts.
- `_save_checkpoint` / `_load_optimizer_and_scheduler` -> save and restore the length windows,
  the calibration window and the peer method's state (Laser-D's targets) with TRL's state
  -> a resumed run must reward as the run would have.
- `train` (public) -> SIGINT/SIGTERM become checkpoint-and-stop.

Every use of TRL's private API is in the section marked "TRL adapter" below, and named in
`traac.training.trl_adapter.trl_api` (the rollout mask key the copies write:
`traac.training.step.copy_rules`), which the contract test
(`tests/training/trl_adapter/test_trl_contract.py`) checks against the installed TRL: each hook's
signature and each attribute.
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch
from accelerate.logging import get_logger
from accelerate.utils import gather_object
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, get_last_checkpoint
from trl import GRPOTrainer
from trl.extras.profiling import profiling_context
from trl.models import unwrap_model_for_generation

from traac.common.outputs import writable_dir
from traac.compression.compression import Compressor
from traac.compression.formats import ChatFormat
from traac.compression.rewards import LengthWindows
from traac.errors import TraacError
from traac.training.methods.hooks import MethodHooks
from traac.training.methods.traac_rewards import EVALUATION_COLUMN, TraacRewards
from traac.training.planning.effects import config_unread, describe
from traac.training.planning.extra_rewards import given_rewards, with_extra_rewards
from traac.training.planning.lora import as_reference, keep_4bit_trainable
from traac.training.planning.traac_config import TRAACConfig
from traac.training.step.compressor import (
    StepCompressor,
    check_probe_layers_of,
    collective_forwards,
    probe_compressor,
    probe_model,
)
from traac.training.step.driver import StepDriver
from traac.training.step.phases import STEP_COLUMN, StepResult, TraacStep, reward_means, step_stats
from traac.training.step.rounds import generation_group
from traac.training.telemetry.step_stats import MetricsFromStart, StepClock, append_metrics
from traac.training.trl_adapter.checkpoint import (
    check_resumable,
    load_state,
    load_traac_state,
    save_state,
    traac_state,
)
from traac.training.trl_adapter.final_model import FinalModel
from traac.training.trl_adapter.held_out import HeldOutEvaluation
from traac.training.trl_adapter.interrupt import StopOnSignal
from traac.training.trl_adapter.left_out import leave_out, mask_rows
from traac.training.trl_adapter.padding import trimmed_forward
from traac.training.trl_adapter.rollouts import refill_rollouts
from traac.training.trl_adapter.trainer_inputs import check_inputs, trainer_inputs

logger = get_logger(__name__)


class TRAACTrainer(FinalModel, HeldOutEvaluation, GRPOTrainer):
    """GRPO with difficulty-aware attentive compression of correct rollouts (TRAAC).

    Arguments are `GRPOTrainer`'s; `args` is a `TRAACConfig`, `model` may be a name traac knows
    (`testbed`, `smollm2`, a `.gguf` file) and rows have TRL's or open-r1's layout: `prompt` with
    `answer` or `solution` (`traac.training.trl_adapter.trainer_inputs`). `reward_funcs` add to the
    method's rewards (`traac.training.methods.hooks`); a finished `train()` saves the model to
    `output_dir`. `last_step` holds the groups of the latest step (originals, compressions, pooled
    rollouts) and its telemetry, which also goes to TRL's logs and to `metrics.jsonl` in
    `output_dir`; it is there for inspection, and no hook reads it (each step is a `StepResult`
    passed on).

    `train()` checkpoints and stops at the end of the step during which SIGINT or SIGTERM
    arrives (`traac.training.trl_adapter.interrupt`); `interrupted` then names the signal. A run
    resumed at step N redoes the steps after N, each once in `metrics.jsonl` (`MetricsFromStart`).
    """

    def __init__(
        self,
        model: Any,
        reward_funcs: Any = None,
        args: TRAACConfig | None = None,
        train_dataset: Any = None,
        **kwargs: Any,
    ) -> None:
        args = TRAACConfig(output_dir="traac-output") if args is None else args
        if not isinstance(args, TRAACConfig):
            raise TraacError("TRAACTrainer: args must be a TRAACConfig")
        for unsupported in ("tools", "environment_factory", "rollout_func"):
            if kwargs.get(unsupported) is not None:
                raise TraacError(f"TRAACTrainer: {unsupported} is not supported")
        # What needs no model, checked before `trainer_inputs` resolves it (a build, a download)
        check_inputs(model, train_dataset, kwargs.get("eval_dataset"))
        writable_dir(args.output_dir, "output_dir")  # transformers makes it in Trainer.__init__
        reward_funcs = given_rewards(reward_funcs)
        self.difficulty = args.difficulty_config()
        self.rewards = TraacRewards(
            args.reward_config(),
            difficulty=self.difficulty,
            windows=LengthWindows(args.length_window_steps),
            num_generations=args.num_generations,
            gather=gather_object,
        )
        self.base_model_name = model if isinstance(model, str) else None  # for the card
        self.method = MethodHooks(
            args.mode_spec, self.rewards, args.method_run(), args.num_generations, gather_object
        )
        # + the caller's, the recipe's
        funcs = with_extra_rewards(self.method.reward_funcs, args, reward_funcs)
        model, train_dataset, kwargs = trainer_inputs(model, args, train_dataset, kwargs)
        check_probe_layers_of(args, model)  # config.json alone, before TRL loads the weights
        super().__init__(model, funcs, args, train_dataset, **kwargs)
        keep_4bit_trainable(self.model)  # before any forward in eval mode (probe, evaluation)
        if not args.settings_noted:  # what a caller set that this mode never reads
            for line, _ in describe(config_unread(args)):
                logger.warning(f"TRAACTrainer: {line}")
        self.tokenizer = self._tokenizer
        self.refill = refill_rollouts(
            args, self.eos_token_ids, self.tokenizer.pad_token_id, self.accelerator.process_index
        )
        self.chat_format: ChatFormat = args.resolve(self.tokenizer)
        self.rewards.chat_format = self.chat_format  # known once TRL has the tokenizer
        self.method.bind(
            self.tokenizer, self.chat_format, args.split_phrases, self.accelerator.process_index
        )
        self.prefill = self.method.prefill(self.tokenizer)  # AdaptThink's empty think blocks
        compression = args.traac_settings  # read only by a mode that compresses
        self.uniformities: deque[float] = deque(maxlen=compression.calibration_window)
        self.last_step: TraacStep | None = None
        self.probe = probe_model(args, self.model, self.ref_model, self.accelerator)
        self.compressor = self._build_compressor() if self.method.compresses else None
        step_compressor = None
        if self.compressor is not None:
            rank = compression.ranks_uniformity
            step_compressor = StepCompressor(
                self.compressor, self.chat_format, self.tokenizer, self.max_completion_length,
                gather_object, self.uniformities if rank else None,
                compression.compression_kind, compression.copies,
            )  # fmt: skip
        self.driver = StepDriver(
            self, tokenizer=self.tokenizer, chat_format=self.chat_format,
            difficulty=self.difficulty, compressor=step_compressor,
            max_completion_length=self.max_completion_length, seed=args.seed,
            dynamic_sampling=args.dynamic_sampling, max_resample_rounds=args.max_resample_rounds,
            masks_copy_think=compression.copies.masks_think,
        )  # fmt: skip
        self.stop_on_signal = StopOnSignal()
        self.add_callback(self.stop_on_signal)
        self.add_callback(MetricsFromStart())

    def train(self, *args: Any, **kwargs: Any) -> Any:
        """`Trainer.train`, with SIGINT/SIGTERM turned into checkpoint-and-stop; then the
        parameter gathers still in flight released (`release_gathers`). A checkpoint to resume
        from must have trained with these settings (`check_resumable`), as `traac train`
        checks before loading any weight."""
        resume = kwargs.get("resume_from_checkpoint", args[0] if args else None)
        if resume is True:  # transformers' way of saying the newest in output_dir
            resume = get_last_checkpoint(self.args.output_dir)
        if isinstance(resume, str):
            check_resumable(resume, self.args)
        with self.stop_on_signal.installed():
            output = super().train(*args, **kwargs)
        self.release_gathers()
        return output

    def release_gathers(self) -> None:
        """Wait for and release each ZeRO-3 engine's parameter all-gathers still in flight
        (prefetched for a forward that never came), through DeepSpeed's
        `empty_partition_cache`. Left to interpreter exit, gloo's worker thread frees them
        during finalisation and a process aborts (SIGABRT, "terminate called without an active
        exception") after a run that succeeded."""
        models = (self.model_wrapped, self.ref_model, self.probe.model)
        engines = {id(m): m for m in models if hasattr(m, "empty_partition_cache")}
        for engine in engines.values():
            engine.empty_partition_cache()

    @property
    def interrupted(self) -> int | None:
        """The signal the last `train()` stopped for (checkpoint saved), else None."""
        return self.stop_on_signal.stopped

    # ---------------------------------------------------------------- set-up

    def _build_compressor(self) -> Compressor:
        model = self.accelerator.unwrap_model(self.probe.model or self.model)
        return probe_compressor(self.args, self.probe, model, self.tokenizer, self.chat_format)

    # ================================================================ TRL adapter
    # Every override of a TRL hook and every private TRL attribute this trainer touches.

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        """The TRAAC step on TRL's rows (`_sampled_step`), then TRL's scoring of its pooled
        rollouts, which TRL's `rollout_func` hands over (`_rollout_of`); then the telemetry,
        and the loss mask on the rows the step leaves out (`StepResult.left_out`: dynamic
        sampling's dropped rows, GFPO's filtered ones). TRL's rows are left as they were: it
        scores and trains on new rows, resampled prompts included, with the step's columns."""
        step = self._sampled_step(inputs)
        extra = None if self.model.training else {EVALUATION_COLUMN: True}
        with self._rollout_of(step):
            output = super()._generate_and_score_completions(step.reward_rows(extra))
        if not self.model.training:
            self.record_held_out(step.record)
            self.method.take_logged()  # TRL logged them as eval metrics; not the next step's
            return output
        # TRL's advantages of every process's rows, in pooled order (this process's in `output`)
        step.advantages = self.accelerator.gather(output["advantages"]).tolist()
        self._log_step(step)
        left_out = step.left_out  # every process's rows: every process decides alike
        if not any(left_out):
            return output
        count, rank = len(step.rollouts), self.accelerator.process_index
        return self._mask_dropped(output, left_out[rank * count : (rank + 1) * count])

    def _calculate_rewards(
        self,
        inputs: list[dict[str, Any]],
        prompts: list[Any],
        completions: list[Any],
        completion_ids_list: list[list[int]],
    ) -> torch.Tensor:
        """TRL's rewards of every process's rows, the left-out ones NaN
        (`traac.training.trl_adapter.left_out`): the step's dropped rows and those the method's
        filter (GFPO) does not keep, which it records in the step's result (`StepResult.filtered`,
        the rows' `STEP_COLUMN`) with the rewards."""
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        step: StepResult | None = inputs[0].get(STEP_COLUMN) if inputs else None
        if step is None:
            return rewards
        retain = lengths = None
        if self.method.retain is not None and self.model.training:
            retain = self.method.retain
            lengths = self.accelerator.gather(
                torch.tensor([len(x) for x in completion_ids_list], device=rewards.device)
            )
        step.filtered = leave_out(rewards, step.every_dropped, retain, lengths, self.reward_weights)
        step.rewards = rewards.detach().cpu().numpy().copy()
        return rewards

    def _get_per_token_logps_and_entropies(
        self,
        model: Any,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        logits_to_keep: int,
        batch_size: int | None = None,
        compute_entropy: bool = False,
        compute_aux_loss: bool = False,
        **media: Any,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """TRL's forward on each chunk cut to the columns its rows use
        (`traac.training.trl_adapter.padding`); multimodal inputs, indexed by image rather than by
        row, go to TRL's as they are."""
        parent = super()._get_per_token_logps_and_entropies
        if any(value is not None for value in media.values()):
            return parent(model, input_ids, attention_mask, logits_to_keep, batch_size,
                          compute_entropy, compute_aux_loss, **media)  # fmt: skip

        def forward(ids: torch.Tensor, mask: torch.Tensor, keep: int) -> Any:
            return parent(model, ids, mask, keep, None, compute_entropy, compute_aux_loss)

        return trimmed_forward(
            forward, input_ids, attention_mask, logits_to_keep, batch_size, self.args.logprob_rows
        )

    def _sampled_step(self, inputs: list[dict[str, Any]]) -> StepResult:
        """N rollouts of each row's prompt from TRL's generation backend, then the step."""
        n = self.num_generations if self.model.training else self.num_generations_eval
        clock = StepClock(self)
        prompt_ids, images, multimodal_fields = self._tokenize_prompts(
            [r["prompt"] for r in inputs]
        )
        prefill = self.prefill if self.model.training else None
        with self._vllm_awake():  # every generation round of the step on one wake-up
            with clock.phase("generate"):
                completion_ids, logprobs = self._backend_generate(
                    prefill.prompts(prompt_ids, n) if prefill else prompt_ids,
                    images, multimodal_fields, n,
                )  # fmt: skip
                if prefill is not None:
                    completion_ids, logprobs = prefill.completions(completion_ids, logprobs, n)
            return self.traac_step(inputs, prompt_ids, completion_ids, logprobs, n, clock)

    @contextmanager
    def _rollout_of(self, step: StepResult) -> Iterator[None]:
        """For one `_generate_and_score_completions` call, TRL's generation (`_generate`, which
        calls `rollout_func` in place of its backend) returns the step's pooled rollouts."""

        def pooled(prompts: list[Any], trainer: Any) -> dict[str, Any]:
            if len(prompts) != len(step.prompt_ids):
                raise TraacError(f"TRL asked for {len(prompts)} rollouts of a step that pooled "
                                 f"{len(step.prompt_ids)}")  # fmt: skip
            return step.rollout_output()

        self.rollout_func = pooled
        try:
            yield
        finally:
            self.rollout_func = None

    def _mask_dropped(self, output: dict[str, Any], dropped: list[bool]) -> dict[str, Any]:
        """The left-out rows out of the loss (`traac.training.trl_adapter.left_out.mask_rows`)."""
        return mask_rows(output, dropped, self.accelerator.gather)

    def sample_answers(
        self, prompts: list[list[int]], budget: int
    ) -> tuple[list[list[int]], list[list[float]] | None]:
        """One answer per prompt from TRL's generation backend, capped at `budget` tokens."""
        with self._max_new_tokens(budget):
            return self._backend_generate(prompts, None, {}, 1)

    def _backend_generate(
        self, prompt_ids: list[list[int]], *rest: Any
    ) -> tuple[list[list[int]], list[list[float]] | None]:
        """TRL's generation backend, or traac's refilled decoding (`rollout_batching: refill`,
        `traac.training.trl_adapter.rollouts`) in the autocast of the run's forwards.

        Refilled, each process decodes its rows alone, as many steps as its longest row takes,
        so no decoding forward may be a collective: under ZeRO-3 the policy decodes inside TRL's
        own generation context, its parameters gathered for the whole round (one collective in,
        one out, which every process reaches: the driver matches their rounds)."""
        if self.refill is None:
            return self._generate_single_turn(prompt_ids, *rest)
        budget = self.generation_config.max_new_tokens
        args = self.args  # ds3_gather_for_generation False is refused (`check_refill`)
        with (
            unwrap_model_for_generation(
                self.model_wrapped,
                self.accelerator,
                gather_deepspeed3_params=args.ds3_gather_for_generation,
                gradient_checkpointing_kwargs=args.gradient_checkpointing_kwargs,
            ) as model,
            torch.no_grad(),
            self.accelerator.autocast(),
        ):
            return self.refill(model, prompt_ids, budget, self.state.global_step), None

    def prompt_ids(self, prompts: list[Any]) -> list[list[int]]:
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
        saved = self.generation_config, self.generation_kwargs
        config = copy.deepcopy(self.generation_config)  # TRL's own config is left as it is
        config.max_new_tokens = budget
        self.generation_config = config
        self.generation_kwargs = {**self.generation_kwargs, "max_new_tokens": budget}
        try:
            yield
        finally:
            self.generation_config, self.generation_kwargs = saved

    @contextmanager
    def _vllm_awake(self) -> Iterator[None]:
        """A step's generation rounds on colocated vLLM in sleep mode. TRL's `generate` wakes the
        engine, pushes every weight again (level-2 sleep discards them) and sleeps after each
        call; here the weights are pushed and the engine woken once for the step's sampling,
        resampling and re-answers, and put to sleep after the last."""
        args = self.args
        if not (self.use_vllm and args.vllm_mode == "colocate" and args.vllm_enable_sleep_mode):
            yield
            return
        vllm = self.vllm_generation
        with profiling_context(self, "sync_weights"):
            vllm.sync_weights()  # wakes the weights up first, as TRL does
        self._last_loaded_step = self.state.global_step  # TRL's generation then skips its sync
        vllm.llm.wake_up(tags=["kv_cache"])
        vllm.enable_sleep_mode = False  # nor do its generate calls wake or sleep
        try:
            yield
        finally:
            vllm.enable_sleep_mode = True
            vllm.llm.sleep(level=2)
            # Weights discarded: the next step pushes them again on entry. TRL's `_generate`,
            # which only hands the pooled rollouts over (`_rollout_of`), must not push them now.
            self._last_loaded_step = self.state.global_step

    def _log_step(self, step: StepResult) -> None:
        """The step's telemetry into TRL's metrics (so report_to sees it) and a JSONL, with the
        mean of each reward over every process's rollouts (the step's rewards) but the left-out
        ones, which have none (NaN if every row was), and the rows' advantages."""
        if step.rewards is None:
            raise TraacError("the step was not rewarded: TRL's scoring skipped _calculate_rewards")
        rewards = np.asarray(step.rewards, dtype=np.float32).T  # one row per reward function
        stats = step_stats(
            step.record,
            self.difficulty.bins,
            self.tokenizer,
            self.chat_format,
            self.eos_token_ids,
            dict(step.seconds),
            reward_means(rewards, self.reward_func_names),
            self.args.dynamic_sampling,
            step.advantages,
        )
        step.record.stats = stats
        for key, value in stats.flat().items():
            self._metrics["train"][key].append(value)
        method = self.method.take_logged()  # every process: none carries into the next step
        if self.accelerator.is_main_process:
            append_metrics(self.args.output_dir, stats, method)

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        """TRL's checkpoint plus the TRAAC state (`traac.training.trl_adapter.checkpoint`)."""
        super()._save_checkpoint(model, trial)
        folder = Path(self._get_output_dir(trial=trial)) / (
            f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        )
        save_state(
            folder,
            self.traac_state_dict(),
            main=self.args.should_save,
            rank=self.accelerator.process_index,
            num_processes=self.accelerator.num_processes,
        )

    def _load_optimizer_and_scheduler(self, checkpoint: str | None) -> None:
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is not None:
            state = load_state(Path(checkpoint), self.accelerator.process_index)
            if state is not None:
                self.load_traac_state_dict(state)

    # ================================================================ the step's host
    # `StepHost` (`traac.training.step.host`) over this run, for the step's driver; what crosses
    # TRL's private API (`sample_answers`, `prompt_ids`) is in the adapter above.

    def traac_step(
        self,
        rows: list[dict[str, Any]],
        prompt_ids: list[list[int]],
        completion_ids: list[list[int]],
        logprobs: list[list[float]] | None,
        n: int,
        clock: StepClock | None = None,
    ) -> StepResult:
        """The TRAAC step on this process's sampled rollouts (`StepDriver.step`: dataset rows,
        prompt and completion token ids, sampling log-probs if any, `n` per prompt); its record
        also goes to `last_step`, for inspection. `clock` times the phases."""
        clock = StepClock(self) if clock is None else clock
        step = self.driver.step(rows, prompt_ids, completion_ids, logprobs, n, clock)
        self.last_step = step.record  # for inspection only: no hook reads it
        return step

    @property
    def rank(self) -> int:
        return self.accelerator.process_index

    @property
    def training(self) -> bool:
        return self.model.training

    @property
    def global_step(self) -> int:
        return self.state.global_step

    @property
    def collective_forwards(self) -> bool:
        """Whether each forward is a collective across processes (`collective_forwards`)."""
        models = (self.model_wrapped, self.model, self.ref_model, self.probe.model)
        return collective_forwards(self.accelerator.num_processes, models)

    @property
    def generation_group(self) -> int:
        """`traac.training.step.rounds.generation_group` for this run's backend."""
        mode = self.args.vllm_mode if self.use_vllm else None
        return generation_group(self.accelerator.num_processes, self.collective_forwards,
                                mode, self.args.vllm_tensor_parallel_size)  # fmt: skip

    @property
    def dataset_size(self) -> int:
        return len(self.train_dataset)

    def dataset_row(self, index: int) -> dict[str, Any]:
        return dict(self.train_dataset[index])

    def gather(self, values: list[Any]) -> list[Any]:
        return gather_object(values)

    @contextmanager
    def scoring(self, clock: StepClock | None = None) -> Iterator[None]:
        """Around the scoring forwards: their time, and the policy in eval mode (no dropout)
        when it is the scoring model, its adapters disabled when it stands for the reference."""
        policy = self.accelerator.unwrap_model(self.model)
        with (clock or StepClock(self)).phase("score"):
            if self.probe.model is not None or not self.args.traac_settings.scorer_kind.needs_model:
                yield
                return
            was_training = policy.training
            policy.eval()
            try:
                with as_reference(policy, self.probe.base):
                    yield
            finally:
                policy.train(was_training)

    # ---------------------------------------------------------------- checkpoints

    def traac_state_dict(self) -> dict[str, Any]:
        """What a resumed run needs beyond TRL's state (`traac.training.trl_adapter.checkpoint`)."""
        return traac_state(self.rewards.windows, self.uniformities, self.method, self.args)

    def load_traac_state_dict(self, state: dict[str, Any]) -> None:
        load_traac_state(state, self.rewards.windows, self.uniformities, self.method)
