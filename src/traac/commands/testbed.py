"""`traac testbed`: build the tiny offline testbed model, or show the card of a built one.

    traac testbed build [--output DIR] [--seed S] [--quick | --base smollm2 | --long POS
                        [--interruptions]] [--force]
    traac testbed show  [--output DIR] [--seed S] [--quick | --base smollm2 | --long POS
                        [--interruptions]] [--json]
    traac testbed mechanism --long POS [--interruptions] [--output DIR] [--per-tier N]
                        [--json-out FILE]

Without `--output` the model goes to the cache (`$TRAAC_CACHE_DIR/testbed`, default
`~/.cache/traac/testbed`) under a key of its config's hash: what every other command uses when
given `--model testbed` or no model at all. A second build with the same config returns at once.
The full testbed (seed 0) comes with the package, built (docs/testbed.md#shipped): its first
build unpacks it in a second; `--force` builds it from the teacher's traces instead.
`--base smollm2` fine-tunes SmolLM2-135M-Instruct on the same teacher traces instead: a real
pretrained model that thinks (`--model smollm2-think` everywhere). `--long trailing|interleaved`
builds the tiny model on the long teacher's traces, redundancy after the answer or among the
needed steps (`--model testbed-long-trailing`, `testbed-long-interleaved`), or with `--base
smollm2` SmolLM2 on them (`--model smollm2-think-long-trailing`, `-interleaved`);
`--interruptions` adds the short teacher's interruption traces to its SFT, for comparison.
`mechanism` measures, before any RL, whether each step scorer finds a long build's redundant
steps and what re-answers keep at equal think budgets (`traac.evaluation.reports.mechanism`), on
its own right responses.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from traac.commands import ArgumentParser
from traac.errors import TraacError
from traac.testbed.config import BASES, POSITIONS, default_config


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="traac testbed",
        description="The testbed: a tiny Qwen3 taught by SFT to over- and under-think on "
        "reasoning-gym chain_sum problems, built offline on the CPU.",
    )
    sub = parser.add_subparsers(dest="action", required=True, metavar="{build,show,mechanism}")
    for name, text in (
        ("build", "build the model (into the cache unless --output), measure it, write its card"),
        ("show", "print the card of a built model"),
        ("mechanism", "a long build's step scorers against its labels, and re-answers at equal "
         "think budgets, on its own right responses"),
    ):  # fmt: skip
        p = sub.add_parser(name, help=text, description=text)
        p.add_argument("--output", type=Path, help="model directory (default: the cache entry)")
        p.add_argument("--seed", type=int, default=0, help="SFT data, teacher and init seed")
        p.add_argument(
            "--quick", action="store_true", help="a small model for tests (about a minute)"
        )
        p.add_argument(
            "--base",
            choices=BASES,
            help="fine-tune this pretrained model on the teacher's traces instead "
            "(smollm2: about 38 minutes on 2 idle AVX2 cores)",
        )
        p.add_argument(
            "--long",
            choices=POSITIONS,
            help="the tiny model (or --base) on long traces whose redundancy sits after the "
            "answer (trailing) or among the needed steps (interleaved)",
        )
        p.add_argument(
            "--interruptions",
            action="store_true",
            help="with --long: 15%% of the traces interrupted, as the short teacher's, which "
            "teach the think closer to attend to the needed steps (for comparison)",
        )
        if name == "build":
            p.add_argument("--force", action="store_true", help="rebuild even if it exists")
        elif name == "mechanism":
            p.add_argument("--per-tier", type=int, default=200, help="problems a tier, one "
                           "sample each; the right ones are measured (default 200)")  # fmt: skip
            p.add_argument("--json-out", type=Path, help="write both tables here as JSON")
        else:
            p.add_argument("--json", action="store_true", help="print the card as JSON")
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.seed < 0:
        raise TraacError(f"--seed {args.seed}: must be an integer >= 0")
    if args.action == "mechanism" and args.long is None:
        raise TraacError("--long: `traac testbed mechanism` measures a long build; pass --long "
                         "trailing or --long interleaved")  # fmt: skip
    if getattr(args, "per_tier", 1) < 1:
        raise TraacError(f"--per-tier {args.per_tier}: must be an integer >= 1")
    config = default_config(
        quick=args.quick, seed=args.seed, base=args.base, long=args.long,
        interruptions=args.interruptions,
    )  # fmt: skip
    from traac.testbed.build import CARD, build_cached, build_testbed, cache_path

    target = args.output.expanduser() if args.output else cache_path(config)
    if args.action == "build":
        from traac.console import make_progress

        progress = make_progress()
        if args.output is None:
            target = build_cached(config, force=args.force, progress=progress)
        elif (target / CARD).exists() and not args.force:
            raise TraacError(f"testbed: {target} already holds a model; pass --force to rebuild")
        else:
            build_testbed(target, config, force=args.force, progress=progress)
    card_path = target / CARD
    if args.action == "mechanism" and (target / "config.json").exists():
        return _mechanism(args, config, target)  # any model of the build's tokenizer (a trial's)
    if not card_path.exists():
        raise TraacError(f"testbed: no built model at {target}; run `{build_command(args)}` "
                         "first")  # fmt: skip
    card = json.loads(card_path.read_text())
    if getattr(args, "json", False):
        print(json.dumps(card, indent=2))
    else:
        _print_card(card, target)
    return 0


def _mechanism(args: argparse.Namespace, config: Any, target: Path) -> int:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from traac.common.provenance import weights_sha256
    from traac.console import make_console, make_progress, print_table
    from traac.testbed.measure import SavedDraws
    from traac.testbed.mechanism import long_mechanism

    if args.base is None:
        torch.set_num_threads(1)  # too small to split; --base: OMP_NUM_THREADS decides
    model = AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(target)
    # An hour of sampling on SmolLM2: kept beside the model until the tables are done, so a
    # stopped run resumes after its last batch (the same draws).
    key = f"{weights_sha256(target)} {config.hash()} per-tier {args.per_tier} seed {args.seed}"
    path = target.with_name(f".{target.name}.mechanism-draws.jsonl")
    try:
        saved: SavedDraws | None = SavedDraws(path, key)
    except OSError as err:  # a read-only folder: measured all the same, not resumable
        saved = None
        print(f"traac testbed: the draws are not kept ({path}: {err.strerror}); a stopped run "
              "starts over", file=sys.stderr)  # fmt: skip
    found, responses, drawn = long_mechanism(
        model, tokenizer, config, args.per_tier, args.seed, make_progress(), saved
    )
    if saved is not None:
        saved.path.unlink()
    console = make_console(stderr=False)
    console.print(f"{len(responses)} right, well-formed responses of {drawn} drawn ({target})")
    for rule in ("paper", "equal"):
        print_table(console, found.detection_table(rule))
    print_table(console, found.budget_table())
    if args.json_out:
        data = found.to_json() | {"model": str(target), "drawn": drawn, "right": len(responses)}
        args.json_out.write_text(json.dumps(data, indent=2))
        console.print(f"written: {args.json_out}")
    return 0


def build_command(args: argparse.Namespace) -> str:
    """The `traac testbed build` that builds what `args` ask `show` for (the same model, seed
    and place), so the advice given leads to it."""
    words = ["traac testbed build"]
    if args.output is not None:
        words.append(f"--output {args.output}")
    if args.seed != 0:
        words.append(f"--seed {args.seed}")
    if args.quick:
        words.append("--quick")
    if args.base is not None:
        words.append(f"--base {args.base}")
    if args.long is not None:
        words.append(f"--long {args.long}")
    if args.interruptions:
        words.append("--interruptions")
    return " ".join(words)


def _print_card(card: dict[str, Any], path: Path) -> None:
    from traac.common.tables import Table
    from traac.console import make_console, print_table
    from traac.evaluation.reports.probe_report import ProbeReport

    console = make_console(stderr=False)
    measured = card["measure"]
    table = Table(
        ["tier", "accuracy", "think tokens", "re-check share", "well formed", "probe u (median)",
         "probe e (median)"],
        title=f"testbed {card['config']['name']} (seed {card['config']['seed']}): "
        f"{measured['problems_per_tier']} problems x {measured['samples']} samples per tier, "
        f"T={measured['temperature']}",
    )  # fmt: skip
    for tier, row in measured["tiers"].items():
        probe = measured["probe"].get(tier, {})
        table.add(
            tier,
            f"{row['accuracy']:.1%}",
            f"{row['think_tokens']:.0f}",
            f"{row['recheck_share']:.1%}",
            f"{row['well_formed']:.1%}",
            _median(probe.get("uniformity")),
            _median(probe.get("eviction_fraction")),
        )
    print_table(console, table)
    for tier, row in measured["tiers"].items():  # a long build's steps by the teacher's grammar
        if "step_kinds" in row:
            kinds = row["step_kinds"]
            shares = ", ".join(f"{k} {v:.1%}" for k, v in kinds["shares"].items())
            console.print(f"{tier}: {kinds['steps_per_response']:.1f} steps a response, "
                          f"{kinds['redundant_share']:.1%} redundant ({shares})")  # fmt: skip
    versus = measured["probe"].get("recheck_vs_key", {})
    if versus.get("mean_ratio") is not None:
        relative = ", ".join(f"{k} {v:.2f}" for k, v in versus["relative_score"].items())
        console.print(
            f"probe: re-check steps score {versus['mean_ratio']:.2f}x the key steps (lower in "
            f"{versus['share_recheck_lower']:.0%} of {versus['responses']} responses); step "
            f"score / response mean: {relative}"
        )
        for layer, scores in versus.get("relative_score_by_layer", {}).items():
            one = ", ".join(f"{k} {v:.2f}" for k, v in scores.items())
            console.print(f"  layer {layer} alone: {one}")
    if measured.get("probe_report"):
        print_table(console, ProbeReport.from_json(measured["probe_report"]).table("all"))
    targets = measured["targets"]
    met = ", ".join(
        f"{name} {'ok' if t['met'] else 'MISSED'} ({t['value']})"
        for name, t in targets.items()
        if name != "all_met"
    )
    train = card["train"]
    console.print(f"goals: {met}")
    console.print(
        f"{train['parameters']:,} parameters, {train['steps']} SFT steps in "
        f"{train['seconds']:.0f} s, build {card['build_seconds']:.0f} s "
        f"(load average {card['load_average'][0]:.1f})"
        + (f"; unpacked from the package's {card['shipped']['archive']}" if "shipped" in card
           else "")
    )  # fmt: skip
    console.print(f"model: {path}")


def _median(quantiles: dict[str, float] | None) -> str:
    return f"{quantiles['q50']:.3f}" if quantiles else "-"
