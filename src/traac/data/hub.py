"""The hub: where each of the paper's benchmarks lives and which adapter reads its rows; offline,
the hub cache only, and an unreachable hub is said at once."""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from huggingface_hub import constants

from traac.common.items import Item
from traac.data.adapters import (
    OTB_OVERTHINK,
    Adapter,
    Row,
    adapt_aime,
    adapt_aime2025,
    adapt_amc,
    adapt_bbeh,
    adapt_bbh,
    adapt_dapo,
    adapt_gpqa,
    adapt_gsm8k,
    adapt_math500,
    adapt_otb_hub,
    adapt_supergpqa,
)
from traac.data.specs import spec_options
from traac.errors import TraacError

# The 27 BIG-Bench Hard tasks (configs of lukaemon/bbh).
BBH_TASKS = (
    "boolean_expressions",
    "causal_judgement",
    "date_understanding",
    "disambiguation_qa",
    "dyck_languages",
    "formal_fallacies",
    "geometric_shapes",
    "hyperbaton",
    "logical_deduction_five_objects",
    "logical_deduction_seven_objects",
    "logical_deduction_three_objects",
    "movie_recommendation",
    "multistep_arithmetic_two",
    "navigate",
    "object_counting",
    "penguins_in_a_table",
    "reasoning_about_colored_objects",
    "ruin_names",
    "salient_translation_error_detection",
    "snarks",
    "sports_understanding",
    "temporal_sequences",
    "tracking_shuffled_objects_five_objects",
    "tracking_shuffled_objects_seven_objects",
    "tracking_shuffled_objects_three_objects",
    "web_of_lies",
    "word_sorting",
)


@dataclass(frozen=True)
class HubSource:
    """Where a benchmark lives on the hub and how its rows become items.

    `options`: the adapter's keyword arguments with their defaults; a spec may override them
    (``supergpqa?per_difficulty=100``), and may pick another ``split``.
    """

    repo: str
    adapter: Adapter
    split: str | None = None  # None: 'test' if the repo has it, else its first split
    configs: tuple[str | None, ...] = (None,)
    row_filter: Callable[[Row], bool] | None = None
    options: dict[str, Any] = field(default_factory=dict)


def _bbeh_mini(row: Row) -> bool:
    return bool(row.get("mini"))


def _otb_overthink(row: Row) -> bool:
    """The hub's OverthinkingBench rows (its underthinking half is regenerated offline)."""
    return "overthink" in str(row.get("subset", ""))


HUB_DATASETS: dict[str, HubSource] = {
    "aime": HubSource("AI-MO/aimo-validation-aime", adapt_aime, "train"),
    "amc": HubSource("AI-MO/aimo-validation-amc", adapt_amc, "train"),
    "gpqa-diamond": HubSource(
        "Idavidrein/gpqa", adapt_gpqa, "train", ("gpqa_diamond",), options={"seed": 0}
    ),
    "bbeh": HubSource("BBEH/bbeh", adapt_bbeh, "train", row_filter=_bbeh_mini),
    "bbeh-full": HubSource("BBEH/bbeh", adapt_bbeh, "train"),
    OTB_OVERTHINK: HubSource(
        "facebook/optimal_thinking_bench", adapt_otb_hub, "train", row_filter=_otb_overthink
    ),
    "bbh": HubSource("lukaemon/bbh", adapt_bbh, "test", BBH_TASKS),
    "supergpqa": HubSource(
        "m-a-p/SuperGPQA", adapt_supergpqa, "train", options={"per_difficulty": 540, "seed": 0}
    ),
    "dapo-math-17k": HubSource("BytedTsinghua-SIA/DAPO-Math-17k", adapt_dapo, "train"),
    # The standard sets beside the paper's.
    "aime2025": HubSource(
        "opencompass/AIME2025", adapt_aime2025, "test", ("AIME2025-I", "AIME2025-II")
    ),
    "math-500": HubSource("HuggingFaceH4/MATH-500", adapt_math500, "test"),
    "gsm8k": HubSource("openai/gsm8k", adapt_gsm8k, "test", ("main",)),
}
# The math rows the official prepare.py (facebookresearch/RAM projects/otb, f0be196) adds to
# OptimalThinkingBench: (repo, split, subset, metadata source, id field); MATH-500 levels 1-2 only.
OTB_MATH_SOURCES = (
    ("math-ai/aime25", "test", "underthinking-math", "aime", "id"),
    ("MathArena/hmmt_feb_2025", "train", "underthinking-math", "hmmt", "problem_idx"),
    ("HuggingFaceH4/MATH-500", "test", "overthinking-math", "math-500", "unique_id"),
)
# Hub ids lead to the same adapters (BBEH/bbeh: the mini split, as in the paper).
HUB_NAME_BY_REPO = {src.repo: name for name, src in reversed(HUB_DATASETS.items())}


