"""`traac demo`: TRAAC end to end on the CPU testbed, reported in the paper's layout.

Stages: build the testbed (cached) -> evaluate the base model on held-out problems of the three
tiers -> train it with TRAAC (`recipes/testbed.yaml`) -> evaluate the trained model on the same
problems -> tables, plots, example compressions. Each stage goes through the same command a user
would type (`traac eval`, `traac train`), and each is resumable: rerunning the demo into the same
directory keeps what finished.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from traac.errors import TraacError

TIERS = ("easy", "medium", "hard")
DEMO_EVAL_SEED = 2026  # held-out problems: the testbed's SFT and RL pools never hold them


@dataclass(frozen=True)
class DemoSettings:
    """What the demo runs; `quick` shrinks every stage for a smoke test (minutes -> one)."""

    output: Path
    recipe: Path = Path("recipes/testbed.yaml")
    quick: bool = False
    eval_n: int = 100  # problems per tier
    num_samples: int = 4
    max_new_tokens: int = 256
    train_args: tuple[str, ...] = ()  # extra `traac train` overrides

    @classmethod
    def make(cls, output: Path, quick: bool, **overrides: Any) -> DemoSettings:
        defaults: dict[str, Any] = {}
        if quick:
            defaults = {
                "eval_n": 10,
                "num_samples": 1,
                "max_new_tokens": 160,
                "train_args": (
                    "--max_steps",
                    "2",
                    "--per_device_train_batch_size",
                    "8",
                    "--num_generations",
                    "4",
                    "--dataset",
                    "testbed:all?n=8",
                ),
            }
        defaults.update({k: v for k, v in overrides.items() if v is not None})
        return cls(output=output, quick=quick, **defaults)

    @property
    def dataset(self) -> str:
        return f"testbed:all?n={self.eval_n}&seed={DEMO_EVAL_SEED}"

    def eval_args(self) -> list[str]:
        """`traac eval` options shared by every model the demo compares. The testbed learned
        bare questions, so the prompt is the question alone (style `adaptthink`)."""
        return [
            "--dataset", self.dataset, "--num-samples", str(self.num_samples),
            "--max-new-tokens", str(self.max_new_tokens), "--batch-size", "64",
            "--prompt-style", "adaptthink",
        ]  # fmt: skip


@dataclass
class Stages:
    """Wall time per stage, printed as each one ends."""

    console: Any
    seconds: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        self.console.rule(f"[bold]{name}")
        start = time.perf_counter()
        yield
        self.seconds[name] = time.perf_counter() - start
        self.console.print(f"[dim]{name}: {self.seconds[name]:.1f} s[/dim]")


def _run(command: Callable[[list[str]], int], argv: list[str], what: str) -> None:
    code = command(argv)
    if code:
        raise TraacError(f"{what} failed (exit {code}); rerun `traac demo` to resume")


def run_demo(settings: DemoSettings, console: Any = None) -> dict[str, Any]:
    """All stages; returns the summary also written to `output/summary.json`."""
    from rich.console import Console

    from traac.commands import eval as eval_cmd
    from traac.commands import train as train_cmd
    from traac.testbed import ensure_testbed

    console = console or Console(stderr=True)
    if not settings.recipe.is_file():
        raise TraacError(
            f"--config {settings.recipe}: no such recipe (run from the repository root)"
        )
    out = settings.output
    out.mkdir(parents=True, exist_ok=True)
    stages = Stages(console)
    common = settings.eval_args()
    with stages.stage("testbed"):
        base = ensure_testbed(quick=settings.quick)
        console.print(f"testbed model: {base}")
    with stages.stage("evaluate base"):
        _run(
            eval_cmd.main,
            ["--model", str(base), *common, "--output", str(out / "eval" / "base")],
            "base evaluation",
        )
    trained = out / "train"
    with stages.stage("train TRAAC"):
        if (trained / "config.json").exists():
            console.print(f"trained model found in {trained}: kept (delete it to retrain)")
        else:
            _run(
                train_cmd.main,
                [
                    "--config",
                    str(settings.recipe),
                    "--model_name_or_path",
                    str(base),
                    "--output_dir",
                    str(trained),
                    *settings.train_args,
                ],
                "training",
            )
    with stages.stage("evaluate TRAAC"):
        _run(
            eval_cmd.main,
            ["--model", str(trained), *common, "--output", str(out / "eval" / "traac")],
            "TRAAC evaluation",
        )
    with stages.stage("report"):
        summary = write_report(settings, base, trained, console)
    summary["stage_seconds"] = stages.seconds
    summary["total_seconds"] = sum(stages.seconds.values())
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    console.print(
        f"total {summary['total_seconds']:.0f} s; wrote {out / 'report.md'}, {out / 'summary.json'}"
    )
    return summary


def tier_table(summary: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Accuracy (%) and mean response length per tier and overall, from an eval summary."""
    rows = {
        tier: {"accuracy": s["accuracy"], "mean_length": s["mean_response_tokens"]}
        for tier, s in summary.get("by_difficulty", {}).items()
    }
    rows["overall"] = {
        "accuracy": summary["accuracy"],
        "mean_length": summary["mean_response_tokens"],
    }
    return rows


