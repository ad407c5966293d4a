"""maj@k's votes of an evaluation: each record's answer group by its item's verifier
(`traac.verification.votes`), kept in the summary so that `traac report` counts the same votes
from samples.jsonl without the data set."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from traac.common.items import Item
from traac.errors import TraacError
from traac.evaluation.harness.results import SampleRecord, Votes
from traac.verification.votes import vote_groups_many


def answer_votes(
    records: Sequence[SampleRecord], items: Sequence[Item], think_close: str = "</think>"
) -> Votes:
    """Every record's vote, its problem's samples grouped in sample order (time-bounded: math
    comparisons run in the verification pool under its deadline)."""
    by_id: Mapping[str, Item] = {it.id: it for it in items}
    problems: dict[str, list[SampleRecord]] = {}
    for r in records:
        problems.setdefault(r.id, []).append(r)
    missing = sorted(set(problems) - set(by_id))
    if missing:
        raise TraacError(f"maj@k votes: records of unknown items {missing[:3]}")
    order = [sorted(rs, key=lambda r: r.sample) for rs in problems.values()]
    groups = vote_groups_many(
        [(by_id[rs[0].id], [r.response for r in rs], [r.correct for r in rs]) for rs in order],
        think_close=think_close,
    )
    return {
        rs[0].id: {
            r.sample: None if g is None else rs[g].sample for r, g in zip(rs, found, strict=True)
        }
        for rs, found in zip(order, groups, strict=True)
    }
