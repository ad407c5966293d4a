"""What every length-control method module defines, and what the trainer builds from it.

A method module (`traac.training.methods.<name>`) holds one method: its settings (a dataclass
whose fields are the keys of its block in a recipe, with defaults, help and checks), its
reward function (a `GroupReward` subclass: a TRL reward function over GRPO's groups, whose name
is the one TRL logs, and whatever it keeps across steps, with `state_dict`) and its
`LengthMethod` entry, which `traac.training.methods.registry` collects. The config, `--dry-run`,
`experiment compare` and the docs read the registry.

A paper writes its reward with its own weight on correctness; traac's right answer is worth
`correctness_reward` in every mode, so each length term is multiplied by
`correctness_reward / paper weight` (`MethodRun.scale`): each paper's total reward times a
constant, plus traac's format term, which GRPO's group normalisation leaves as it was.
"""

from __future__ import annotations

import dataclasses
import operator
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from traac.compression.formats import ChatFormat
from traac.compression.rewards import Gather
from traac.compression.settings import check_positive
from traac.errors import TraacError

Group = tuple[list[int], list[bool]]  # one prompt's rollout lengths and verdicts
# TRAAC's rewards (`traac.training.methods.traac_rewards.TraacRewards`' methods), the names
# TRL logs: every method sums a prefix of them; one with a length term of its own puts it in the
# third's place.
TRAAC_REWARDS = ("correctness_reward", "format_reward", "length_reward")


# The checks every formula makes of its inputs, so each names the method and the value in one line.
def checked_group(method: str, lengths: Sequence[int], correct: Sequence[bool]) -> Group:
    """One prompt's rollouts, checked: as many verdicts as lengths, at least one of each."""
    checked = checked_lengths(method, lengths)
    if len(correct) != len(checked):
        raise TraacError(
            f"{method}: {len(checked)} lengths but {len(correct)} verdicts; one each per rollout"
        )
    return checked, [bool(ok) for ok in correct]


def checked_lengths(method: str, lengths: Sequence[int]) -> list[int]:
    """Token counts (integers >= 0) of a group that has at least one."""
    if not lengths:
        raise TraacError(f"{method}: empty group; pass the lengths of a prompt's rollouts")
    return [checked_count(f"{method} length", n, minimum=0) for n in lengths]


def checked_count(name: str, value: int, *, minimum: int) -> int:
    """An integer >= `minimum` (any `operator.index` type; bools are not counts here)."""
    try:
        count = operator.index(value)
    except TypeError:
        raise TraacError(f"{name} must be an integer >= {minimum}, got {value!r}") from None
    if isinstance(value, bool) or count < minimum:
        raise TraacError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return count


def check_number(name: str, value: float, *, positive: bool) -> None:
    """A real number, > 0 or >= 0 (bools are not numbers here)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or not (value > 0 if positive else value >= 0):
        raise TraacError(f"{name} must be a number {'>' if positive else '>='} 0, got {value!r}")


@dataclass(frozen=True)
class RunContext:
    """What every method's settings resolve against: the run's values outside the method."""

    correctness_reward: float
    max_completion_length: int
    easy_threshold: float  # a group at this pass rate or above is easy (difficulty bins)
    num_generations: int = 8  # rollouts per prompt


@dataclass(frozen=True)
class MethodSettings:
    """A method's settings: the keys of its block in a recipe (`BLOCK: {name: value}`; on the
    command line `--BLOCK.name value`), the trained mode's its `TRAACConfig.method_args`.
    Fields named in `POSITIVE`, `NONNEGATIVE` and `COUNTS` (integers >= 1) are checked by
    `check`; None is "unset" and passes. `resolved` fills the defaults that depend on the run
    and checks what binds only when it trains."""

    # The block's name: the mode these settings are, or the first of the modes that read them.
    BLOCK: ClassVar[str]
    # The prefix its names took as flat fields, before the blocks (`alp_` of `alp_beta`; None:
    # never flat): a flat key is refused naming its block, and run keys hash the flat names
    # (`traac.training.methods.registry.flat_form`), so a store's keys stay what they were.
    FLAT_PREFIX: ClassVar[str | None] = None
    POSITIVE: ClassVar[tuple[str, ...]] = ()
    NONNEGATIVE: ClassVar[tuple[str, ...]] = ()
    COUNTS: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The settings' names, in declaration order."""
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], method: str) -> MethodSettings:
        """The settings of `method` from a mapping of some of its keys (the rest keep their
        defaults): a key it does not have is named in one line with those it has; a number or
        a boolean written as text is read as the command line reads it."""
        names = cls.names()
        for key in values:
            if key not in names:
                raise TraacError(
                    f"{cls.BLOCK}.{key}: not a setting of mode {method}; its settings are "
                    f"{', '.join(names)}"
                )
        hints = typing.get_type_hints(cls)
        return cls(**{k: typed(f"{cls.BLOCK}.{k}", v, hints[k]) for k, v in values.items()})

    def check(self, run: RunContext) -> None:
        """Each field's own range."""
        for names, options in (
            (self.POSITIVE, {}),
            (self.NONNEGATIVE, {"zero": True}),
            (self.COUNTS, {"integer": True}),
        ):
            for name in names:
                if getattr(self, name) is not None:
                    check_positive(f"{self.BLOCK}.{name}", getattr(self, name), **options)

    def resolved(self, run: RunContext) -> MethodSettings:
        """Unset values resolved against the run; checks that bind only when training it."""
        return self


