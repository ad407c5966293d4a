"""The card's measurement: does the built model over- and under-think, and can the probe tell?

On fresh evaluation problems (the default `testbed:<tier>` sets, never trained on), sampled at
temperature 1.0: accuracy, think length and share of responses that re-check after answering,
per tier; then the attention probe of TRAAC on the model's own correct responses: uniformity u
and eviction fraction e per tier, and the mean probe score of re-check steps against key steps;
and the probe report of every scorer (share compressed, eviction precision, compute loss,
answers kept).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from traac.common.items import Item
from traac.common.progress import NullProgress, Progress
from traac.compression.compression import Compressor, ScoreRequest, TokenScores
from traac.compression.factory import build_compressor
from traac.compression.formats import ChatFormat
from traac.compression.settings import CompressionSettings
from traac.data.testbed_long import LONG_SOURCE, REDUNDANT
from traac.data.testbed_problems import DATA_SOURCE, EVAL_SEED, make_items
from traac.evaluation.inference.generation import TransformersBackend
from traac.evaluation.reports.probe_report import LabelledResponse, default_specs, probe_report
from traac.testbed.config import LongTeacherSettings, TestbedSettings
from traac.testbed.long_traces import coarse_reasoning_kinds, reasoning_kinds
from traac.testbed.tokenizer import THINK_CLOSE, render_prompts
from traac.testbed.traces import Trace, step_kinds
from traac.verification import verify_many

Kinds = Callable[[str], list[str]]  # a reasoning -> its steps' kinds (compute, conclude, recheck)
TAUS = {"easy": 0.6, "medium": 0.4, "hard": 0.2}  # docs/method.md#step: target rate per bin
QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)
PROBE_REPORT_PER_TIER = 100  # correct responses a tier the card's probe report scores
TARGETS = {
    "easy_accuracy_min": 0.85,
    "hard_accuracy_range": (0.30, 0.75),
    "easy_over_hard_think_min": 0.60,
    "easy_recheck_share_min": 0.50,
}


@dataclass(frozen=True)
class Sample:
    """One sampled response to an item."""

    item: Item
    text: str  # decoded response, without eos
    tokens: int  # response tokens (eos excluded)
    think_tokens: int  # tokens before the first closer (all of them if it never closes)


class SavedDraws:
    """`generate`'s batches kept in a JSONL file as they are drawn, each with torch's random
    state after it, so a stopped sampling resumes after its last saved batch and draws what an
    unstopped one would (the draws come from the global generator, batch after batch). The
    first line holds `key` (what was sampled, from which model); a file of another key, or
    none, starts over, and a torn last line is dropped."""

    def __init__(self, path: Path, key: str) -> None:
        self.path = path
        try:
            lines = path.read_text().splitlines() if path.is_file() else []
        except UnicodeDecodeError:  # not this class's file: start over
            lines = []
        rows = []
        for line in lines[1:]:
            try:
                row = json.loads(line)
            except ValueError:
                break  # written halfway when the run stopped
            if not (isinstance(row, dict) and isinstance(row.get("ids"), list)
                    and isinstance(row.get("rng"), str)):  # fmt: skip
                break  # not a batch this class wrote: drawn again from here
            rows.append(row)
        same = bool(lines) and lines[0] == json.dumps({"key": key})
        self.batches: list[list[list[int]]] = [r["ids"] for r in rows] if same else []
        self.state = rows[-1]["rng"] if same and rows else None
        kept = [json.dumps({"key": key}), *lines[1 : 1 + len(self.batches)]]
        path.write_text("".join(line + "\n" for line in kept))

    def resume(self) -> None:
        """Torch's random state as the last saved batch left it."""
        if self.state is not None:
            torch.set_rng_state(torch.tensor(list(base64.b64decode(self.state)), dtype=torch.uint8))

    def add(self, ids: list[list[int]]) -> None:
        rng = base64.b64encode(bytes(torch.get_rng_state().tolist())).decode()
        with open(self.path, "a") as f:
            f.write(json.dumps({"ids": ids, "rng": rng}) + "\n")


