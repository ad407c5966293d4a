"""Every benchmark and training set as a list of `Item`s, from one spec string.

`load_items(spec)` is the single entry point shared by `traac eval` and the trainer:

- a local file (``.json``, ``.jsonl``, ``.parquet``) whose layout is detected from its rows
  (generic question/answer, OptimalThinkingBench's underthinking file, the BBEH file, and the
  hub layouts below saved to disk);
- ``testbed:easy|medium|hard|all[?n=&seed=]``: the offline testbed's problems, and
  ``testbed-long:...`` its longer chains (`testbed_long`);
- ``reasoning-gym:TASK[?size=&seed=&<config>=...]``: procedurally generated, verified by the
  task's own `score_answer` (reasoning-gym is an optional extra, imported here on first use);
- ``otb-underthink[?n=&seed=]``: UnderthinkingBench regenerated with reasoning-gym
  (docs/method.md#evaluation; the same extra);
- ``otb-overthink`` and ``otb`` (both halves; the overthinking half needs the hub; ``otb`` adds
  the official MATH-500 / AIME 2025 / HMMT math rows where the hub or its cache has all three);
- named hub benchmarks (`HUB_DATASETS`: ``aime``, ``amc``, ``gpqa-diamond``, ``bbeh``,
  ``bbh``, ``supergpqa``, ``dapo-math-17k``; beside them ``aime2025``, ``math-500``,
  ``gsm8k``), their hub ids, or any other hub id with a question/answer layout.

The forms are read by one module each: `specs` (the spec string), `files` (local files),
`adapters` (rows of each layout -> items, shared by files and the hub), `hub` (the paper's
benchmarks on the hub) and `testbed_problems`; the reasoning-gym sets are generated here.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from traac.common.items import Item
from traac.common.reasoning_gym_extra import import_reasoning_gym, reasoning_gym_tasks
from traac.data.adapters import OTB_OVERTHINK, OTB_UNDERTHINK, adapt_otb_hub
from traac.data.files import FILE_SUFFIXES, adapt_detected, load_file
from traac.data.hub import (
    HUB_DATASETS,
    HUB_NAME_BY_REPO,
    HubSource,
    HubUnavailable,
    load_hub,
    otb_math_rows,
)
from traac.data.specs import spec_options, split_spec
from traac.data.testbed_long import is_long_spec, parse_long_spec
from traac.data.testbed_problems import parse_spec
from traac.errors import TraacError

# UnderthinkingBench (OptimalThinkingBench): 50 items from each of these reasoning-gym tasks,
# with the generator settings the benchmark's authors published (other settings: defaults).
OTB_UNDERTHINK_TASKS: dict[str, dict[str, Any]] = {
    "ab": {"length": 20},
    "advanced_geometry": {"min_coord": -20, "max_coord": 20},
    "knight_swap": {},
    "tsumego": {"min_board_size": 15, "max_board_size": 19, "max_stones": 20},
    "fraction_simplification": {},
    "propositional_logic": {},
    "bitwise_arithmetic": {"difficulty": 4},
    "letter_counting": {"min_words": 25, "max_words": 35},
    "maze": {"min_dist": 15, "max_dist": 25, "min_grid_size": 15, "max_grid_size": 25},
    "puzzle24": {"min_value": 8, "max_value": 10},
    "quantum_lock": {"difficulty": 25},
}


def load_items(spec: str) -> list[Item]:
    """The items a dataset spec names (see the module docstring for the forms). A file or a hub
    id also takes ``?prompt_column=COLUMN`` (open-r1's `dataset_prompt_column`), and a hub id
    ``?config=NAME`` and ``?split=NAME``."""
    spec = spec.strip()
    if not spec:
        raise TraacError(
            "dataset: empty spec; pass a file, testbed:TIER, reasoning-gym:TASK or a name"
        )
    name, params = split_spec(spec)
    if name.startswith("testbed:") or name == "testbed":
        return list(parse_spec(spec))
    if is_long_spec(name):
        return parse_long_spec(spec)
    if name.startswith("reasoning-gym:"):
        task = name.split(":", 1)[1]
        return reasoning_gym_items(task, **spec_options(spec, params, default_size=50))
    if name == OTB_UNDERTHINK:
        return otb_underthink_items(**spec_options(spec, params, n=50))
    if name == "otb":
        try:
            over = load_hub(spec, HUB_DATASETS[OTB_OVERTHINK], {}, OTB_OVERTHINK)
        except TraacError as err:
            raise TraacError(
                f"{err} (OverthinkingBench, the overthinking half of 'otb', exists only on the "
                f"hub; '{OTB_UNDERTHINK}' is regenerated offline)"
            ) from err
        try:  # where the cache (or the hub) has them, as the leaderboard's footing does
            math = adapt_otb_hub(otb_math_rows(spec))
        except HubUnavailable:
            math = []  # the general rows only: the OTB score names that footing
        return over + otb_underthink_items(**spec_options(spec, params, n=50)) + math
    path = Path(name).expanduser()
    prompt_column = params.pop("prompt_column", None)
    if path.exists() or name.endswith(FILE_SUFFIXES):
        if params:
            raise TraacError(f"dataset {spec!r}: a file takes no ?{next(iter(params))} (only "
                             "?prompt_column; a split or config is a hub dataset's)")  # fmt: skip
        return load_file(path, prompt_column)
    name = HUB_NAME_BY_REPO.get(name, name)
    if name in HUB_DATASETS:
        if prompt_column is not None:
            raise TraacError(f"dataset {spec!r}: {name} has its own layout; drop prompt_column")
        return load_hub(spec, HUB_DATASETS[name], params, name)
    if name.count("/") == 1 and not name.startswith((".", "/", "~")):
        adapter = functools.partial(adapt_detected, prompt_column=prompt_column)
        return load_hub(spec, HubSource(name, adapter), params, name.split("/")[1])
    known = ", ".join([*HUB_DATASETS, OTB_UNDERTHINK, "otb"])
    raise TraacError(
        f"dataset {spec!r}: no such file, and not a known name ({known}), testbed:TIER, "
        "reasoning-gym:TASK or hub id OWNER/NAME"
    )


# --------------------------------------------------------------------------------------------
# reasoning-gym: procedural tasks, UnderthinkingBench.


def reasoning_gym_items(
    task: str, size: int = 50, seed: int = 0, data_source: str | None = None, **config: Any
) -> list[Item]:
    """`size` problems of a reasoning-gym task; each keeps its entry for the task's verifier."""
    what = f"dataset reasoning-gym:{task}"
    if task not in reasoning_gym_tasks(what):
        raise TraacError(f"reasoning-gym:{task}: no such task (see reasoning_gym.factory.DATASETS)")
    reasoning_gym = import_reasoning_gym(what)
    try:
        dataset = reasoning_gym.create_dataset(task, size=size, seed=seed, **config)
    except (TypeError, ValueError, AssertionError) as err:
        raise TraacError(f"reasoning-gym:{task}: bad configuration {config}: {err}") from err
    source = data_source or task
    items = []
    for i, entry in enumerate(dataset):
        entry = dict(entry)
        entry.setdefault("metadata", {}).setdefault("source_dataset", task)
        items.append(
            Item(
                id=f"{source}-{task}-{seed}-{i}" if data_source else f"{task}-{seed}-{i}",
                question=entry["question"],
                answer="" if entry.get("answer") is None else str(entry["answer"]),
                verifier="task",
                data_source=source,
                entry=entry,
            )
        )
    return items


def otb_underthink_items(n: int = 50, seed: int = 0) -> list[Item]:
    """UnderthinkingBench regenerated: `n` problems of each of its 11 reasoning-gym tasks."""
    items: list[Item] = []
    for task, config in OTB_UNDERTHINK_TASKS.items():
        items += reasoning_gym_items(task, size=n, seed=seed, data_source=OTB_UNDERTHINK, **config)
    return items