def declared_in(owner: type, name: str) -> Any:
    """The dataclass field `name` as `owner` declares it (default and help), to declare again
    where a settings class takes it over: one definition, in `owner`."""
    declared = next(f for f in dataclasses.fields(owner) if f.name == name)
    return dataclasses.field(default=declared.default, metadata=declared.metadata)


_TRUE, _FALSE = ("true", "yes", "1"), ("false", "no", "0")


def typed(name: str, value: Any, hint: Any) -> Any:
    """`value` as the field's type where it is text and the field takes no text: the one type
    coercer, of the methods' settings and of the counts checked before the parse
    (`traac.training.planning.counts`; an option's value is text; YAML reads `1e-4` as text)."""
    kinds = typing.get_args(hint) or (hint,)
    if not isinstance(value, str) or str in kinds:
        return value
    if bool in kinds:
        if value.lower() not in (*_TRUE, *_FALSE):
            raise TraacError(f"{name}: {value!r} must be true or false")
        return value.lower() in _TRUE
    for kind, what in ((int, "an integer"), (float, "a number")):
        if kind in kinds:
            try:
                return kind(value)
            except ValueError:
                raise TraacError(f"{name}: {value!r} must be {what}") from None
    return value


@dataclass(frozen=True)
class RunRule:
    """A setting of the run outside the method (a `TRAACConfig` field) that the method `needs`
    at one value, or that `cancels` it at any of some values (the method would train as another,
    or not at all), declared on the method's registry entry. `TRAACConfig` enforces its mode's
    rules, so `traac train`, its dry run and the Python API refuse the same: a need left unset
    is filled, a value set against a rule is one line with `why` and `fix`, before any weight
    loads."""

    field: str
    why: str
    fix: str
    needs: Any = None  # None: no value needed
    cancels: tuple[Any, ...] = ()

    def broken_by(self, value: Any) -> bool:
        """Whether `value` of the field goes against the rule."""
        return (self.needs is not None and value != self.needs) or value in self.cancels

    def message(self, mode: str, value: Any, profile: str | None = None) -> str:
        """The one line: the field, its value, the mode it cancels, why, and the fix; a value
        the optimiser `profile` gave is fixed by dropping it (the field set against an explicit
        profile is refused too)."""
        origin, fix = "", self.fix
        if profile is not None:
            origin, fix = f" (optimizer_profile {profile}'s)", f"drop optimizer_profile {profile}"
        shown = str(value).lower() if isinstance(value, bool) else repr(value)
        return f"{self.field}: {shown}{origin} cancels mode {mode}: {self.why}; {fix}"


@dataclass(frozen=True)
class LengthMethod:
    """One length-control method: everything traac knows of it, from its one module."""

    name: str  # the `mode` that trains it
    paper: str  # its source, for `--dry-run` and the docs
    help: str  # what its length term does, for `mode`'s help
    correctness: float  # what its paper pays a right answer over a wrong one
    reward: str | None  # the name of its reward function (the one TRL logs); None: no term
    settings: type[MethodSettings]
    make: type[GroupReward]  # its reward function's class
    values: Callable[[Any, RunContext], str]  # its resolved values in words, for `--dry-run`
    # A recipe's training rows as the method needs them (L1-Max: each row's budget), or None.
    prepare: Callable[[Any, Any, int], Any] | None = None
    compare: tuple[tuple[str, dict[str, Any]], ...] = ()  # `experiment compare` variants
    rules: tuple[RunRule, ...] = ()  # the run settings it needs or that cancel it
    # What the step adds to a group: a length method neither compresses nor re-answers; it
    # keeps the bins for telemetry only (nothing of its own reads a bin).
    compresses: ClassVar[bool] = False
    bins: ClassVar[bool] = True

    @property
    def rewards(self) -> tuple[str, ...]:
        """The rewards TRL sums, in order: TRAAC's correctness and format, then its own term."""
        return (*TRAAC_REWARDS[:2], *([self.reward] if self.reward else []))

    def run_of(self, settings: MethodSettings, run: RunContext) -> MethodRun:
        """The method with its settings (checked: `TRAACConfig.method_settings`) resolved for
        the run."""
        return MethodRun(self, settings.resolved(run), run)