def training_compression(metrics_path: Path) -> dict[str, dict[str, float]]:
    """Per difficulty bin, means over the run: compressed share of the pooled group, steps and
    tokens removed per compressed rollout, prompts seen."""
    if not metrics_path.exists():
        return {}
    rows = [json.loads(line) for line in metrics_path.read_text().splitlines() if line.strip()]
    out: dict[str, dict[str, float]] = {}
    for tier in TIERS:
        stats: dict[str, float] = {
            "prompts": sum(r.get(f"traac/{tier}/prompts", 0.0) for r in rows)
        }
        for key in ("compressed_frac", "steps_removed", "tokens_removed"):
            values = [r[f"traac/{tier}/{key}"] for r in rows if f"traac/{tier}/{key}" in r]
            if values:
                stats[key] = sum(values) / len(values)
        out[tier] = stats
    return out


def targets(
    base: dict[str, dict[str, float]], traac: dict[str, dict[str, float]]
) -> dict[str, Any]:
    """The demo issue's targets, each with its measured value, a readable `measured` and
    whether it is met. Cuts are fractions of the base length (0.3 = 30% shorter)."""

    def change(tier: str) -> float:
        before = base[tier]["mean_length"]
        return traac[tier]["mean_length"] / before - 1.0 if before else 0.0

    def cut(tier: str) -> float:
        return -change(tier)

    acc_change = traac["overall"]["accuracy"] - base["overall"]["accuracy"]
    hard_change = traac["hard"]["accuracy"] - base["hard"]["accuracy"]
    overall_cut, easy_cut, hard_cut = cut("overall"), cut("easy"), cut("hard")
    # Easy must be cut, and by at least 1.5x what hard is cut (a hard tier that grows counts as
    # a cut of 0: the easy cut alone then decides).
    adaptive = easy_cut > 0 and easy_cut >= 1.5 * max(hard_cut, 0.0)
    ratio = easy_cut / hard_cut if hard_cut > 0 else None
    return {
        "overall accuracy >= base - 1 point": {
            "value": acc_change,
            "measured": f"{acc_change:+.1f} points",
            "met": acc_change >= -1.0,
        },
        "hard accuracy >= base": {
            "value": hard_change,
            "measured": f"{hard_change:+.1f} points",
            "met": hard_change >= 0.0,
        },
        "overall length -30% or more": {
            "value": -overall_cut,
            "measured": f"{change('overall'):+.1%}",
            "met": overall_cut >= 0.3,
        },
        "easy length cut >= 1.5x hard cut": {
            "value": ratio,
            "measured": f"easy {change('easy'):+.1%}, hard {change('hard'):+.1%}"
            + (f", ratio {ratio:.2f}" if ratio is not None else ""),
            "met": adaptive,
        },
    }


