"""The paper's ablations on the testbed (`traac experiment ablations`).

Every variant starts from the same testbed model and trains with the same recipe, seed and step
budget; only the TRAAC fields below change. All are evaluated on the same held-out problems as
the demo, and the table reads like the paper's (accuracy and mean length per tier and overall).
Every configuration is parsed before anything trains; reruns resume.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from traac.common.outputs import output_dir
from traac.common.progress import NullProgress, Progress
from traac.common.tables import Table, fmt
from traac.errors import TraacError
from traac.evaluation.records import TIER_ORDER
from traac.pipelines.stages import (
    QUICK_TRAINING,
    HeldOut,
    Recipe,
    Stages,
    TierRow,
    tier_columns,
    tier_rows,
)
from traac.testbed.build import ensure_testbed

VARIANTS: dict[str, dict[str, Any]] = {
    "CR": {"mode": "cr"},
    "CR+LR": {"mode": "cr_lr"},
    "CR+LR+compression (no difficulty)": {"mode": "compression_no_difficulty"},
    "TRAAC": {"mode": "traac"},
    "TRAAC, random scorer": {"mode": "traac", "scorer": "random"},
    "TRAAC, confidence scorer": {"mode": "traac", "scorer": "confidence"},
}


def slug(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-")


@dataclass(frozen=True)
class AblationSettings:
    output: Path
    recipe: Path = Path("recipes/testbed.yaml")
    quick: bool = False
    variants: tuple[str, ...] = tuple(VARIANTS)
    held_out: HeldOut = field(default_factory=HeldOut)
    train_overrides: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def make(
        cls, output: Path, recipe: Path, quick: bool, variants: list[str] | None
    ) -> AblationSettings:
        """The full study, or with `quick` a smoke test of every stage."""
        held = HeldOut(10, 1, 160) if quick else HeldOut()
        overrides = dict(QUICK_TRAINING) if quick else {}
        return cls(output, recipe, quick, tuple(variants or VARIANTS), held, overrides)

    def recipes(self) -> dict[str, Recipe]:
        """Each variant's recipe, parsed now so a bad field fails before any training."""
        if not self.recipe.is_file():
            raise TraacError(
                f"--config {self.recipe}: no such recipe (run from the repository root)"
            )
        unknown = [v for v in self.variants if v not in VARIANTS]
        if unknown:
            raise TraacError(f"--variants: unknown {unknown}; use some of {list(VARIANTS)}")
        out = {}
        for name in self.variants:
            recipe = Recipe(self.recipe, {**VARIANTS[name], **self.train_overrides})
            recipe.parse(Path("testbed"), self.output / slug(name) / "model")
            out[name] = recipe
        return out


def run_ablations(settings: AblationSettings, progress: Progress | None = None) -> Table:
    """Train and evaluate each variant (resuming finished ones); returns the table, also
    written to `ablations.md`."""
    progress = progress or NullProgress()
    recipes = settings.recipes()
    out = output_dir(settings.output)
    stages = Stages()
    with stages.stage("testbed"):
        base = ensure_testbed(quick=settings.quick, progress=progress)
    rows: dict[str, dict[str, TierRow]] = {}
    with stages.stage("evaluate base"):
        rows["Base"] = tier_rows(settings.held_out.evaluate(base, out / "base", progress))
    for name, recipe in recipes.items():
        with stages.stage(name):
            trained = recipe.train(base, out / slug(name) / "model", progress)
            summary = settings.held_out.evaluate(trained, out / slug(name) / "eval", progress)
            rows[name] = tier_rows(summary)
    table = ablation_table(rows)
    seconds = ", ".join(f"{k} {v:.0f} s" for k, v in stages.seconds.items())
    (out / "ablations.md").write_text(
        f"# Ablations on the testbed\n\n{table.markdown()}\n\nTime: {seconds}\n"
    )
    return table


def ablation_table(rows: dict[str, dict[str, TierRow]]) -> Table:
    """One row per variant, Acc / Len per tier and overall."""
    table = Table(["variant", *tier_columns()], title="Ablations on the testbed")
    for name, tiers in rows.items():
        cells = []
        for tier in (*TIER_ORDER, "overall"):
            cells += [fmt(tiers[tier].accuracy), fmt(tiers[tier].mean_length)]
        table.add(name, *cells)
    return table