@dataclass(frozen=True)
class MethodRun:
    """A method with its settings resolved for one run: what the trainer builds it from."""

    method: LengthMethod
    settings: Any  # the method's own `MethodSettings`, resolved
    run: RunContext

    @property
    def scale(self) -> float:
        """The factor on the paper's length term: traac's correctness over the paper's."""
        return self.run.correctness_reward / self.method.correctness

    def describe(self) -> str:
        """One line for `--dry-run`: the method, its values and the scale."""
        m, values = self.method, self.method.values(self.settings, self.run)
        return (
            f"{m.paper}: {values}; length term x{self.scale:g} (right answer "
            f"{self.run.correctness_reward:g} here, {m.correctness:g} in the paper)"
        )

    def rewards(
        self,
        verdicts: Callable[..., list[bool]],
        num_generations: int | None,
        gather: Gather | None = None,
        rank: int = 0,
    ) -> GroupReward:
        """The method's reward function object, on the trainer's verdicts."""
        return self.method.make(
            self, verdicts=verdicts, num_generations=num_generations, gather=gather, rank=rank
        )

    def prepare(self, dataset: Any, seed: int) -> Any:
        """The training rows as the method needs them (unchanged for most)."""
        if self.method.prepare is None or dataset is None:
            return dataset
        return self.method.prepare(dataset, self.settings, seed)


class GroupReward:
    """A method's length term as a TRL reward function: `func` (the method named by
    `LengthMethod.reward`).

    `verdicts(completions, **kwargs)` says which completions are right (the trainer's `correct`
    column, else the verifiers). The terms that need the whole group read GRPO's layout:
    consecutive runs of `num_generations` completions are one prompt's group. Rollouts of one
    group may sit on several processes, so `gather` (`accelerate.utils.gather_object`) merges
    every process's lengths and verdicts and each process keeps its slice (`rank`). A method
    that `filters` (GFPO) says through `retain` which rows GRPO trains on; one that `prefills`
    (AdaptThink) says through `prefill` what a share of the rollouts start with. A method that reads
    the text (DOT re-verifies what it truncates, the first-correct penalty reads the think
    block) gets the tokenizer, the chat format and the step phrases through `bind`, which the
    trainer calls once TRL holds the tokenizer."""

    filters: ClassVar[bool] = False
    prefills: ClassVar[bool] = False  # `prefill` says what (AdaptThink)
    tokenizer: Any = None
    chat_format: ChatFormat = ChatFormat()
    phrases: tuple[str, ...] | None = None  # the recipe's `split_phrases` (None: the default)

    def __init__(
        self,
        run: MethodRun,
        *,
        verdicts: Callable[..., list[bool]],
        num_generations: int | None,
        gather: Gather | None = None,
        rank: int = 0,
    ) -> None:
        self.run = run
        self.settings = run.settings
        self.verdicts = verdicts
        self.num_generations = num_generations
        self.gather = gather
        self.rank = rank
        self.logged: dict[str, list[float]] = {}

    def log(self, kwargs: Mapping[str, Any], name: str, value: float) -> None:
        """One of the method's step metrics: to TRL's logs (the `log_metric` TRL passes a reward
        function) and to the run's `metrics.jsonl`, whose line the trainer writes from
        `take_logged` after the step."""
        self.logged.setdefault(name, []).append(value)
        log = kwargs.get("log_metric")
        if log is not None:
            log(name, value)

    def take_logged(self) -> dict[str, float]:
        """The step's metrics (each its mean over the step's calls), cleared for the next step."""
        taken = {name: sum(values) / len(values) for name, values in self.logged.items()}
        self.logged = {}
        return taken

    def bind(
        self, tokenizer: Any, chat_format: ChatFormat, phrases: Sequence[str] | None = None
    ) -> None:
        """What the run knows once TRL holds the tokenizer (the trainer calls it)."""
        self.tokenizer, self.chat_format = tokenizer, chat_format
        self.phrases = None if phrases is None else tuple(phrases)

    def decoded(self, completion_ids: Sequence[Sequence[int]], why: str) -> list[str]:
        """Each completion's text, decoded as TRL decodes one, for a method that reads the text
        (refused, saying `why` it needs the tokenizer, before `bind` gave one)."""
        if self.tokenizer is None:
            raise TraacError(f"mode {self.run.method.name}: no tokenizer to {why} (bind one)")
        return [
            self.tokenizer.decode(list(ids), skip_special_tokens=True) for ids in completion_ids
        ]

    @property
    def func(self) -> Callable[..., list[float]] | None:
        """The method's reward function (its name is the one TRL logs), if it has one."""
        name = self.run.method.reward
        return None if name is None else getattr(self, name)

    def prefill(self) -> tuple[str, float] | None:
        """Text that a share of each group's training rollouts is made to start with, and that
        share (AdaptThink: an empty think block, half of them); None: all are sampled from the
        prompt alone. The trainer asks once the method is bound (`Prefill`)."""
        return None

    def retain(self, totals: Sequence[float], lengths: Sequence[int]) -> list[bool] | None:
        """Which rows of the gathered batch GRPO normalises and trains on, from each row's
        total reward and length (GFPO's filter); None: all of them."""
        return None

    @property
    def scale(self) -> float:
        return self.run.scale

    def state_dict(self) -> dict[str, Any]:
        """What the method keeps across steps, for the checkpoint (none unless overridden)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore `state_dict`'s values (nothing unless overridden)."""

    def per_group(
        self,
        completions: list[Any],
        completion_ids: list[Sequence[int]],
        kwargs: dict[str, Any],
        formula: Callable[[list[int], list[bool]], list[float]],
    ) -> list[float]:
        """`formula` on every group of the gathered batch; this process's slice, scaled."""
        groups, offset, count = self.groups(completions, completion_ids, kwargs)
        out: list[float] = []
        for lengths, correct in groups:
            out += formula(lengths, correct)
        return [self.scale * r for r in out[offset : offset + count]]

    def groups(
        self, completions: list[Any], completion_ids: list[Sequence[int]], kwargs: dict[str, Any]
    ) -> tuple[list[Group], int, int]:
        """Every group of the gathered batch as (lengths, verdicts), the offset of this
        process's first rollout in it and its count."""
        n = self.num_generations
        name = self.run.method.name
        if n is None:
            raise TraacError(f"mode {name}: needs num_generations to find groups")
        local = list(
            zip(
                [len(ids) for ids in completion_ids],
                self.verdicts(completions, **kwargs),
                strict=True,
            )
        )
        every, offset = self.gathered(local)
        if len(every) % n:
            raise TraacError(
                f"mode {name}: {len(every)} completions are not whole groups of num_generations={n}"
            )
        groups = []
        for start in range(0, len(every), n):
            lengths, correct = zip(*every[start : start + n], strict=True)
            groups.append((list(lengths), list(correct)))
        return groups, offset, len(local)

    def gathered(self, local: list[Any]) -> tuple[list[Any], int]:
        """Every process's values of `local` (per rollout, in GRPO's order) and the offset of
        this process's first one in them."""
        parts: list[list[Any]] = self.gather([local]) if self.gather else [local]
        return [x for part in parts for x in part], sum(len(part) for part in parts[: self.rank])