def _markdown_table(base: dict[str, dict[str, float]], traac: dict[str, dict[str, float]]) -> str:
    lines = [
        "| tier | base Acc | base Len | TRAAC Acc | TRAAC Len | Δ Acc (pts) | Δ Len |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for tier in (*TIERS, "overall"):
        b, t = base[tier], traac[tier]
        change = (t["mean_length"] / b["mean_length"] - 1.0) * 100 if b["mean_length"] else 0.0
        lines.append(
            f"| {tier} | {b['accuracy']:.1f} | {b['mean_length']:.1f} | {t['accuracy']:.1f} | "
            f"{t['mean_length']:.1f} | {t['accuracy'] - b['accuracy']:+.1f} | {change:+.1f}% |"
        )
    return "\n".join(lines)


def _compression_table(rows: dict[str, dict[str, float]]) -> str:
    lines = [
        "| difficulty bin (pass rate) | prompts | compressed share | steps removed "
        "| tokens removed |",
        "|---|---:|---:|---:|---:|",
    ]
    for tier, s in rows.items():
        share = f"{100 * s['compressed_frac']:.1f}%" if "compressed_frac" in s else "–"
        steps = f"{s['steps_removed']:.2f}" if "steps_removed" in s else "–"
        tokens = f"{s['tokens_removed']:.1f}" if "tokens_removed" in s else "–"
        lines.append(f"| {tier} | {s['prompts']:.0f} | {share} | {steps} | {tokens} |")
    return "\n".join(lines)


def write_report(
    settings: DemoSettings, base_model: Path, trained_model: Path, console: Any
) -> dict[str, Any]:
    """report.md + plots + step viewer + the summary dict (per model, per tier)."""
    from traac.evaluation.plots import write_plots
    from traac.evaluation.report import load_models

    out = settings.output
    evals = {
        name: json.loads((out / "eval" / name / "summary.json").read_text())
        for name in ("base", "traac")
    }
    base, traac = tier_table(evals["base"]), tier_table(evals["traac"])
    compression = training_compression(trained_model / "metrics.jsonl")
    goals = targets(base, traac)
    models = load_models([out / "eval" / "base", out / "eval" / "traac"], ["base", "TRAAC"])
    plots = [p.name for p in write_plots(models, out)]
    plots.append(compression_plot(compression, out / "compression_by_bin.png").name)
    examples = example_viewer(base_model, out / "eval" / "base", out / "steps.html")
    table, comp_table = _markdown_table(base, traac), _compression_table(compression)
    goal_lines = "\n".join(
        f"- {'met' if g['met'] else 'NOT met'}: {name} (measured {g['measured']})"
        for name, g in goals.items()
    )
    images = "\n".join(f"![{p}]({p})" for p in plots)
    report = (
        f"# traac demo\n\nHeld-out testbed problems: `{settings.dataset}`, "
        f"{settings.num_samples} samples each, temperature 1.0, at most "
        f"{settings.max_new_tokens} new tokens. Acc in %, Len = mean response tokens.\n\n"
        f"{table}\n\n## Compression during training (means over steps)\n\n{comp_table}\n\n"
        f"## Targets\n\n{goal_lines}\n\n## Plots\n\n{images}\n\n"
        f"Example trajectories with their steps scored and pruned: [steps.html](steps.html) "
        f"({examples} traces).\n"
    )
    (out / "report.md").write_text(report)
    _print_tables(console, base, traac, compression, goals)
    return {
        "settings": {k: str(v) for k, v in asdict(settings).items()},
        "models": {"base": base, "traac": traac},
        "training_compression": compression,
        "targets": goals,
        "plots": plots,
    }


def _print_tables(
    console: Any,
    base: dict[str, dict[str, float]],
    traac: dict[str, dict[str, float]],
    compression: dict[str, dict[str, float]],
    goals: dict[str, Any],
) -> None:
    from rich.table import Table

    table = Table(title="TRAAC vs base on held-out testbed problems (Acc %, Len tokens)")
    for col in ("tier", "base Acc", "base Len", "TRAAC Acc", "TRAAC Len", "Δ Acc", "Δ Len"):
        table.add_column(col, justify="left" if col == "tier" else "right")
    for tier in (*TIERS, "overall"):
        b, t = base[tier], traac[tier]
        change = (t["mean_length"] / b["mean_length"] - 1.0) * 100 if b["mean_length"] else 0.0
        table.add_row(
            tier,
            f"{b['accuracy']:.1f}",
            f"{b['mean_length']:.1f}",
            f"{t['accuracy']:.1f}",
            f"{t['mean_length']:.1f}",
            f"{t['accuracy'] - b['accuracy']:+.1f}",
            f"{change:+.1f}%",
        )
    console.print(table)
    comp = Table(title="Compression during training, per difficulty bin (means over steps)")
    for col in ("bin", "prompts", "compressed share", "steps removed", "tokens removed"):
        comp.add_column(col, justify="left" if col == "bin" else "right")
    for tier, s in compression.items():
        comp.add_row(
            tier,
            f"{s['prompts']:.0f}",
            f"{100 * s['compressed_frac']:.1f}%" if "compressed_frac" in s else "–",
            f"{s['steps_removed']:.2f}" if "steps_removed" in s else "–",
            f"{s['tokens_removed']:.1f}" if "tokens_removed" in s else "–",
        )
    console.print(comp)
    for name, g in goals.items():
        mark = "[green]met[/green]" if g["met"] else "[red]NOT met[/red]"
        console.print(f"{mark}: {name} (measured {g['measured']})")


def compression_plot(rows: dict[str, dict[str, float]], path: Path) -> Path:
    """Bars per difficulty bin: share of the group compressed and tokens removed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tiers = list(rows)
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6), layout="constrained")
    left.bar(tiers, [100 * rows[t].get("compressed_frac", 0.0) for t in tiers], color="#4c72b0")
    left.set_ylabel("compressed share of the group (%)")
    right.bar(tiers, [rows[t].get("tokens_removed", 0.0) for t in tiers], color="#dd8452")
    right.set_ylabel("tokens removed per compressed rollout")
    for ax in (left, right):
        ax.set_xlabel("difficulty bin (pass rate)")
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("Compression during TRAAC training")
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def example_viewer(model_path: Path, eval_dir: Path, path: Path, per_tier: int = 2) -> int:
    """Score and prune a few of the base model's correct responses with the attention probe at
    each tier's tau, into the step viewer; returns how many traces it shows."""
    from traac.compression import Compressor
    from traac.difficulty import DifficultyConfig
    from traac.formats import ChatFormat
    from traac.models import load_model, load_tokenizer
    from traac.scoring import AttentionScorer
    from traac.viewer import render_html

    records = [json.loads(line) for line in (eval_dir / "samples.jsonl").read_text().splitlines()]
    chosen: list[dict[str, Any]] = []
    for tier in TIERS:
        good = [r for r in records if r.get("difficulty") == tier and r["correct"] and r["closed"]]
        chosen.extend(good[:per_tier])
    if not chosen:
        path.write_text("<p>No correct, well-formed base responses to show.</p>")
        return 0
    difficulty = DifficultyConfig()
    fmt = ChatFormat()
    scorer = AttentionScorer(load_model(str(model_path)), load_tokenizer(str(model_path)))
    reasonings = [fmt.parse(r["response"]).reasoning for r in chosen]
    taus = [difficulty.tau_of(r["difficulty"]) for r in chosen]
    results = Compressor(scorer, gate=1.0)(reasonings, taus)
    titles = [f"{r['difficulty']} · {r['id']} · tau {t}" for r, t in zip(chosen, taus, strict=True)]
    path.write_text(render_html(results, titles))
    return len(results)


def summary_lines(summary: dict[str, Any]) -> Sequence[str]:
    """One line per model and tier, for logs."""
    return [
        f"{name} {tier}: acc {row['accuracy']:.1f}% len {row['mean_length']:.1f}"
        for name, rows in summary["models"].items()
        for tier, row in rows.items()
    ]
