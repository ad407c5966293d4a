"""How good is a step scorer? A model's own correct responses, with their steps labelled,
compressed under the paper's rule by each scorer and layer set, and four numbers for each:

- compressed share: responses that lost at least one step (gate 0.8, cap 0.8, no calibration;
  the ablation scorers evict e = tau of the steps, as the authors' code does);
- eviction precision: the share of evicted steps that were redundant (re-checks and restated
  conclusions), beside the share of all steps that are (what random eviction gets on average);
- compute loss: the share of computation steps evicted;
- answers kept: how often the answer the model writes from the compressed reasoning is still
  right (every response here was right before compression).

Step labels: `compute` (a computation the answer needs), `conclude` (the first statement of the
answer), `recheck` (a verification of what was already computed) and `restate` (the answer
stated again). The testbed labels its own responses; any model's responses can be labelled by
hand in a JSONL file (`read_labelled`).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from traac.common.items import Item
from traac.common.tables import Table, fmt
from traac.compression.compression import CompressionResult, Compressor, ScoreRequest, TokenScores
from traac.compression.factory import build_compressor
from traac.compression.formats import ChatFormat
from traac.compression.scoring import AttentionScorer, resolve_layers
from traac.compression.segmentation import split_steps
from traac.compression.settings import CompressionSettings
from traac.errors import TraacError
from traac.evaluation.inference.generation import Backend, Sampling
from traac.verification import verify_many

KINDS = ("compute", "conclude", "recheck", "restate")
REDUNDANT = frozenset({"recheck", "restate"})
TIER_TAUS = {"easy": 0.6, "medium": 0.4, "hard": 0.2}  # docs/method.md#step: the bins' rates
DEFAULT_TAU = 0.4
ANSWER_TOKENS = 64  # room for the regenerated answer


@dataclass(frozen=True)
class LabelledResponse:
    """One correct response: the prompt it answered (exact model input), its reasoning, one
    label per step of `split_steps(reasoning)`, the item that verifies an answer, and a tier."""

    id: str
    prompt: str
    reasoning: str
    labels: tuple[str, ...]
    item: Item
    tier: str = "all"

    def __post_init__(self) -> None:
        steps = split_steps(self.reasoning)
        if len(steps) != len(self.labels):
            raise TraacError(
                f"response {self.id}: {len(self.labels)} labels for {len(steps)} steps "
                "(one per step split at the phrases)"
            )
        bad = sorted(set(self.labels) - set(KINDS))
        if bad:
            raise TraacError(f"response {self.id}: unknown labels {bad}; use {', '.join(KINDS)}")

    @property
    def tau(self) -> float:
        return TIER_TAUS.get(self.tier, DEFAULT_TAU)


@dataclass(frozen=True)
class ScorerSpec:
    """One row of the report: a scorer, and for attention the layers it averages."""

    name: str
    settings: CompressionSettings

    @classmethod
    def attention(cls, layers: str, label: str | None = None, heads: str = "all") -> ScorerSpec:
        name = label or f"attention {layers}" + (", gated heads" if heads == "gated" else "")
        return cls(name, CompressionSettings(probe_layers=layers, probe_heads=heads))


@dataclass(frozen=True)
class ProbeStats:
    """The four numbers of one scorer on one set of responses (None where undefined)."""

    responses: int
    compressed_share: float
    evicted_steps: int
    precision: float | None
    redundant_share: float
    compute_loss: float | None
    answers_kept: float | None
    median_uniformity: float


@dataclass
class ProbeReport:
    """Rows (scorer name) x columns (tier, `all` last) of `ProbeStats`."""

    rows: dict[str, dict[str, ProbeStats]] = field(default_factory=dict)

    def table(self, tier: str = "all") -> Table:
        table = Table(
            ["scorer", "responses", "compressed", "evicted", "precision", "redundant share",
             "compute loss", "answers kept", "u (median)"],
            title=f"Step scorers on {tier} correct responses (paper's rule: gate 0.8, cap 0.8)",
        )  # fmt: skip
        for name, tiers in self.rows.items():
            s = tiers.get(tier)
            if s is None:
                continue
            table.add(
                name, str(s.responses), fmt(100 * s.compressed_share, suffix="%"),
                str(s.evicted_steps), fmt(s.precision, 3), fmt(s.redundant_share, 3),
                fmt(None if s.compute_loss is None else 100 * s.compute_loss, suffix="%"),
                fmt(None if s.answers_kept is None else 100 * s.answers_kept, suffix="%"),
                fmt(s.median_uniformity, 3),
            )  # fmt: skip
        return table

    def to_json(self) -> dict[str, Any]:
        return {name: {t: vars(s) for t, s in tiers.items()} for name, tiers in self.rows.items()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProbeReport:
        rows = {n: {t: ProbeStats(**s) for t, s in tiers.items()} for n, tiers in data.items()}
        return cls(rows)


def default_specs(num_layers: int, each_layer: bool = True) -> list[ScorerSpec]:
    """Attention over all layers (the paper), the first half (the authors' code for Qwen3) and
    (`each_layer`) each layer alone; both sets again with gated heads (beyond the paper); then
    the ablation scorers."""
    specs = [ScorerSpec.attention("all"), ScorerSpec.attention("first_half")]
    if each_layer:
        specs += [ScorerSpec.attention(str(k), f"attention layer {k}") for k in range(num_layers)]
    specs += [ScorerSpec.attention(layers, heads="gated") for layers in ("all", "first_half")]
    specs += [
        ScorerSpec("confidence", CompressionSettings(scorer="confidence")),
        ScorerSpec("step entropy", CompressionSettings(scorer="step_entropy")),
        ScorerSpec("random", CompressionSettings(scorer="random")),
    ]
    return specs


def foreign_specs(label: str) -> list[ScorerSpec]:
    """A foreign scorer's rows, named `label: ...`: its attention over all layers and the
    first half, each again with gated heads (beyond the paper). The ablation scorers and the
    single layers stay with the policy's own rows."""
    specs = default_specs(0, each_layer=False)
    attention = [s for s in specs if s.settings.scorer_kind.attention]
    return [replace(s, name=f"{label}: {s.name}") for s in attention]


class _LayerRows:
    """Every layer's closer row of each probe from one forward: a layer set's scores are then a
    mean over stored rows, with no forward of its own."""

    def __init__(self, model: Any, tokenizer: Any, batch_size: int = 32) -> None:
        self.scorer = AttentionScorer(model, tokenizer, "all", batch_size)
        self.cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # probe -> (offsets, L x T)

    def scores(self, requests: Sequence[ScoreRequest], layers: list[int]) -> list[TokenScores]:
        todo = list({r.probe: r for r in requests if r.probe not in self.cache}.values())
        self.cache.update(zip([r.probe for r in todo], self.scorer.score_layers(todo), strict=True))
        return [
            TokenScores(self.cache[r.probe][0], self.cache[r.probe][1][layers].mean(axis=0))
            for r in requests
        ]


@dataclass(frozen=True)
class _LayerSet:
    """A `Scorer` that averages the stored rows of some layers."""

    rows: _LayerRows
    layers: list[int]
    tokenizer: Any
    gated: bool = True

    def score(self, requests: Sequence[ScoreRequest]) -> list[TokenScores]:
        return self.rows.scores(requests, self.layers)


def probe_report(
    model: Any,
    tokenizer: Any,
    responses: Sequence[LabelledResponse],
    backend: Backend,
    specs: Sequence[ScorerSpec] | None = None,
    *,
    chat_format: ChatFormat | None = None,
    seed: int = 0,
    on_spec: Callable[[str], None] | None = None,
    tau: float | None = None,
) -> ProbeReport:
    """Compress every response with every scorer, regenerate the answers, measure. Each
    response is compressed at its tier's tau, or at `tau` when given: training compresses at
    its pass-rate bin's tau, and a bin mixes tiers (the easy bin's 0.6 reaches the medium and
    hard problems a group passes)."""
    if not responses:
        raise TraacError("probe report: no correct responses to score")
    fmt_ = chat_format or ChatFormat()
    num_layers = model.config.get_text_config().num_hidden_layers
    specs = list(specs or default_specs(num_layers))
    layer_rows = _LayerRows(model, tokenizer)
    contexts = [fmt_.reasoning_context(r.prompt) for r in responses]
    taus = [r.tau if tau is None else tau for r in responses]
    report = ProbeReport()
    for spec in specs:
        if on_spec is not None:
            on_spec(spec.name)
        settings = spec.settings
        if settings.scorer_kind.attention and not settings.gates_heads:
            layers = resolve_layers(settings.probe_layers or "all", num_layers)
            compressor = Compressor(_LayerSet(layer_rows, layers, tokenizer), fmt_, settings)
        else:
            compressor = build_compressor(settings, model, tokenizer, fmt_, seed=seed)
        results = compressor([r.reasoning for r in responses], taus, contexts)
        kept = _answers_kept(responses, results, backend, fmt_, seed)
        tiers = sorted({r.tier for r in responses}, key=lambda t: (t not in TIER_TAUS, t))
        row = {}
        for tier in dict.fromkeys([*tiers, "all"]):
            members = [k for k, r in enumerate(responses) if tier in ("all", r.tier)]
            row[tier] = _stats([responses[k] for k in members], [results[k] for k in members],
                               [kept[k] for k in members])  # fmt: skip
        report.rows[spec.name] = row
    return report


def _answers_kept(
    responses: Sequence[LabelledResponse],
    results: Sequence[CompressionResult],
    backend: Backend,
    chat_format: ChatFormat,
    seed: int,
) -> list[bool | None]:
    """For each compressed response, is the answer written from the compressed reasoning right?
    None where nothing was evicted."""
    todo = [k for k, res in enumerate(results) if res.compressed]
    out: list[bool | None] = [None] * len(results)
    verdicts = reanswer(
        [responses[k].prompt for k in todo], [results[k].text for k in todo],
        [responses[k].item for k in todo], backend, chat_format, seed,
        [f"{responses[k].id}#answer" for k in todo],
    )  # fmt: skip
    for k, ok in zip(todo, verdicts, strict=True):
        out[k] = ok
    return out


def reanswer(
    prompts: Sequence[str],
    reasonings: Sequence[str],
    items: Sequence[Item],
    backend: Backend,
    chat_format: ChatFormat,
    seed: int,
    keys: Sequence[str],
) -> list[bool]:
    """Is the answer each prompt's model writes after `reasonings[k]` (closed) right? Sampled
    at temperature 1, as training regenerates it; `keys` seed each row's draw."""
    if not prompts:
        return []
    prefixes = [chat_format.answer_prefix(r) for r in reasonings]
    full = [p + q for p, q in zip(prompts, prefixes, strict=True)]
    sampling = Sampling(temperature=1.0, top_p=1.0, max_new_tokens=ANSWER_TOKENS, seed=seed)
    texts = []
    for at in range(0, len(full), 64):
        texts += [
            g.text for g in backend.generate(full[at : at + 64], sampling, keys[at : at + 64])
        ]
    return verify_many(list(items), [p + t for p, t in zip(prefixes, texts, strict=True)])


def _stats(
    responses: Sequence[LabelledResponse],
    results: Sequence[CompressionResult],
    kept: Sequence[bool | None],
) -> ProbeStats:
    evicted = redundant = steps = redundant_steps = computes = computes_lost = 0
    for response, result in zip(responses, results, strict=True):
        labelled = zip(split_steps(response.reasoning), response.labels, strict=True)
        kinds = {s.start: kind for s, kind in labelled}
        steps += len(response.labels)
        redundant_steps += sum(k in REDUNDANT for k in response.labels)
        computes += sum(k == "compute" for k in response.labels)
        for step, keep in zip(result.steps, result.kept, strict=True):
            if keep or not step.text:
                continue
            kind = kinds.get(step.start, "unknown")
            evicted += 1
            redundant += kind in REDUNDANT
            computes_lost += kind == "compute"
    answered = [k for k in kept if k is not None]
    return ProbeStats(
        responses=len(responses),
        compressed_share=statistics.fmean(r.compressed for r in results),
        evicted_steps=evicted,
        precision=redundant / evicted if evicted else None,
        redundant_share=redundant_steps / steps if steps else 0.0,
        compute_loss=computes_lost / computes if computes else None,
        answers_kept=statistics.fmean(answered) if answered else None,
        median_uniformity=statistics.median(r.uniformity for r in results),
    )


def read_labelled(path: Path, render: Callable[[str], str]) -> list[LabelledResponse]:
    """Hand-labelled responses: JSONL lines {"id", "question", "reasoning", "labels": [one of
    compute|conclude|recheck|restate per step], "answer" (gold), optional "verifier" (math,
    choice, text), "tier"}. `render` turns a question into the model's prompt."""
    if not path.is_file():
        raise TraacError(f"--input {path}: no such file")
    out = []
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except UnicodeDecodeError as err:
        raise TraacError(f"--input {path}: not UTF-8 text ({err.reason})") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"--input {path} line {number}"
        try:
            row = json.loads(line)
            item = Item(
                id=str(row.get("id", number)),
                question=str(row["question"]),
                answer=str(row["answer"]),
                verifier=row.get("verifier", "math"),
            )
            out.append(
                LabelledResponse(
                    item.id,
                    render(item.question),
                    str(row["reasoning"]),
                    tuple(row["labels"]),
                    item,
                    str(row.get("tier", "all")),
                )
            )
        except json.JSONDecodeError as err:
            raise TraacError(f"{where}: not JSON ({err.msg})") from None
        except (KeyError, TypeError) as err:
            raise TraacError(
                f"{where}: needs question, reasoning, labels and answer ({err})"
            ) from None
        except TraacError as err:
            raise TraacError(f"{where}: {err}") from None
    if not out:
        raise TraacError(f"--input {path}: no lines")
    return out
