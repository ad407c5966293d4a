"""`traac compress`: score the steps of reasoning traces and prune the least important ones.

Input is the reasoning itself (the text inside the think block): a text file holding one trace,
or a `.jsonl` file with a `reasoning` field on every line (and a `question` field for the
confidence scorer, which reads the model's distribution with the question in context). Prints a
table of steps per trace and the summary (u, e, tokens before -> after); optionally writes the
results as JSON and as a self-contained HTML page (steps shaded by score, evicted ones struck).
`--scoring-model` scores with another model (beyond the paper), through its own tokenizer.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from traac.commands import (
    MODEL_HELP,
    ArgumentParser,
    add_compress_tau,
    add_device_map,
    add_scoring_model,
    check_count,
    check_model,
    check_placement,
    settings_from,
)
from traac.common.outputs import output_file, write_text
from traac.compression.formats import ChatFormat
from traac.compression.settings import TEST_TIME_TAU, CompressionSettings, FormatSettings
from traac.errors import TraacError

# The options and the input are checked before the model stack (torch) is imported, in `main`.


@dataclass(frozen=True)
class Trace:
    """One reasoning trace to compress and where it came from (for messages and titles)."""

    title: str
    where: str
    reasoning: str
    question: str | None = None


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        CompressionSettings,
        FormatSettings,
        prog="traac compress",
        description="Score each reasoning step (attention from the think closer by default) "
        "and evict the lowest-scored ones, as TRAAC's compression module does.",
    )
    parser.add_argument("--model", default=None, help=MODEL_HELP)
    parser.add_argument(
        "--input",
        required=True,
        type=Path,
        help="a text file holding one reasoning trace, or a .jsonl file with a 'reasoning' "
        "field per line (and 'question' for the confidence scorer)",
    )
    add_compress_tau(
        parser, f"target compression rate (default {TEST_TIME_TAU})", default=TEST_TIME_TAU
    )
    parser.set_defaults(chat_format="response-opens")
    add_scoring_model(parser)
    parser.add_argument("--seed", type=int, default=0, help="seed of the random scorer")
    parser.add_argument("--batch-size", type=int, default=8, help="traces per forward pass")
    parser.add_argument("--device", default="auto", help="cpu, cuda, cuda:N (default: auto)")
    add_device_map(parser)
    parser.add_argument("--html", type=Path, help="write the step viewer to this HTML file")
    parser.add_argument("--json", type=Path, help="write the results to this JSON file")
    return parser


def read_traces(path: Path, chat_format: ChatFormat) -> list[Trace]:
    """The traces in `path`, each checked to be a non-empty reasoning without delimiters."""
    if not path.exists():
        raise TraacError(f"--input {path}: no such file")
    if path.is_dir():
        raise TraacError(f"--input {path}: is a directory; pass a text or .jsonl file")
    try:
        content = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise TraacError(f"--input {path}: not UTF-8 text ({err.reason})") from None
    if path.suffix.lower() != ".jsonl":
        traces = [Trace(path.name, f"--input {path}", content)]
    else:
        traces = []
        for number, line in enumerate(content.split("\n"), start=1):
            if not line.strip():
                continue
            where = f"--input {path} line {number}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise TraacError(f"{where}: not valid JSON ({err.msg})") from None
            if not isinstance(record, dict) or "reasoning" not in record:
                raise TraacError(f"{where}: no 'reasoning' field")
            if not isinstance(record["reasoning"], str):
                raise TraacError(f"{where}: 'reasoning' must be a string")
            question = record.get("question")
            if question is not None and not isinstance(question, str):
                raise TraacError(f"{where}: 'question' must be a string")
            title = str(record.get("id", f"line {number}"))
            traces.append(Trace(title, where, record["reasoning"], question))
        if not traces:
            raise TraacError(f"--input {path}: no lines; expected one JSON object per line")
    for trace in traces:
        check_reasoning(trace, chat_format)
    return traces


def check_reasoning(trace: Trace, chat_format: ChatFormat) -> None:
    if not trace.reasoning.strip():
        raise TraacError(f"{trace.where}: the reasoning is empty")
    for delimiter in (chat_format.think_close, chat_format.think_open):
        if delimiter in trace.reasoning:
            raise TraacError(
                f"{trace.where}: the reasoning contains {delimiter!r}; pass only the text "
                "inside the think block"
            )


def check_lengths(
    traces: list[Trace], tokenizer: Any, limit: int | None, chat_format: ChatFormat, aux: str
) -> None:
    """Name the trace whose probe exceeds the model's positions (nothing is truncated)."""
    from traac.compression.compression import count_tokens

    if limit is None:
        return
    for trace in traces:
        n = count_tokens(tokenizer, chat_format.probe_text(trace.reasoning, aux))
        if n > limit:
            raise TraacError(
                f"{trace.where}: the probe (reasoning + auxiliary prompt + delimiters) is {n} "
                f"tokens but the model takes at most {limit} positions"
            )


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    check_count("--batch-size", args.batch_size)
    settings = settings_from(args, CompressionSettings)
    think = settings_from(args, FormatSettings)
    output_file(args.html, "--html")
    output_file(args.json, "--json")
    check_placement(args.device, args.device_map)
    check_model("--model", args.model)
    traces = read_traces(args.input, think.resolve())
    from traac.common.models import load_config, load_model, load_tokenizer, resolve_placement
    from traac.common.scoring_model import check_scoring_model, resolve_scoring_model
    from traac.compression.compression import CompressionResult
    from traac.compression.factory import build_compressor, check_probe_layers
    from traac.compression.scoring import closer_query
    from traac.console import make_console, make_progress, print_lines, print_steps
    from traac.evaluation.reports.viewer import render_html
    from traac.pipelines.model_registry import resolve_model

    device, device_map = resolve_placement(args.device, args.device_map)
    kind = settings.scorer_kind
    check_scoring_model(args.scoring_model, settings.scorer, "--scoring-model", kind.policy)
    if kind.policy:
        missing = [t.where for t in traces if not t.question]
        if missing:
            raise TraacError(
                f"{missing[0]}: the {settings.scorer} scorer reads the model's distribution with "
                "the question in context; give each line a 'question' field"
            )

    path = resolve_model(args.model, make_progress())
    tokenizer = load_tokenizer(path)
    chat_format = think.resolve(tokenizer)
    # The scorer reads the text through its own tokenizer (the same as --model's by default).
    scoring = resolve_scoring_model(args.scoring_model, policy_path=path)
    scoring_path = scoring.path or path
    scorer_tokenizer = scoring.tokenizer if scoring.foreign else tokenizer
    model = None
    if kind.needs_model:
        check_probe_layers(settings, scoring_path)
        config = load_config(scoring_path).get_text_config()
        limit = getattr(config, "max_position_embeddings", None)
        check_lengths(traces, scorer_tokenizer, limit, chat_format, settings.aux_prompt)
        model = load_model(scoring_path, device=device, device_map=device_map)
    compressor = build_compressor(
        settings, model, scorer_tokenizer, chat_format, seed=args.seed, batch_size=args.batch_size
    )
    results: list[CompressionResult] = []
    progress = make_progress()
    with progress.task("scoring", len(traces)) as task:
        for at in range(0, len(traces), args.batch_size):
            chunk = traces[at : at + args.batch_size]
            contexts = [context(tokenizer, chat_format, t.question) for t in chunk]
            results += compressor(
                [t.reasoning for t in chunk], [args.compress_tau] * len(chunk), contexts
            )
            task.advance(len(chunk))

    console = make_console(stderr=False)
    query = closer_query(scorer_tokenizer, chat_format.think_close)
    if kind.attention:
        print_lines(console, [query])
    records = []
    for trace, result in zip(traces, results, strict=True):
        steps = result.step_records(tokenizer)
        print_steps(console, trace.title, result, steps, settings.step_scope)
        records.append(
            {
                "title": trace.title,
                "reasoning": result.reasoning,
                "compressed": result.text,
                "uniformity": result.uniformity,
                "eviction_fraction": result.eviction_fraction,
                "tokens_before": result.tokens_before,
                "tokens_after": result.tokens_after,
                "steps": [asdict(s) for s in steps],
            }
        )
    written = []
    if args.json is not None:
        payload = {
            "settings": {
                "model": args.model,
                "scoring_model": args.scoring_model,
                "compress_tau": args.compress_tau,
                "seed": args.seed,
                "probe_query": query,
                **asdict(settings),
            },
            "traces": records,
        }
        write_text(args.json, json.dumps(payload, indent=2, ensure_ascii=False) + "\n", "--json")
        written.append(f"wrote {args.json}")
    if args.html is not None:
        write_text(args.html, render_html(results, [t.title for t in traces]), "--html")
        written.append(f"wrote {args.html}")
    print_lines(console, written)
    return 0


def context(tokenizer: Any, chat_format: ChatFormat, question: str | None) -> str | None:
    """What the model read before the reasoning: the question's prompt and the opener."""
    from traac.evaluation.harness.prompts import render_prompt

    if question is None:
        return None
    return chat_format.reasoning_context(render_prompt(tokenizer, question))