@dataclass(frozen=True)
class Prefill:
    """A method's `prefill` as token ids: the first round(n x share) rollouts of each group of
    `n` are generated after the prompt and `ids`, which then open their completions, so they
    are scored and trained as the policy's own tokens."""

    ids: tuple[int, ...]
    share: float

    def rows(self, count: int, n: int) -> list[bool]:
        """Which of `count` rows (consecutive groups of `n`) start with the prefill."""
        k = round(n * self.share)
        return [i % n < k for i in range(count)]

    def prompts(self, prompt_ids: list[list[int]], n: int) -> list[list[int]]:
        """The prompts to generate from: the prefilled rows' with the prefill appended."""
        rows = self.rows(len(prompt_ids), n)
        pairs = zip(prompt_ids, rows, strict=True)
        return [list(p) + list(self.ids) if r else list(p) for p, r in pairs]

    def completions(
        self, completion_ids: list[list[int]], logprobs: list[list[float]] | None, n: int
    ) -> tuple[list[list[int]], list[list[float]] | None]:
        """The generated completions with the prefilled rows' prefill put back in front (its
        sampling log-probabilities 0: it was not drawn)."""
        rows = self.rows(len(completion_ids), n)
        pairs = zip(completion_ids, rows, strict=True)
        ids = [list(self.ids) + list(c) if r else list(c) for c, r in pairs]
        if logprobs is None:
            return ids, None
        pad = [0.0] * len(self.ids)
        return ids, [
            pad + list(lp) if r else list(lp) for lp, r in zip(logprobs, rows, strict=True)
        ]


def prefill_of(method: GroupReward | None, tokenizer: Any) -> Prefill | None:
    """The method's `prefill` in the run's tokens, if it prefills (after `bind`)."""
    spec = None if method is None or not method.prefills else method.prefill()
    if spec is None:
        return None
    text, share = spec
    return Prefill(tuple(tokenizer(text, add_special_tokens=False)["input_ids"]), share)
