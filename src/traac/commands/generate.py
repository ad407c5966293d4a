"""`traac generate`: answer prompts with test-time attentive compression and think budgets.

The model thinks until it closes its think block, the least attended reasoning steps are pruned
at a fixed tau, and the model writes its answer from the pruned reasoning
(docs/method.md#test-time). With `--think-budget B` a think block still open at B tokens is
interrupted the paper's way (auxiliary prompt and closer appended) and answered; pruned first
with `--compress-tau`.
Prints each reasoning with the pruned steps struck through, the answer, and reasoning tokens
before -> after; `--show-steps` adds the table of step scores.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from traac.commands import (
    MODEL_HELP,
    ArgumentParser,
    add_compress_tau,
    add_device_map,
    add_scoring_model,
    check_count,
    check_model,
    check_placement,
    check_test_time_scorer,
    settings_from,
)
from traac.common.outputs import output_file, write_text
from traac.common.sampling import check_sampling
from traac.compression.settings import (
    TEST_TIME_TAU,
    CompressionSettings,
    FormatSettings,
    check_compression_read,
)
from traac.errors import TraacError
from traac.evaluation.inference.engines import PROBE_MODES

if TYPE_CHECKING:
    from traac.evaluation.inference.testtime import ThinkingGenerator

# Options are checked (`check_args`) before the model stack is imported (`load_generator`).


@dataclass(frozen=True)
class Question:
    """One prompt to answer and where it came from (for messages and titles)."""

    title: str
    where: str
    text: str


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        CompressionSettings,
        FormatSettings,
        prog="traac generate",
        description="Generate with test-time attentive compression: think, prune the least "
        "attended reasoning steps, answer from the rest; --think-budget interrupts long think "
        "blocks the paper's way.",
    )
    parser.add_argument("--model", default=None, help=MODEL_HELP)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--prompt", help="one question (the model's chat template is applied)")
    source.add_argument(
        "--input",
        type=Path,
        help="a text file with one question per line, or a .jsonl file with a 'prompt' (or "
        "'question') field per line",
    )
    add_compress_tau(
        parser,
        f"target compression rate (default {TEST_TIME_TAU}; with --think-budget: none, "
        "an interrupted think block is answered as written)",
    )
    parser.add_argument(
        "--think-budget",
        dest="think_budget",
        type=int,
        metavar="B",
        help="interrupt a think block at B tokens: the auxiliary prompt and the closer are "
        "appended and the model answers (pruned first with --compress-tau)",
    )
    parser.add_argument("--show-steps", action="store_true", help="print the step score table")
    parser.add_argument(
        "--max-new-tokens",
        type=int,
        default=None,
        help="tokens per response, think block and answer together (default: what fits the "
        "model's context, at most 1024)",
    )
    parser.add_argument("--temperature", type=float, default=1.0, help="0: greedy (default 1.0)")
    parser.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling (default 1.0)")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    add_scoring_model(
        parser,
        "the model whose attention scores the steps (default: --model itself; beyond the "
        "paper, any model: steps map to its tokenizer through character offsets, and the "
        "probe re-runs after decoding: --probe reforward)",
    )
    parser.add_argument(
        "--probe",
        choices=PROBE_MODES,
        default="cached",
        help="score from a prompt-free cache built while decoding (default) or re-run the "
        "whole probe text after decoding (less work on a CPU); same scores",
    )
    parser.add_argument(
        "--batch-size", type=int, default=8, help="prompts decoded together (default 8)"
    )
    parser.add_argument("--device", default="auto", help="cpu, cuda, cuda:N (default: auto)")
    add_device_map(parser)
    parser.add_argument("--dtype", help="float32, bfloat16, float16 (default: by device)")
    parser.add_argument("--html", type=Path, help="write the printed report as an HTML page")
    parser.add_argument("--json", type=Path, help="write the samples to this JSON file")
    return parser


def check_args(args: argparse.Namespace) -> None:
    check_test_time_scorer(args.scoring_model, compress_tau(args), args.scorer)
    check_count("--think-budget", args.think_budget)
    check_count("--max-new-tokens", args.max_new_tokens)
    check_sampling(args.temperature, args.top_p, args.max_new_tokens)
    check_count("--batch-size", args.batch_size)
    check_placement(args.device, args.device_map)
    check_model("--model", args.model)
    if args.scoring_model is not None:
        check_model("--scoring-model", args.scoring_model)
    compression = settings_from(args, CompressionSettings)
    budget = args.think_budget is not None
    check_compression_read(compression, compress_tau(args) is not None, budget)
    settings_from(args, FormatSettings)
    output_file(args.html, "--html")
    output_file(args.json, "--json")


def read_questions(args: argparse.Namespace) -> list[Question]:
    """The questions of --prompt or --input, each checked to be non-empty."""
    if args.prompt is not None:
        if not args.prompt.strip():
            raise TraacError("--prompt: empty; give the question to answer")
        return [Question("prompt", "--prompt", args.prompt)]
    path: Path = args.input
    if not path.exists():
        raise TraacError(f"--input {path}: no such file")
    if path.is_dir():
        raise TraacError(f"--input {path}: is a directory; pass a text or .jsonl file")
    try:
        content = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise TraacError(f"--input {path}: not UTF-8 text ({err.reason})") from None
    jsonl = path.suffix.lower() == ".jsonl"
    questions = []
    for number, line in enumerate(content.split("\n"), start=1):
        if not line.strip():
            continue
        where = f"--input {path} line {number}"
        title = f"line {number}"
        text = line
        if jsonl:
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise TraacError(f"{where}: not valid JSON ({err.msg})") from None
            key = next(
                (k for k in ("prompt", "question") if isinstance(record, dict) and k in record),
                None,
            )
            if key is None:
                raise TraacError(f"{where}: no 'prompt' or 'question' field")
            text = record[key]
            if not isinstance(text, str) or not text.strip():
                raise TraacError(f"{where}: '{key}' must be a non-empty string")
            title = str(record.get("id", title))
        questions.append(Question(title, where, text))
    if not questions:
        raise TraacError(f"--input {path}: no prompts (the file is empty)")
    return questions


def compress_tau(args: argparse.Namespace) -> float | None:
    """The tau to compress at: as given; else the paper's test-time tau, except under a think
    budget, which then interrupts and answers without pruning."""
    if args.compress_tau is not None or args.think_budget is not None:
        return args.compress_tau
    return TEST_TIME_TAU


def load_generator(args: argparse.Namespace) -> ThinkingGenerator:
    from traac.common.models import load_model, load_tokenizer, resolve_dtype, resolve_placement
    from traac.common.scoring_model import resolve_scoring_model
    from traac.compression.factory import check_probe_layers
    from traac.console import make_progress
    from traac.evaluation.inference.testtime import ThinkingGenerator
    from traac.pipelines.model_registry import resolve_model

    settings = settings_from(args, CompressionSettings)
    think = settings_from(args, FormatSettings)
    device, device_map = resolve_placement(args.device, args.device_map)
    dtype = resolve_dtype(args.dtype, device)
    path = resolve_model(args.model, make_progress())
    tokenizer = load_tokenizer(path)
    scoring = resolve_scoring_model(args.scoring_model, policy_path=path)
    if compress_tau(args) is not None:  # the probe's layers, before weights load
        check_probe_layers(settings, scoring.path or path)
    placement: dict[str, Any] = {"device": device, "dtype": dtype, "device_map": device_map}
    model = load_model(path, **placement)
    scorer = load_model(scoring.path, **placement) if scoring.foreign else None
    return ThinkingGenerator(
        model,
        tokenizer,
        think.resolve(tokenizer),
        compress_tau=compress_tau(args),
        think_budget=args.think_budget,
        settings=settings,
        probe=args.probe,
        scoring_model=scorer,
        scoring_tokenizer=scoring.tokenizer,
    )


def run(generator: ThinkingGenerator, prompts: list[str], args: argparse.Namespace) -> list:
    """Generate batch by batch behind a progress display (on stderr)."""
    from traac.console import make_progress

    samples: list[Any] = []
    produced = 0
    with make_progress().task("generating", len(prompts)) as task:

        def on_tokens(n: int) -> None:
            nonlocal produced
            produced += n
            task.update(info=f"{produced} tokens")

        for at in range(0, len(prompts), args.batch_size):
            chunk = prompts[at : at + args.batch_size]
            samples += generator.generate(
                chunk,
                max_new_tokens=args.max_new_tokens,
                temperature=args.temperature,
                top_p=args.top_p,
                seed=args.seed,
                keys=[str(at + k) for k in range(len(chunk))],  # the same draws at any batch size
                on_tokens=on_tokens,
            )
            task.advance(len(chunk))
    return samples


def marked_reasoning(sample: Any) -> Any:
    """The reasoning with the pruned steps struck through (a rich `Text`)."""
    from rich.text import Text

    comp = sample.compression
    if comp is None or not comp.steps:
        return Text(sample.reasoning)
    text = Text()
    for step, kept in zip(comp.steps, comp.kept, strict=True):
        text.append(step.text, style=None if kept else "red strike")
    return text


def print_sample(
    console: Any, question: Question, sample: Any, tokenizer: Any, args: argparse.Namespace
) -> None:
    from rich.rule import Rule
    from rich.text import Text

    from traac.console import print_steps

    console.print(Rule(Text(question.title)))
    console.print(Text("question: ", style="bold") + Text(question.text))
    console.print(Text("reasoning ", style="bold") + Text("(pruned steps struck through)", "dim"))
    console.print(marked_reasoning(sample))
    comp = sample.compression
    if sample.interrupted:
        console.print(
            Text(
                f"interrupted at the think budget ({sample.think_tokens} tokens): auxiliary "
                "prompt and closer appended",
                "yellow",
            )
        )
    if not sample.closed:
        console.print(
            Text("no think closer: nothing compressed, the response stands as generated", "yellow")
        )
    else:
        console.print(Text("answer: ", style="bold") + Text(sample.answer))
    if sample.note:
        console.print(Text(sample.note, "yellow"))
    if args.show_steps and comp is not None and comp.steps:
        steps = comp.step_records(tokenizer)
        print_steps(console, question.title, comp, steps, args.step_scope)  # ends with counts
        return
    before, after = sample.tokens_before, sample.tokens_after
    share = f" ({(after - before) / before:+.1%})" if before else ""
    evicted = "" if comp is None else f", steps evicted {comp.n_evicted}/{len(comp.kept)}"
    console.print(Text(f"reasoning tokens {before} -> {after}{share}{evicted}"))


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    check_args(args)
    questions = read_questions(args)
    from traac.common.models import resolve_placement

    resolve_placement(args.device, args.device_map)  # a bad placement fails before any load
    generator = load_generator(args)
    from traac.evaluation.harness.prompts import render_prompt

    prompts = [render_prompt(generator.tokenizer, q.text) for q in questions]
    samples = run(generator, prompts, args)

    from traac.console import make_console, print_lines

    console = make_console(stderr=False, record=args.html is not None)
    for question, sample in zip(questions, samples, strict=True):
        print_sample(console, question, sample, generator.tokenizer, args)
    before = sum(s.tokens_before for s in samples)
    after = sum(s.tokens_after for s in samples)
    closed = sum(s.closed for s in samples)
    interrupted = sum(bool(s.interrupted) for s in samples)
    cut = f" ({interrupted} interrupted at the think budget)" if args.think_budget else ""
    lines = [
        f"{len(samples)} prompt(s), {closed} closed their think block{cut}; reasoning tokens "
        f"{before} -> {after}"
    ]
    if args.json is not None:
        settings = {
            key: getattr(args, key)
            for key in ("model", "scoring_model", "think_budget", "temperature", "top_p", "seed")
        }
        settings["probe"] = generator.probe
        settings["compress_tau"] = generator.tau
        settings.update(
            max_new_tokens=args.max_new_tokens,
            **asdict(settings_from(args, CompressionSettings)),
        )
        records = [
            {"title": q.title, "question": q.text, **s.to_dict()}
            for q, s in zip(questions, samples, strict=True)
        ]
        payload = {"settings": settings, "samples": records}
        write_text(args.json, json.dumps(payload, indent=2, ensure_ascii=False) + "\n", "--json")
        lines.append(f"wrote {args.json}")
    print_lines(console, lines)
    if args.html is not None:
        write_text(args.html, console.export_html(inline_styles=True), "--html")
        print_lines(console, [f"wrote {args.html}"])
    return 0
