"""Compression of one process's candidates within a step (docs/method.md#step, step 4).

The algorithm is `traac.compression.compression`; this is what a distributed step adds around it.
The scoring forwards are matched across processes: under FSDP or ZeRO-3 every forward is a
collective, so a process with fewer candidates scores filler traces until it has run as many
as the busiest, or the run deadlocks. The rank calibration ranks each uniformity against every
process's of this step and recent steps'. Each reasoning that lost steps becomes the think
block (`Compression.prefix_ids`) that the driver regenerates an answer after; under
`copy_pool: all_correct` so does every candidate, whole or not (`traac.training.step.copy_rules`).

The compressions that keep a prefix (`compression: early_exit | early_exit_attention_weights
| after_answer`, `traac.compression.early_exit`) first find each candidate's first correct step: its
parsed answers are checked against the candidate's own item by `verify_many`, time-bounded in the
verification pool like every verification.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from accelerate import Accelerator
from accelerate.logging import get_logger
from accelerate.utils import DistributedType, is_peft_model
from torch.distributed.fsdp import FSDPModule
from transformers import AutoModelForCausalLM
from transformers.distributed.fsdp import is_fsdp_managed_module
from transformers.integrations.deepspeed import is_deepspeed_zero3_enabled
from trl.models import prepare_deepspeed, prepare_fsdp
from trl.trainer.utils import get_config_model_id

from traac.common.items import Item
from traac.common.models import load_config
from traac.common.scoring_model import (
    ScoringModel,
    is_foreign,
    names_policy,
    resolve_scoring_model,
)
from traac.compression.compression import Compressor
from traac.compression.early_exit import (
    COMPRESSION_KINDS,
    CompressionKind,
    early_exit,
    kept_whole,
    scored_part,
    with_head,
)
from traac.compression.factory import build_compressor, check_probe_layers
from traac.compression.first_correct import Accepts, FirstCorrect, first_correct
from traac.compression.formats import ChatFormat
from traac.compression.rewards import Gather
from traac.errors import TraacError
from traac.training.step.copy_rules import CopySettings, copy_think
from traac.training.step.phases import Compression, Rollout, candidate_compressions
from traac.verification import verify_many

# What a process with nothing to score feeds the scorer so that its forwards match the others'.
FILLER_REASONING = "."
logger = get_logger(__name__)


@dataclass(frozen=True)
class ProbeModel:
    """The model the probe runs through, as one value: what `scoring_model` names (`spec`), the
    frozen model loaded for it (None: the policy, looked up at each step, or no model for the
    random scorer) and whether the policy with its adapters disabled stands for the reference
    (`base`, with LoRA)."""

    spec: ScoringModel
    model: Any = None
    base: bool = False


def collective_forwards(num_processes: int, models: Sequence[Any]) -> bool:
    """Whether each forward of `models` is a collective across processes (FSDP, ZeRO-3): then
    every process must run as many as the others, or the run deadlocks."""
    if num_processes == 1:
        return False
    if is_deepspeed_zero3_enabled():
        return True
    # FSDP 1 or 2, however it was applied (accelerate, transformers or `fully_shard`).
    return any(
        isinstance(m, FSDPModule) or is_fsdp_managed_module(m) for m in models if m is not None
    )


def probe_model(args: Any, policy: Any, ref_model: Any, accelerator: Accelerator) -> ProbeModel:
    """The probe's model for a run (`args`: a `TRAACConfig`): the frozen reference model, a
    frozen foreign model (`scoring_model` names one), or the policy (always for the policy
    scorers, which read its own sampling distribution). With LoRA the reference is the policy
    with its adapters disabled, as for TRL's KL term. With `beta=0` TRL keeps no reference
    model; then a frozen copy of the initial policy is loaded (the paper's scoring model):
    `scoring_model: policy` saves its memory. A run that does not compress loads nothing."""
    if not args.compresses:
        return ProbeModel(resolve_scoring_model(None))
    settings = args.traac_settings
    spec = resolve_scoring_model(settings.scoring_model)
    if not settings.scorer_kind.attention or names_policy(settings.scoring_model):
        return ProbeModel(spec)
    if spec.foreign:
        return ProbeModel(spec, frozen_scorer(spec.path, accelerator, policy.dtype))
    if is_peft_model(policy):
        return ProbeModel(spec, base=True)
    if ref_model is not None:
        return ProbeModel(spec, accelerator.unwrap_model(ref_model))
    logger.warning(
        "TRAAC: beta=0 leaves TRL without a reference model; loading a frozen copy of the "
        "initial policy to score steps (set scoring_model=policy to score with the policy)."
    )
    initial = get_config_model_id(policy.config)
    return ProbeModel(spec, frozen_scorer(initial, accelerator, policy.dtype))


def check_probe_layers_of(args: Any, model: Any) -> None:
    """A run's probe layers against the policy's config.json alone, before any weights load (a
    model object, or a foreign scorer, is checked when its probe is built)."""
    foreign = is_foreign(args.traac_settings.scoring_model)
    if not args.compresses or not isinstance(model, str) or foreign:
        return
    config = load_config(model)
    settings = args.compression_settings(config.get_text_config().model_type, model)
    check_probe_layers(settings, model)


def model_kind(config: Any) -> tuple[str | None, str]:
    """A loaded model's type and name or path: what the authors' layer rule reads
    (`traac.training.methods.traac.authors_probe_layers`)."""
    return config.get_text_config().model_type, str(config.name_or_path or "")


def probe_compressor(
    args: Any, probe: ProbeModel, model: Any, tokenizer: Any, chat_format: ChatFormat
) -> Compressor:
    """The run's `Compressor` on `model` (the probe's, else the policy; unwrapped), with the
    recipe's compression settings, probe layers resolved for that model."""
    settings = args.compression_settings(*model_kind(model.config))  # type and name
    tokenizer = probe.spec.tokenizer if probe.spec.foreign else tokenizer
    return build_compressor(settings, model, tokenizer, chat_format, seed=args.seed)


