"""An evaluation's results (not the kept run records of `traac.pipelines.records`): one
`SampleRecord` per line of an evaluation's `samples.jsonl` (a
backend's `Generation` with its verdict, `traac.evaluation.inference.responses`), and one
`EvalSummary` in `summary.json`. The runner
writes them; reports, plots and the demo read them back through `from_json`, so no file spells
their keys by hand.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from traac.common.tables import Table, fmt
from traac.data.datasets import OTB_OVERTHINK, OTB_UNDERTHINK
from traac.errors import TraacError
from traac.evaluation.harness.metrics import (
    Sample,
    SamplingStats,
    length_table,
    sampling_stats,
    sampling_table,
    string_vote,
)
from traac.evaluation.harness.overthinking import OverthinkStats, overthinking_table
from traac.evaluation.harness.paper_metrics import (
    OTB_OFFICIAL_T,
    GroupStats,
    by_group,
    group_stats,
    otb_f1,
)

TIER_ORDER = ("easy", "medium", "hard")
SUMMARY_VERSION = 2
# Fields written under an older name: a dataset's labelled tier was once called its difficulty,
# and records and summaries on disk still say so.
_JSON_NAMES = {"tier": "difficulty", "by_tier": "by_difficulty"}
# maj@k's votes: item id -> sample index -> the sample index of the first answer of its group by
# the item's verifier, None where it casts no vote (`traac.evaluation.harness.votes`).
Votes = dict[str, dict[int, int | None]]


@dataclass(frozen=True)
class SampleRecord:
    """One (item, sample) of an evaluation. Under a think budget, `interrupted` says whether the
    budget closed the think block and `budget_think_tokens` how many tokens the model wrote
    before its closer or the interruption (the auxiliary prompt not counted); None without a
    budget. `tier` is the item's labelled difficulty tier (written as `difficulty`). `extra`
    holds fields a backend adds (test-time compression's token counts and steps); they are
    written flat beside the others."""

    id: str
    sample: int
    response: str
    correct: bool
    response_tokens: int
    think_tokens: int  # tokens before the first closer; the whole response if it never closed
    closed: bool
    data_source: str = "default"
    tier: str | None = None
    prompt: str | None = None
    extracted: str | None = None
    task: str | None = None
    finish_reason: str | None = None
    interrupted: bool | None = None
    budget_think_tokens: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, int]:
        return (self.id, self.sample)

    @property
    def think_or_none(self) -> int | None:
        """Think length as the OAA metrics read it: None where the block never closed."""
        return self.think_tokens if self.closed else None

    def to_json(self) -> dict[str, Any]:
        row = {_json_name(f.name): getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        return {**row, **self.extra}

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> SampleRecord:
        """A record from its JSON object; KeyError/TypeError when a required field is missing."""
        names = {_json_name(f.name): f.name for f in fields(cls) if f.name != "extra"}
        known = {names[k]: v for k, v in row.items() if k in names}
        extra = {k: v for k, v in row.items() if k not in names}
        record = cls(**known, extra=extra)
        if not isinstance(record.id, str) or not isinstance(record.sample, int):
            raise TypeError("id must be text and sample an integer")
        return record


# The footings of an official OTB score, by the rows its O and U average (`otb_official.footing`)
OTB_WITH_MATH = "official, with math rows"  # the leaderboard's
OTB_GENERAL_ONLY = "official, general rows only"
OTB_ONE_HALF_MATH = "official, math rows in one half only"
OTB_NOT_LEADERBOARD = (
    "not the leaderboard's footing, whose O and U also average the official math rows "
    "(MATH-500 levels 1-2; AIME 2025 and HMMT February 2025)"
)


@dataclass(frozen=True)
class OTBScore:
    """OptimalThinkingBench: its overthinking half's score O, its underthinking half's U and
    their F1 (all in percent). `scoring` says how: `paper` (O = AUC_OAA at the summary's t_max
    over responses, U = accuracy) or `official` (the official code's per-question product of
    means at T = 1000 and reasoning-gym's partial credit: `evaluation.harness.otb_official`).
    `footing` says beside which figures it may stand: `paper`, or the official scoring with or
    without the math rows the leaderboard's figures average in (`otb_official.footing`)."""

    overthink: float
    underthink: float
    f1: float
    scoring: str = "paper"
    footing: str = "paper"

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> OTBScore:
        """Summaries written before `scoring` existed name O and U `auc_oaa` and
        `underthink_accuracy`, and were scored the paper's way; those written before `footing`
        did not record whether an official score held math rows."""
        scoring = row.get("scoring", "paper")
        return cls(
            overthink=row["overthink"] if "overthink" in row else row["auc_oaa"],
            underthink=row["underthink"] if "underthink" in row else row["underthink_accuracy"],
            f1=row["f1"],
            scoring=scoring,
            footing=row.get(
                "footing", "paper" if scoring == "paper" else "official, rows unrecorded"
            ),
        )

    def sentence(self, t_max: int, unit: str) -> str:
        """The line summary.md and `traac eval` print, naming the scoring."""
        if self.scoring == "official":
            mathless = self.footing in (OTB_GENERAL_ONLY, OTB_ONE_HALF_MATH)
            return (
                f"OptimalThinkingBench, footing: {self.footing} (facebookresearch/RAM "
                f"projects/otb: per question mean(correct) x max(0, T - mean think tokens) / T, "
                f"T = {OTB_OFFICIAL_T}; reasoning-gym partial credit): O {self.overthink:.2f}, U "
                f"{self.underthink:.2f}, F1 {self.f1:.2f}"
            ) + (f"; {OTB_NOT_LEADERBOARD}" if mathless else "")
        return (
            f"OptimalThinkingBench, footing: paper: AUC_OAA {self.overthink:.2f} (t_max = "
            f"{t_max} {unit}), UnderthinkingBench accuracy {self.underthink:.2f}, "
            f"F1 {self.f1:.2f}"
        )


@dataclass(frozen=True)
class EvalSummary:
    """The numbers of one evaluation run (accuracy and rates in percent)."""

    dataset: str
    model: str
    overall: GroupStats
    t_max: int
    length_unit: str
    accuracy_by_sample: dict[int, float]  # sample index -> accuracy over the items
    accuracy_std_over_samples: float
    by_tier: dict[str, GroupStats] = field(default_factory=dict)  # written as by_difficulty
    by_source: dict[str, GroupStats] = field(default_factory=dict)
    by_task: dict[str, GroupStats] = field(default_factory=dict)
    otb: OTBScore | None = None
    truncated_rate: float | None = None
    interrupted_rate: float | None = None  # think blocks the think budget closed (%)
    notes: list[str] = field(default_factory=list)
    # avg@k, pass@k, maj@k and the length split (evaluation.metrics), overall and per tier.
    sampling: SamplingStats | None = None
    sampling_by_tier: dict[str, SamplingStats] = field(default_factory=dict)
    # First correct step, what follows it, underthinking (evaluation.overthinking); needs the
    # items' verifiers, so the runner adds it (None in summaries written before it existed).
    overthinking: OverthinkStats | None = None
    overthinking_by_tier: dict[str, OverthinkStats] = field(default_factory=dict)
    # A hash of the tokenizer's vocabulary: two runs count in the same tokens when theirs agree,
    # whatever directory each tokenizer was read from (None: words, or written before it).
    tokenizer_id: str | None = None
    # maj@k's votes by the items' verifiers (None: written before them, or summarised without
    # the items, when maj@k compares answer strings).
    votes: Votes | None = None
    version: int = SUMMARY_VERSION

    @property
    def in_tokens(self) -> bool:
        return self.length_unit.startswith("tokens")

    @property
    def short_unit(self) -> str:
        """'tokens' or 'words', for captions."""
        return "tokens" if self.in_tokens else "words"

    def to_json(self) -> dict[str, Any]:
        return {_json_name(k): v for k, v in asdict(self).items()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: str = "summary") -> EvalSummary:
        try:
            if data.get("version") != SUMMARY_VERSION:
                raise KeyError("version")

            def groups(key: str) -> dict[str, GroupStats]:
                return {k: GroupStats(**v) for k, v in data.get(key, {}).items()}

            otb = data.get("otb")
            sampling, over = data.get("sampling"), data.get("overthinking")
            return cls(
                dataset=data["dataset"],
                model=data["model"],
                overall=GroupStats(**data["overall"]),
                t_max=int(data["t_max"]),
                length_unit=data["length_unit"],
                accuracy_by_sample={int(k): v for k, v in data["accuracy_by_sample"].items()},
                accuracy_std_over_samples=data["accuracy_std_over_samples"],
                by_tier=groups("by_difficulty"),
                by_source=groups("by_source"),
                by_task=groups("by_task"),
                otb=OTBScore.from_json(otb) if otb else None,
                truncated_rate=data.get("truncated_rate"),
                interrupted_rate=data.get("interrupted_rate"),
                notes=list(data.get("notes", [])),
                sampling=SamplingStats.from_json(sampling) if sampling else None,
                sampling_by_tier={
                    k: SamplingStats.from_json(v)
                    for k, v in data.get("sampling_by_tier", {}).items()
                },
                overthinking=OverthinkStats.from_json(over) if over else None,
                overthinking_by_tier={
                    k: OverthinkStats.from_json(v)
                    for k, v in data.get("overthinking_by_tier", {}).items()
                },
                tokenizer_id=data.get("tokenizer_id"),
                votes=_votes_from_json(data.get("votes")),
            )
        except (KeyError, TypeError, AttributeError, ValueError):
            raise TraacError(
                f"{where} is not a summary of this traac version; rerun `traac eval` into its "
                "directory to rewrite it (finished samples are kept)"
            ) from None


def _votes_from_json(data: Mapping[str, Mapping[str, int | None]] | None) -> Votes | None:
    if data is None:
        return None
    return {item: {int(k): v for k, v in row.items()} for item, row in data.items()}


def summarize(
    records: Sequence[SampleRecord],
    *,
    dataset: str,
    model: str,
    t_max: int,
    length_unit: str,
    notes: Sequence[str] = (),
    tokenizer_id: str | None = None,
    votes: Votes | None = None,
) -> EvalSummary:
    """Accuracy, lengths, closure and AUC_OAA overall and per tier, source and task where they
    vary; the OptimalThinkingBench F1 when both of its halves are present. maj@k counts `votes`
    (`traac.evaluation.harness.votes.answer_votes`), or answer strings without them."""
    if not records:
        raise TraacError("nothing to summarise: no samples")
    by_sample: dict[int, list[bool]] = {}
    for r in records:
        by_sample.setdefault(r.sample, []).append(r.correct)
    per_run = {k: 100.0 * statistics.fmean(v) for k, v in sorted(by_sample.items())}
    finished = [r for r in records if r.finish_reason is not None]
    budgeted = [r for r in records if r.interrupted is not None]
    return EvalSummary(
        dataset=dataset,
        model=model,
        length_unit=length_unit,
        accuracy_by_sample=per_run,
        accuracy_std_over_samples=statistics.stdev(per_run.values()) if len(per_run) > 1 else 0.0,
        **_groups(records, t_max),
        truncated_rate=(
            100.0 * statistics.fmean(r.finish_reason == "length" for r in finished)
            if finished
            else None
        ),
        interrupted_rate=(
            100.0 * statistics.fmean(bool(r.interrupted) for r in budgeted) if budgeted else None
        ),
        notes=list(notes),
        sampling=sampling_stats(field_samples(records, votes)),
        sampling_by_tier={
            tier: sampling_stats(field_samples([r for r in records if r.tier == tier], votes))
            for tier in tiers_in(records)
        },
        tokenizer_id=tokenizer_id,
        votes=votes,
    )


def _groups(records: Sequence[SampleRecord], t_max: int) -> dict[str, Any]:
    """The fields of a summary that AUC_OAA enters: overall and per tier, source and task
    where they vary, and the paper's OptimalThinkingBench F1 when both of its halves are in."""

    def split(label: str) -> dict[str, GroupStats]:
        kept = [r for r in records if getattr(r, label) is not None]
        if not kept:
            return {}
        found = by_group([str(getattr(r, label)) for r in kept], *_columns(kept), t_max)
        if label != "tier" and len(found) < 2:
            return {}
        order = sorted(found, key=lambda g: (TIER_ORDER.index(g) if g in TIER_ORDER else 9, g))
        return {str(g): found[g] for g in order}

    sources = split("data_source")
    otb = None
    if OTB_OVERTHINK in sources and OTB_UNDERTHINK in sources:
        auc, acc_ut = sources[OTB_OVERTHINK].auc_oaa, sources[OTB_UNDERTHINK].accuracy
        otb = OTBScore(auc, acc_ut, otb_f1(auc, acc_ut))
    return {
        "overall": group_stats(*_columns(records), t_max),
        "t_max": t_max,
        "by_tier": split("tier"),
        "by_source": sources,
        "by_task": split("task"),
        "otb": otb,
    }


def at_t_max(summary: EvalSummary, records: Sequence[SampleRecord], t_max: int) -> EvalSummary:
    """The summary with AUC_OAA (and the paper's OTB score) recomputed from its records at
    another t_max (`traac report --t-max`); an official OTB score, whose T is fixed, is kept."""
    if t_max == summary.t_max:
        return summary
    fields_ = _groups(records, t_max)
    if summary.otb is not None and summary.otb.scoring != "paper":
        fields_["otb"] = summary.otb
    return replace(summary, **fields_)


def field_samples(records: Sequence[SampleRecord], votes: Votes | None = None) -> list[Sample]:
    """What `evaluation.metrics` reads of each record: maj@k's vote is its group in `votes`,
    else its extracted answer as a string."""

    def vote(r: SampleRecord) -> str | int | None:
        if votes is None:
            return string_vote(r.extracted)
        try:
            return votes[r.id][r.sample]
        except KeyError:
            raise TraacError(
                f"maj@k: no vote recorded for {r.id!r} sample {r.sample}; rerun `traac eval` "
                "into its directory to recount the votes"
            ) from None

    return [
        Sample(
            r.id,
            r.sample,
            r.correct,
            vote(r),
            r.response_tokens,
            r.think_tokens,
            r.closed,
            None if r.finish_reason is None else r.finish_reason == "length",
        )
        for r in records
    ]


def tiers_in(records: Sequence[SampleRecord]) -> list[str]:
    """The tiers the records hold, easy to hard, then any other in name order."""
    found = {r.tier for r in records if r.tier is not None}
    return sorted(found, key=lambda t: (TIER_ORDER.index(t) if t in TIER_ORDER else 9, t))


def _columns(records: Sequence[SampleRecord]) -> tuple[list[str], list[bool], list[int], list]:
    return (
        [r.id for r in records],
        [r.correct for r in records],
        [r.response_tokens for r in records],
        [r.think_or_none for r in records],
    )


def summary_table(summary: EvalSummary) -> Table:
    """The headline numbers, then one row per tier, source and task."""
    unit = summary.short_unit
    table = Table(
        ["group", "items", "samples", "Acc (%)", f"Len ({unit})", f"Think ({unit})",
         "closed (%)", "AUC_OAA (%)"],
    )  # fmt: skip

    def add(name: str, s: GroupStats) -> None:
        table.add(
            name, str(s.n_items), str(s.n_samples), fmt(s.accuracy, 2),
            fmt(s.mean_response_tokens), fmt(s.mean_think_tokens), fmt(s.closed_rate),
            fmt(s.auc_oaa, 2),
        )  # fmt: skip

    add("all", summary.overall)
    for label, groups in (
        ("difficulty", summary.by_tier),
        ("source", summary.by_source),
        ("task", summary.by_task),
    ):
        for group, s in groups.items():
            add(f"{label}: {group}", s)
    return table


def summary_blocks(summary: EvalSummary, title: str) -> list[str | Table]:
    """The summary in order: the headline numbers, the table, then OTB, spread and notes
    (written as markdown into summary.md, drawn to fit by `traac eval`)."""
    s = summary.overall
    lines: list[str | Table] = [
        f"# {title}",
        f"{s.n_items} items, {s.n_samples} samples; lengths in {summary.length_unit}; "
        f"AUC_OAA with t_max = {summary.t_max} {summary.short_unit}.",
        summary_table(summary),
    ]
    if summary.otb:
        lines += [summary.otb.sentence(summary.t_max, summary.short_unit)]
    if len(summary.accuracy_by_sample) > 1:
        runs = ", ".join(f"{a:.2f}" for a in summary.accuracy_by_sample.values())
        lines += [
            f"Accuracy per sample index: {runs} (std {summary.accuracy_std_over_samples:.2f})",
        ]
    if summary.truncated_rate is not None:
        lines += [f"Responses cut at max_new_tokens: {summary.truncated_rate:.1f}%"]
    if summary.interrupted_rate is not None:
        rate = summary.interrupted_rate
        lines += [f"Think blocks interrupted by the think budget: {rate:.1f}%"]
    lines += field_blocks(summary)
    for note in summary.notes:
        lines += [f"Note: {note}"]
    return lines


def field_blocks(summary: EvalSummary) -> list[str | Table]:
    """avg@k, pass@k and maj@k, the length split, and overthinking, overall and per tier."""
    if summary.sampling is None:
        return []
    unit = summary.short_unit
    groups = {
        "all": summary.sampling,
        **{f"tier: {t}": s for t, s in summary.sampling_by_tier.items()},
    }
    rule = MAJ_RULE if summary.votes is not None else MAJ_STRINGS
    blocks: list[str | Table] = [
        "Per problem over its samples: avg@k with a 95% bootstrap interval over problems, "
        f"pass@k (unbiased estimator), maj@k ({rule}):",
        sampling_table(groups),
        f"Lengths of right and wrong samples (mean / median / p90, {unit}); cut: responses that "
        "hit the token limit; unclosed: think blocks never closed:",
        length_table(groups, unit),
    ]
    if summary.overthinking is not None:
        over = {
            "all": summary.overthinking,
            **{f"tier: {t}": s for t, s in summary.overthinking_by_tier.items()},
        }
        blocks += [
            "Overthinking of right responses: the first step whose answer the verifier accepts "
            "(found: share of right responses with one), the steps and think "
            f"{unit} after it (re-checks: steps that open with a checking phrase); "
            "underthinking: wrong responses, on problems some sample got right, that closed "
            "with fewer steps than that problem's median right response:",
            overthinking_table(over, unit),
        ]
    return blocks


MAJ_RULE = (
    "majority of the answers grouped by the item's verifier, so two spellings of one answer are "
    "one vote; an unreadable answer casts none; ties to the answer given first"
)
MAJ_STRINGS = (
    "majority of the extracted answer strings, an empty answer casting no vote; ties to the "
    "answer given first: this summary holds no verifier votes, rerun `traac eval` into it"
)


def summary_markdown(summary: EvalSummary, title: str) -> str:
    """summary.md: `summary_blocks` as markdown."""
    blocks = summary_blocks(summary, title)
    return "\n\n".join(b.markdown() if isinstance(b, Table) else b for b in blocks) + "\n"


def _json_name(name: str) -> str:
    return _JSON_NAMES.get(name, name)