def load_hub(spec: str, source: HubSource, params: dict[str, str], name: str) -> list[Item]:
    """Rows from the hub (or its local cache) through the source's adapter."""
    typed = spec_options(spec, params)
    split = typed.pop("split", source.split)
    configs = source.configs
    if source.configs == (None,) and "config" in typed:  # a hub id's config (dataset_config)
        configs = (str(typed.pop("config")),)
    unknown = set(typed) - set(source.options)
    if unknown:
        allowed = ", ".join(["split", *(["config"] if configs == (None,) else []), *source.options])
        raise TraacError(f"dataset {spec!r}: unknown option(s) {sorted(unknown)}; use {allowed}")
    rows: list[dict[str, Any]] = []
    for config in configs:
        for row in _hub_rows(spec, source.repo, config, split):
            if source.row_filter is None or source.row_filter(row):
                rows.append({**row, "task": config} if config and len(source.configs) > 1 else row)
    if not rows:
        raise TraacError(f"dataset {spec!r}: the hub split has no rows")
    return source.adapter(rows, source=name, **{**source.options, **typed})


def otb_math_rows(spec: str) -> list[Row]:
    """prepare.py's math rows, in its layout (`adapt_otb_hub` reads them), from the hub or its
    cache; `HubUnavailable` where any of the three sets is missing."""
    rows: list[Row] = []
    for repo, split, subset, source, key in OTB_MATH_SOURCES:
        for row in _hub_rows(spec, repo, None, split):
            if source == "math-500" and row.get("level") not in (1, 2):
                continue
            meta = {"source": source, "id": row.get(key)}
            rows.append({"question": row.get("problem"), "answer": row.get("answer"),
                         "subset": subset, "metadata": meta})  # fmt: skip
    return rows


class HubUnavailable(TraacError):
    """A hub dataset that is neither reachable nor in the hub cache (a dry run defers it)."""


def _hub_rows(spec: str, repo: str, config: str | None, split: str | None) -> list[dict[str, Any]]:
    """One split of a hub dataset as rows. With HF_HUB_OFFLINE=1 (the hub's own switch) the
    cache only; an unreachable hub is said at once rather than after datasets' retries."""
    where = f"{repo}" + (f" ({config})" if config else "")
    if not constants.HF_HUB_OFFLINE and not hub_reachable():
        raise HubUnavailable(
            f"dataset {spec!r}: the hub is unreachable for {where}; set HF_HUB_OFFLINE=1 to "
            "read it from the hub cache (HF_HOME), or pass a local file in its layout"
        )
    import datasets  # here: the library and pandas cost a second to import, read by hub sets only

    try:
        loaded = datasets.load_dataset(repo, config, split=split)
        if isinstance(loaded, datasets.DatasetDict):
            key = "test" if "test" in loaded else next(iter(loaded))
            loaded = loaded[key]
        return list(loaded)
    except (ConnectionError, OSError, FileNotFoundError, ValueError) as err:
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise HubUnavailable(
            f"dataset {spec!r} needs the network or the hub cache: {where}: {reason}; "
            "run once with network access (or set HF_HOME to a cache that has it), "
            "or pass a local file in its layout"
        ) from err


def hub_reachable(timeout: float = 3.0) -> bool:
    """Can we open a connection to the hub? (Saves datasets' minute of retries when offline.)"""
    if constants.HF_HUB_OFFLINE:
        return False
    host = urlparse(constants.ENDPOINT).hostname or "huggingface.co"
    try:
        with socket.create_connection((host, 443), timeout=timeout):
            return True
    except OSError:
        return False