def generate(
    model: Any,
    tokenizer: Any,
    items: Sequence[Item],
    samples: int,
    temperature: float,
    max_new_tokens: int,
    batch_size: int,
    progress: Progress | None = None,
    saved: SavedDraws | None = None,
) -> list[Sample]:
    """`samples` responses per item with `model.generate`, left-padded batches; with `saved`,
    resumed from and kept in its file."""
    jobs = [item for item in items for _ in range(samples)]
    prompts = render_prompts(tokenizer, [item.question for item in jobs])
    stop = {tokenizer.eos_token_id, tokenizer.pad_token_id}
    close = tokenizer(THINK_CLOSE, add_special_tokens=False).input_ids
    tokenizer.padding_side = "left"
    out: list[Sample] = []
    before = saved.batches if saved is not None else []
    if saved is not None:
        saved.resume()
    resumed = min(len(jobs), batch_size * len(before))
    with (progress or NullProgress()).task(
        f"testbed: sampling, T={temperature}", len(jobs), completed=resumed
    ) as task:
        for k, at in enumerate(range(0, len(jobs), batch_size)):
            new = before[k] if k < len(before) else None
            if new is None:
                new = _draw(model, tokenizer, prompts[at : at + batch_size], temperature,
                            max_new_tokens)  # fmt: skip
                if saved is not None:
                    saved.add(new)
                task.advance(len(new))
            for item, ids in zip(jobs[at : at + batch_size], new, strict=True):
                end = next((i for i, t in enumerate(ids) if t in stop), len(ids))
                ids = ids[:end]
                text = tokenizer.decode(ids, skip_special_tokens=False)
                think = _think_tokens(tokenizer, ids, text, close)
                out.append(Sample(item, text, len(ids), think))
    return out


def _draw(
    model: Any, tokenizer: Any, prompts: list[str], temperature: float, max_new_tokens: int
) -> list[list[int]]:
    """One left-padded batch's sampled token ids (padding and all, after the prompt)."""
    batch = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.no_grad():
        generated = model.generate(
            **batch,
            do_sample=True,
            temperature=temperature,
            top_p=1.0,
            top_k=0,
            max_new_tokens=max_new_tokens,
        )
    return generated[:, batch["input_ids"].shape[1] :].tolist()


def _think_tokens(tokenizer: Any, ids: list[int], text: str, close: list[int]) -> int:
    """Tokens before the first closer: found by id where the closer is one token (the testbed),
    else by text (a pretrained tokenizer spells it in several)."""
    if len(close) == 1:
        return ids.index(close[0]) if close[0] in ids else len(ids)
    cut = text.find(THINK_CLOSE)
    if cut < 0:
        return len(ids)
    return len(tokenizer(text[:cut], add_special_tokens=False).input_ids)


class _CachedScorer:
    """Scores each distinct probe text once, however many compressors ask for it."""

    def __init__(self, scorer: Any) -> None:
        self.scorer = scorer
        self.tokenizer = scorer.tokenizer
        self.cache: dict[str, TokenScores] = {}

    @property
    def gated(self) -> bool:
        return self.scorer.gated

    def score(self, requests: Sequence[ScoreRequest]) -> list[TokenScores]:
        missing = {r.probe: r for r in requests if r.probe not in self.cache}
        if missing:
            found = self.scorer.score(list(missing.values()))
            self.cache.update(zip(missing, found, strict=True))
        return [self.cache[r.probe] for r in requests]


def _quantiles(values: Sequence[float]) -> dict[str, float]:
    if not len(values):
        return {}
    arr = np.asarray(values, dtype=np.float64)
    out = {f"q{int(q * 100)}": round(float(np.quantile(arr, q)), 4) for q in QUANTILES}
    out["mean"] = round(float(arr.mean()), 4)
    return out


