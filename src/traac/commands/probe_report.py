"""`traac probe-report`: how well each step scorer finds the redundant steps of a model's own
correct responses (compressed share, eviction precision, compute loss, answers kept)."""

from __future__ import annotations

import argparse
import functools
import json
from pathlib import Path

from traac.commands import (
    MODEL_HELP,
    ArgumentParser,
    add_compress_tau,
    add_device_map,
    add_scoring_model,
    check_count,
    check_model,
    check_placement,
)
from traac.common.outputs import output_file, write_text
from traac.common.scoring_model import POLICY
from traac.errors import TraacError

# The options are checked before the model stack (torch) is imported, in `main`.


def build_parser() -> ArgumentParser:
    p = ArgumentParser(
        prog="traac probe-report",
        description="Score the steps of a model's own correct responses with every scorer and "
        "layer set, compress them under the paper's rule (gate 0.8, cap 0.8, no calibration) "
        "and report the share compressed, the eviction precision (evicted steps that were "
        "redundant), the compute loss and how often the re-written answer stays right. On the "
        "testbed the steps are labelled automatically; for another model pass --input.",
    )
    p.add_argument(
        "--model",
        default="testbed",
        help=f"the model whose responses are scored: {MODEL_HELP}",
    )
    p.add_argument(
        "--input",
        type=Path,
        help="JSONL of labelled correct responses: question, reasoning, labels (compute, "
        "conclude, recheck or restate per step), answer[, verifier, tier] (default: the "
        "testbed's own responses to fresh problems)",
    )
    add_scoring_model(
        p,
        f"the models whose attention scores the steps, each its own rows in one report: "
        f"{POLICY} is --model itself (every scorer and layer set); any other model name or path "
        "scores as a foreign model (beyond the paper: its attention over all layers and the "
        "first half, each also with gated heads; steps map to its tokenizer through character "
        f"offsets) (default: {POLICY})",
        nargs="+",
        default=[POLICY],
    )
    p.add_argument(
        "--each-layer",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="a row for each layer alone besides the layer sets (default: yes; --no-each-layer "
        "for deep models, where it is one answer regeneration per layer)",
    )
    p.add_argument("--eval-n", type=int, default=100, help="testbed problems per tier (100)")
    p.add_argument("--num-samples", type=int, default=2, help="samples per problem (2)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (0)")
    add_compress_tau(
        p,
        "compress every response at this rate instead of its tier's (0.6 / 0.4 / 0.2): "
        "training compresses at its pass-rate bin's, so 0.6 shows what the easy bin does "
        "to the medium and hard problems a group passes (default: by tier)",
    )
    p.add_argument("--device", default="auto", help="cpu, cuda, cuda:N (default: auto)")
    add_device_map(p)
    p.add_argument("--json", type=Path, help="write the report to this JSON file")
    return p


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    check_count("--eval-n", args.eval_n)
    check_count("--num-samples", args.num_samples)
    output_file(args.json, "--json")
    repeated = sorted({s for s in args.scoring_model if args.scoring_model.count(s) > 1})
    if repeated:
        raise TraacError(f"--scoring-model {repeated[0]}: given twice; name each scorer once")
    check_placement(args.device, args.device_map)
    check_model("--model", args.model)
    for name in args.scoring_model:
        check_model("--scoring-model", name)
    if args.input is not None and not args.input.is_file():
        raise TraacError(f"--input {args.input}: no such file")
    from traac.common.models import load_model, load_tokenizer, resolve_placement
    from traac.common.scoring_model import resolve_scoring_model
    from traac.compression.scoring import closer_query
    from traac.console import make_console, make_progress, print_lines, print_table
    from traac.evaluation.harness.prompts import render_prompt
    from traac.evaluation.inference.generation import TransformersBackend
    from traac.evaluation.reports.probe_report import (
        ProbeReport,
        default_specs,
        foreign_specs,
        probe_report,
        read_labelled,
    )
    from traac.pipelines.model_registry import resolve_model
    from traac.testbed.measure import labelled_responses

    device, device_map = resolve_placement(args.device, args.device_map)
    console = make_console()
    progress = make_progress(console)
    path = resolve_model(args.model, progress)
    resolve = functools.partial(resolve_model, progress=progress)
    scorers = {s: resolve_scoring_model(s, resolve=resolve) for s in args.scoring_model}
    tokenizer = load_tokenizer(path)
    if args.input is not None:
        responses = read_labelled(args.input, lambda q: render_prompt(tokenizer, q))
        model = load_model(path, device=device, device_map=device_map)
    else:
        model = load_model(path, device=device, device_map=device_map)
        responses = labelled_responses(
            model, tokenizer, args.eval_n, args.num_samples, args.seed, progress
        )
    backend = TransformersBackend(model, tokenizer)  # the responder re-writes the answers
    report, queries = ProbeReport(), []
    with progress.task("scorers", None) as task:
        for name in args.scoring_model:  # the responses are the same for every scorer
            foreign = scorers[name]
            if not foreign.foreign:  # --model itself (policy, or reference: not trained)
                scorer, scorer_tokenizer = model, tokenizer
                layers = model.config.get_text_config().num_hidden_layers
                specs = default_specs(layers, args.each_layer)
            else:
                scorer_tokenizer = foreign.tokenizer
                scorer = load_model(foreign.path, device=device, device_map=device_map)
                specs = foreign_specs(name)
            part = probe_report(
                scorer, scorer_tokenizer, responses, backend, specs,
                seed=args.seed,
                on_spec=lambda spec: task.update(info=spec),
                tau=args.compress_tau,
            )  # fmt: skip
            report.rows.update(part.rows)
            query = closer_query(scorer_tokenizer)
            queries.append(f"{name}: {query}" if foreign.foreign else query)
            del scorer  # one foreign model in memory at a time
    tiers = list(next(iter(report.rows.values())))
    out = make_console(stderr=False)
    print_lines(out, queries)
    if args.compress_tau is not None:
        print_lines(out, [f"every response compressed at tau {args.compress_tau}, not by tier"])
    for tier in tiers:
        print_table(out, report.table(tier))
    if args.json is not None:
        write_text(args.json, json.dumps(report.to_json(), indent=2) + "\n", "--json")
    return 0
