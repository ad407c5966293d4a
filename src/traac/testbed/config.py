"""Everything that decides what the testbed model is: tiers, teacher, model, training, seeds.

The tiers and the seeds are the problems' (`traac.data.testbed_problems`); the rest is the model's.

The config's hash keys the build cache, so any change here (or to `VERSION`, bumped when the
code that turns a config into a model changes meaning) builds a new model instead of reusing a
stale one.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from typing import Literal

from traac.data.testbed_long import LONG_TIERS
from traac.data.testbed_problems import SFT_SEED, TierSettings
from traac.errors import TraacError

VERSION = 1


@dataclass(frozen=True)
class TeacherSettings:
    """How the procedural teacher over- and under-thinks.

    Re-checks are drawn uniformly from 0..max_rechecks regardless of the chain, so easy problems
    get as many as hard ones (overthinking). A re-check slips with `slip_prob` and changes the
    answer, so overthinking costs accuracy. On chains of `guess_min_terms`+ terms, `guess_prob` of
    the traces stop early and estimate (underthinking). `interrupt_prob` of the traces are cut by
    the auxiliary prompt during their re-checks and answer with a key-step summary.
    """

    min_terms: int = 2
    max_terms: int = 5
    max_rechecks: int = 8
    slip_prob: float = 0.02
    guess_min_terms: int = 5
    guess_prob: float = 0.25
    interrupt_prob: float = 0.15


Position = Literal["trailing", "interleaved"]
POSITIONS: tuple[Position, ...] = ("trailing", "interleaved")


@dataclass(frozen=True)
class LongTeacherSettings:
    """The long teacher (`traac.testbed.long_traces`): where the redundancy sits is
    the setting, `position`; everything else is drawn alike in both positions.

    A trace holds `max_redundant - fewer_per_term * (terms - min_terms)` redundant units at
    most (at least `min_redundant`), so easy problems overthink most, as the paper describes;
    each is a re-check (`weights[0]`), a restatement (`weights[1]`) or a two-step detour
    (`weights[2]`). A re-check slips with `slip_prob` and changes the answer. On chains of
    `guess_min_terms`+ terms `guess_prob` of the traces stop early and estimate. No trace is
    interrupted unless `interrupt_prob` says so (the short teacher's 0.15, for comparison).
    With `carry`, each needed step also writes what remains of the chain (`Then 3 + 4 = 7,
    leaving 7 - 8 - 4.`), so the next needed step reads its operation from the latest needed
    step, wherever the redundant units put it, rather than counting steps back to the question.
    """

    position: Position = "interleaved"
    min_terms: int = 3
    max_terms: int = 9
    min_redundant: int = 10
    max_redundant: int = 44
    fewer_per_term: int = 4
    weights: tuple[float, float, float] = (0.5, 0.3, 0.2)
    slip_prob: float = 0.01  # the short teacher's 0.02 over about twice as many re-checks
    guess_min_terms: int = 7
    guess_prob: float = 0.25
    interrupt_prob: float = 0.0
    carry: bool = False


@dataclass(frozen=True)
class TestbedModelSettings:
    """A tiny Qwen3ForCausalLM (same attention code paths as the real Qwen3)."""

    hidden_size: int = 128
    intermediate_size: int = 384
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    max_position_embeddings: int = 1024
    vocab_size: int = 640  # BPE target; the teacher's corpus fills about 550


@dataclass(frozen=True)
class TrainSettings:
    """SFT with TRL's SFTTrainer on the CPU; `n_traces` teacher traces, `epochs` over them,
    `batch_size` of them an optimizer step, read `micro_batch` at a time (gradients accumulated)
    where a whole batch's activations would not fit in memory (None: the whole batch at once)."""

    n_traces: int = 36_000
    epochs: float = 1.0
    batch_size: int = 32
    learning_rate: float = 1.5e-3
    warmup_ratio: float = 0.03
    weight_decay: float = 0.01
    micro_batch: int | None = None

    def __post_init__(self) -> None:
        # A step is `batch_size // micro_batch` reads: a remainder would shrink every step's batch.
        if self.micro_batch is not None and (
            self.micro_batch < 1 or self.batch_size % self.micro_batch
        ):
            raise TraacError(
                f"testbed train.micro_batch: {self.micro_batch} does not divide batch_size "
                f"{self.batch_size}; give a divisor of it (or None: the whole batch at once)"
            )


@dataclass(frozen=True)
class MeasureSettings:
    """The card's measurement: fresh evaluation problems, sampled at temperature 1.0."""

    n_per_tier: int = 200
    samples: int = 4
    temperature: float = 1.0
    max_new_tokens: int = 200  # teacher responses stay under ~130 tokens
    batch_size: int = 200


@dataclass(frozen=True)
class TestbedSettings:
    name: str = "full"
    seed: int = SFT_SEED
    base: str | None = None  # a pretrained model to fine-tune (`BASES`), instead of a fresh one
    tiers: TierSettings = field(default_factory=TierSettings)
    teacher: TeacherSettings | LongTeacherSettings = TeacherSettings()
    model: TestbedModelSettings = TestbedModelSettings()
    train: TrainSettings = TrainSettings()
    measure: MeasureSettings = MeasureSettings()

    def to_dict(self) -> dict:
        out = {"version": VERSION, **asdict(self)}
        if self.base is None:
            del out["base"]  # configs from before `base` keep their hash (their cache entry)
        else:
            del out["model"]  # the base decides the architecture
        if out["teacher"].get("carry") is False:
            del out["teacher"]["carry"]  # so do long configs from before `carry`
        if out["train"]["micro_batch"] is None:
            del out["train"]["micro_batch"]  # and every config from before `micro_batch`
        return out

    def hash(self) -> str:
        """Short content hash: the cache key of the model built from this config."""
        blob = json.dumps(self.to_dict(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:12]


QUICK = TestbedSettings(
    name="quick",
    model=TestbedModelSettings(hidden_size=64, intermediate_size=192, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1),
    train=TrainSettings(n_traces=7_000, batch_size=32, learning_rate=6e-3),
    measure=MeasureSettings(n_per_tier=8, samples=2, max_new_tokens=200),
)  # fmt: skip

# The Python quickstart's model: the quick testbed's architecture and number of SFT steps on
# half its traces (batches of 16), so a fresh clone builds it sooner; it still errs, so a group
# of its rollouts is rarely all right or all wrong (a step that learns something).
TINY = replace(QUICK, name="tiny", train=replace(QUICK.train, n_traces=3_500, batch_size=16))

# SmolLM2-135M-Instruct fully fine-tuned on the teacher's traces: a real pretrained model that
# thinks (75 steps; its tokenizer spells the think delimiters in several tokens, kept as is).
# Its card samples once per problem: generation costs ~25 ms a token on 2 cores.
SMOLLM2_THINK = TestbedSettings(
    name="smollm2-think",
    base="smollm2",
    train=TrainSettings(n_traces=1_200, batch_size=16, learning_rate=2e-4, weight_decay=0.0),
    measure=MeasureSettings(n_per_tier=60, samples=1, max_new_tokens=256, batch_size=30),
)
BASES = ("smollm2",)

# SmolLM2 on the long traces: smollm2-think's training (1,200 traces in 75 steps of 16, lr
# 2e-4), each trace about 5 times its supervised tokens (467 against 93 in SmolLM2's tokenizer,
# docs/testbed.md#long), read 4 traces at a time: a whole batch of the longest (936 tokens) was
# killed for memory on the 24 GiB machine; the long card but for its cap, which fits the longest
# trace in this tokenizer (digits are single tokens: 904 at most over 3,000 traces, 42% > 512).
SMOLLM2_THINK_LONG = replace(
    SMOLLM2_THINK,
    tiers=LONG_TIERS,
    train=replace(SMOLLM2_THINK.train, micro_batch=4),
    measure=MeasureSettings(n_per_tier=50, samples=1, max_new_tokens=1024, batch_size=50),
)


# The share of interrupted traces `--interruptions` gives a long build: the short teacher's.
INTERRUPTED = TeacherSettings().interrupt_prob


def long_config(
    position: Position, seed: int = SFT_SEED, interruptions: bool = False, base: str | None = None
) -> TestbedSettings:
    """The tiny model on the long teacher's traces, redundancy at `position`: the full
    testbed's architecture, traces and steps (36,000 in 1,125 steps of 32), its needed steps
    carrying the chain's rest (`carry`), its card sampled once on 50 problems a tier with a cap
    that fits the longest trace. The trials behind it (docs/results.md#testbed-long): 9,000
    traces in 563 steps of 16 without carry left it at 2-8% a tier, the same at this scale with
    carry reached 40/18/10% (easy/medium/hard) on the interleaved traces. `interruptions` puts
    the short teacher's interruption traces back (`INTERRUPTED` of them), which teach the think
    closer to attend to the needed steps: the comparison that says how much of the probe's
    success such training explains. With `base`, that pretrained model learns the same
    traces as smollm2-think learnt the short ones (`SMOLLM2_THINK_LONG`)."""
    teacher = LongTeacherSettings(
        position=position, carry=True, interrupt_prob=INTERRUPTED if interruptions else 0.0
    )
    suffix = f"long-{position}" + ("-interrupted" if interruptions else "")
    if base is not None:
        return replace(SMOLLM2_THINK_LONG, name=f"{base}-think-{suffix}", seed=seed, base=base,
                       teacher=teacher)  # fmt: skip
    return TestbedSettings(
        name=suffix,
        seed=seed,
        tiers=LONG_TIERS,
        teacher=teacher,
        train=TrainSettings(),
        measure=MeasureSettings(n_per_tier=50, samples=1, max_new_tokens=512, batch_size=50),
    )


def default_config(
    quick: bool = False,
    seed: int = SFT_SEED,
    base: str | None = None,
    long: Position | None = None,
    interruptions: bool = False,
) -> TestbedSettings:
    """The full testbed (with the properties asked of it), the quick one (for tests, <= 60 s),
    the thinking fine-tune of a pretrained `base` (`BASES`), or the tiny model (or `base`) on
    the long teacher's traces with the redundancy at `long` (`long_config`), with
    `interruptions`."""
    if interruptions and long is None:
        raise TraacError("testbed: --interruptions is a setting of the long builds; add --long "
                         "trailing or --long interleaved")  # fmt: skip
    if base is not None and base not in BASES:
        raise TraacError(f"testbed: unknown --base {base!r}; choose one of {', '.join(BASES)}")
    if long is not None:
        if long not in POSITIONS:
            raise TraacError(f"testbed: unknown --long {long!r}; choose {' or '.join(POSITIONS)}")
        if quick:
            raise TraacError("testbed: --long builds the full tiny model or --base; drop --quick")
        return long_config(long, seed, interruptions, base)
    if base is not None:
        if quick:
            raise TraacError("testbed: --quick builds the tiny model; drop it or drop --base")
        return replace(SMOLLM2_THINK, seed=seed)
    return replace(QUICK if quick else TestbedSettings(), seed=seed)