def probe(
    model: Any,
    tokenizer: Any,
    correct: dict[str, list[str]],
    each_layer: bool = True,
    kinds_of: Kinds = step_kinds,
) -> dict[str, Any]:
    """Attention-probe statistics on correct reasonings, per tier (TRAAC's default compressor);
    `each_layer` adds each layer's scores alone (a forward pass per layer); `kinds_of` labels a
    reasoning's steps compute, conclude or recheck."""
    attention = build_compressor(CompressionSettings(), model, tokenizer, batch_size=64).scorer
    scorer = _CachedScorer(attention)
    default = Compressor(scorer)  # scope probe, gate 0.8, cap 0.8, as in training
    per_step = _reasoning_scope(scorer)  # per-step scores of the reasoning alone
    out: dict[str, Any] = {}
    ratios, lower = [], []
    for tier, reasonings in correct.items():
        if not reasonings:
            continue
        results = default(reasonings, [TAUS.get(tier, 0.4)] * len(reasonings))
        out[tier] = {
            "responses": len(reasonings),
            "uniformity": _quantiles([r.uniformity for r in results]),
            "eviction_fraction": _quantiles([r.eviction_fraction for r in results]),
            "compressed_share": round(float(np.mean([r.compressed for r in results])), 4),
        }
        for result in per_step(reasonings, [0.0] * len(reasonings)):
            kinds = np.array(kinds_of(result.reasoning))
            scores = result.scores
            if len(kinds) != len(scores) or scores.mean() <= 0 or not (kinds == "recheck").any():
                continue
            key = float(scores[kinds != "recheck"].mean())
            recheck = float(scores[kinds == "recheck"].mean())
            ratios.append(recheck / key)
            lower.append(recheck < key)
    everything = [r for reasonings in correct.values() for r in reasonings]
    out["recheck_vs_key"] = {
        "responses": len(ratios),
        "mean_ratio": round(float(np.mean(ratios)), 4) if ratios else None,
        "share_recheck_lower": round(float(np.mean(lower)), 4) if lower else None,
        "relative_score": _relative_scores(per_step, everything, kinds_of),
        # the same with one layer's attention: which layers tell re-checks from key steps
        # (a recipe's `probe_layers` can pick them)
        "relative_score_by_layer": {
            str(layer): _relative_scores(_one_layer(model, tokenizer, layer), everything, kinds_of)
            for layer in range(model.config.num_hidden_layers if each_layer else 0)
        },
    }
    return out


def _one_layer(model: Any, tokenizer: Any, layer: int) -> Compressor:
    settings = CompressionSettings(probe_layers=str(layer), step_scope="reasoning")
    return build_compressor(settings, model, tokenizer, batch_size=64)


def _reasoning_scope(scorer: Any) -> Compressor:
    return Compressor(scorer, ChatFormat(), CompressionSettings(step_scope="reasoning"))


def _relative_scores(
    compressor: Compressor, reasonings: list[str], kinds_of: Kinds
) -> dict[str, float]:
    """Mean over responses of each step kind's mean score over the response's mean score."""
    relative: dict[str, list[float]] = {"compute": [], "conclude": [], "recheck": []}
    for result in compressor(reasonings, [0.0] * len(reasonings)):
        kinds = np.array(kinds_of(result.reasoning))
        if len(kinds) != len(result.scores) or result.scores.mean() <= 0:
            continue
        for kind, values in relative.items():
            if (kinds == kind).any():
                values.append(float(result.scores[kinds == kind].mean() / result.scores.mean()))
    return {k: round(float(np.mean(v)), 4) for k, v in relative.items() if v}