def frozen_scorer(path: str, accelerator: Accelerator, dtype: Any) -> Any:
    """A frozen model at `path` to score with, sharded as TRL shards its reference model under
    ZeRO-3 or FSDP: its forwards are then collectives, matched across processes by the padding
    of `StepCompressor` as the policy's are."""
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    model.requires_grad_(False)
    model.eval()
    if accelerator.distributed_type == DistributedType.DEEPSPEED:
        return prepare_deepspeed(model, accelerator)
    if accelerator.distributed_type == DistributedType.FSDP:
        return prepare_fsdp(model, accelerator)
    return model.to(accelerator.device)


@dataclass
class StepCompressor:
    """Scores, calibrates and evicts the candidates of one process, as every process does."""

    compressor: Compressor
    chat_format: ChatFormat
    tokenizer: Any
    max_completion_length: int
    gather: Gather
    uniformities: deque[float] | None = None  # the rank calibration's window, when it is on
    # the compressing mode's `compression`: the scorer's, or one that keeps a prefix
    compression: CompressionKind = COMPRESSION_KINDS["scorer"]
    # which candidates are re-answered, with which tags (`traac.training.step.copy_rules`)
    copies: CopySettings = field(default_factory=CopySettings)

    def __call__(
        self,
        candidates: Sequence[tuple[Rollout, float]],
        prompts: Sequence[list[int]],
        filler_prompt: list[int],
        *,
        pad: bool,
        scoring: AbstractContextManager[Any],
        items: Sequence[Item] = (),
    ) -> list[Compression]:
        """Every scored candidate (rollout, tau), with its prompt's token ids `prompts[i]` (and
        its item `items[i]`, which the early exits verify against); those that lost steps carry
        their new think block. With `pad` the forwards are padded to the busiest process's
        count (with `filler_prompt`'s context); `scoring` is entered around them (the host
        times them and puts the policy in eval mode)."""
        reasonings = [self.chat_format.parse(r.text).reasoning for r, _ in candidates]
        splits: dict[int, FirstCorrect] = {}
        if self.compression.prefix:
            if len(items) != len(candidates):
                raise TraacError(f"compression {self.compression.name}: one item per candidate")
            found = first_correct(reasonings, self.accepts(items), phrases=self.phrases)
            splits = {r.origin: f for (r, _), f in zip(candidates, found, strict=True)}
        if not self.compression.scores:  # early_exit, no forward: nothing to pad
            out = [Compression(r.origin, early_exit(splits[r.origin], self.tokenizer), tau)
                   for r, tau in candidates]  # fmt: skip
            return self._prefixes(out)
        if splits:  # only what follows the prefix is scored (`scored_part`)
            reasonings = [scored_part(splits[r.origin], self.compression) for r, _ in candidates]
        contexts = [self.context(p) for p in prompts]
        if pad:
            real = sum(bool(r.strip()) for r in reasonings)
            extra = max(self.gather([real])) - real
            reasonings += [FILLER_REASONING] * extra
            contexts += [self.context(filler_prompt)] * extra
        with scoring:
            traces = self.compressor.score(reasonings, contexts)[: len(candidates)]
        scored = [(r, tau, t) for (r, tau), t in zip(candidates, traces, strict=True) if t.steps]
        fresh: list[float] = self.gather([t.uniformity for _, _, t in scored])
        if self.uniformities is not None:
            self.uniformities.extend(fresh)
        out = candidate_compressions(self.compressor, scored, self.uniformities)
        for c in out:
            if c.origin in splits:
                c.result = with_head(splits[c.origin], c.result, self.tokenizer)
        if self.compression.keeps_unanswered:  # a candidate with nothing to score: kept whole
            done = {c.origin: c for c in out}
            out = [done.get(r.origin) or Compression(r.origin, kept_whole(splits[r.origin],
                   self.tokenizer), tau) for r, tau in candidates]  # fmt: skip
        return self._prefixes(out)

    def _prefixes(self, out: list[Compression]) -> list[Compression]:
        """Each copy's think block as token ids, for the candidates `copy_pool` re-answers
        (`copy_think`: where steps were evicted, or every one)."""
        for compression in out:
            prefix = copy_think(compression.result, self.chat_format, self.copies)
            if prefix is not None:
                ids = self.tokenizer(prefix, add_special_tokens=False)["input_ids"]
                # A think block that leaves no room for an answer is not used.
                compression.prefix_ids = ids if len(ids) < self.max_completion_length else []
        return out

    @property
    def phrases(self) -> tuple[str, ...] | None:
        return self.compressor.settings.phrases

    def accepts(self, items: Sequence[Item]) -> Accepts:
        """Trace t's parsed answer offered to `items[t]`'s verifier as a final boxed answer,
        through `verify_many` (the pool, time-bounded; a check out of time counts as wrong)."""
        close = self.chat_format.think_close

        def accepts(asks: Sequence[tuple[int, str]]) -> list[bool]:
            texts = [f"{close}\\boxed{{{answer}}}" for _, answer in asks]
            return verify_many([items[t] for t, _ in asks], texts, think_close=close)

        return accepts

    def context(self, prompt_ids: list[int]) -> str:
        """What the policy read before the reasoning: the prompt and, where the response opens
        the block, the opener (the confidence scorer's input)."""
        prompt = self.tokenizer.decode(prompt_ids, skip_special_tokens=False)
        return self.chat_format.reasoning_context(prompt)