def labelled_responses(
    model: Any,
    tokenizer: Any,
    per_tier: int,
    samples: int,
    seed: int = 0,
    progress: Progress | None = None,
    max_new_tokens: int = 200,
) -> list[LabelledResponse]:
    """The model's correct, well-formed responses (temperature 1) to fresh evaluation problems,
    each step labelled by `step_kinds`: what the probe report scores."""
    items = make_items("all", per_tier, EVAL_SEED, "eval")
    torch.manual_seed(seed)
    drawn = generate(model, tokenizer, items, samples, 1.0, max_new_tokens, 64, progress)
    verdicts = verify_many([s.item for s in drawn], [s.text for s in drawn])
    return _labelled(tokenizer, drawn, verdicts)


def _labelled(
    tokenizer: Any, drawn: Sequence[Sample], verdicts: Sequence[bool], kinds_of: Kinds = step_kinds
) -> list[LabelledResponse]:
    """The correct, well-formed responses among `drawn`, each step labelled by `kinds_of`."""
    prompts = render_prompts(tokenizer, [s.item.question for s in drawn])
    chat_format = ChatFormat()
    out = []
    for k, (sample, ok, prompt) in enumerate(zip(drawn, verdicts, prompts, strict=True)):
        parsed = chat_format.parse(sample.text)
        if ok and parsed.well_formed and parsed.reasoning.strip():
            labels = tuple(kinds_of(parsed.reasoning))
            tier = sample.item.tier or "all"
            out.append(
                LabelledResponse(
                    f"{sample.item.id}#{k}", prompt, parsed.reasoning, labels, sample.item, tier
                )
            )
    return out


def _probe_report(
    model: Any, tokenizer: Any, responses: list[LabelledResponse], seed: int
) -> dict[str, Any]:
    """`traac probe-report`'s numbers on up to PROBE_REPORT_PER_TIER correct responses a tier,
    spread evenly over the tier's problems: attention (paper: all layers; the authors' first
    half; each with gated heads) against the ablation scorers, under the paper's rule with no
    calibration."""
    per_tier: dict[str, list[LabelledResponse]] = {}
    for r in responses:
        per_tier.setdefault(r.tier, []).append(r)
    chosen = [
        r
        for rows in per_tier.values()
        for r in rows[:: max(1, len(rows) // PROBE_REPORT_PER_TIER)][:PROBE_REPORT_PER_TIER]
    ]
    if not chosen:
        return {}
    specs = default_specs(model.config.num_hidden_layers, each_layer=False)
    backend = TransformersBackend(model, tokenizer)
    return probe_report(model, tokenizer, chosen, backend, specs, seed=seed).to_json()


def measure(
    model: Any, tokenizer: Any, config: TestbedSettings, progress: Progress | None = None
) -> dict:
    """The properties asked of a built testbed, each with pass/fail against its bound."""
    progress = progress or NullProgress()
    m = config.measure
    long = isinstance(config.teacher, LongTeacherSettings)
    kinds_of = coarse_reasoning_kinds if long else step_kinds
    source = LONG_SOURCE if long else DATA_SOURCE
    items = make_items("all", m.n_per_tier, EVAL_SEED, "eval", config.tiers, source)
    torch.manual_seed(config.seed + 1)
    samples = generate(
        model, tokenizer, items, m.samples, m.temperature, m.max_new_tokens, m.batch_size, progress
    )
    verdicts = verify_many([s.item for s in samples], [s.text for s in samples])
    chat_format = ChatFormat()
    tiers: dict[str, Any] = {}
    correct: dict[str, list[str]] = {}
    for tier in config.tiers.terms:
        rows = [s for s in samples if s.item.tier == tier]
        right = [ok for s, ok in zip(samples, verdicts, strict=True) if s.item.tier == tier]
        parsed = [chat_format.parse(s.text) for s in rows]
        tiers[tier] = {
            "responses": len(rows),
            "distinct_problems": len({s.item.question for s in rows}),
            "accuracy": round(float(np.mean(right)), 4),
            "well_formed": round(float(np.mean([p.well_formed for p in parsed])), 4),
            "think_tokens": round(float(np.mean([s.think_tokens for s in rows])), 1),
            "response_tokens": round(float(np.mean([s.tokens for s in rows])), 1),
            "recheck_share": round(
                float(np.mean(["recheck" in kinds_of(p.reasoning) for p in parsed])), 4
            ),
        }
        if long:  # the steps of each kind the model writes, by the teacher's grammar
            tiers[tier]["step_kinds"] = step_shares([p.reasoning for p in parsed])
        correct[tier] = [
            p.reasoning for p, ok in zip(parsed, right, strict=True) if ok and p.well_formed
        ]
    with progress.phase("testbed: attention probe on the correct responses"):
        # a pretrained base has 30 layers: a pass each costs more than the rest of the card
        probed = probe(model, tokenizer, correct, config.base is None, kinds_of)
    with progress.phase("testbed: probe report (every scorer, the paper's rule)"):
        report = _probe_report(
            model, tokenizer, _labelled(tokenizer, samples, verdicts, kinds_of), config.seed
        )
    return {
        "problems_per_tier": m.n_per_tier,
        "samples": m.samples,
        "temperature": m.temperature,
        "eval_seed": EVAL_SEED,
        "tiers": tiers,
        "probe": probed,
        "probe_report": report,
        "targets": check_targets(tiers),
    }


def step_shares(reasonings: Sequence[str]) -> dict[str, Any]:
    """Of all steps in `reasonings`, the share of each kind (`testbed_long.LongKind`) and of the
    redundant ones together; the mean number of steps a response."""
    counts: dict[str, int] = {}
    for reasoning in reasonings:
        for kind in reasoning_kinds(reasoning):
            counts[kind] = counts.get(kind, 0) + 1
    total = sum(counts.values())
    shares = {k: round(n / total, 4) for k, n in sorted(counts.items())} if total else {}
    redundant = sum(counts.get(k, 0) for k in REDUNDANT)
    return {
        "steps_per_response": round(total / len(reasonings), 2) if reasonings else 0.0,
        "redundant_share": round(redundant / total, 4) if total else 0.0,
        "shares": shares,
    }


def check_targets(tiers: dict[str, Any]) -> dict[str, Any]:
    """Each property's bound, with its measured value and whether it is met."""
    easy, hard = tiers["easy"], tiers["hard"]
    ratio = easy["think_tokens"] / hard["think_tokens"] if hard["think_tokens"] else 0.0
    lo, hi = TARGETS["hard_accuracy_range"]
    checks = {
        "easy_accuracy": (easy["accuracy"], easy["accuracy"] >= TARGETS["easy_accuracy_min"]),
        "hard_accuracy": (hard["accuracy"], lo <= hard["accuracy"] <= hi),
        "easy_over_hard_think": (
            round(ratio, 4),
            ratio >= TARGETS["easy_over_hard_think_min"],
        ),
        "easy_recheck_share": (
            easy["recheck_share"],
            easy["recheck_share"] >= TARGETS["easy_recheck_share_min"],
        ),
    }
    out: dict[str, Any] = {k: {"value": v, "met": ok} for k, (v, ok) in checks.items()}
    out["all_met"] = all(ok for _, ok in checks.values())
    return out


def teacher_stats(traces: Sequence[Trace], tokenizer: Any) -> dict[str, Any]:
    """What the model was taught: shares of each behaviour in the SFT traces."""
    return {
        "traces": len(traces),
        "correct": round(float(np.mean([t.correct for t in traces])), 4),
        "with_recheck": round(float(np.mean([t.n_rechecks > 0 for t in traces])), 4),
        "slipped": round(float(np.mean([t.slipped for t in traces])), 4),
        "guessed": round(float(np.mean([t.guessed for t in traces])), 4),
        "interrupted": round(float(np.mean([t.interrupted for t in traces])), 4),
        "mean_response_tokens": round(
            float(np.mean([len(tokenizer(t.response()).input_ids) for t in traces[:2000]])), 1
        ),
    }
