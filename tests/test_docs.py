"""The docs a user reads: every Python block of the README and of docs/ runs, the method page's
anchors that the code cites exist, the README keeps its shape, and no tracker words reach a user.

A Python block runs in order with the blocks before it on its page (one namespace a page, as a
reader pastes them), in a scratch directory, on the session's quick testbed. A block that cannot
run here (a GPU, a download) is preceded by `<!-- no-run: why -->` and is skipped by name.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
BLOCK = re.compile(r"(<!-- no-run: [^>]*-->\n)?```python\n(.*?)```", re.S)
CITATION = re.compile(r"docs/method\.md#([a-z0-9-]+)((?:, #[a-z0-9-]+)*)")
# "targets" alone is a method's word (Laser-D's target lengths); as a heading or "the issue's
# targets" it is the tracker's.
TRACKER_WORDS = re.compile(r"\bthe issue\b|\bissue's\b|\bissue \d|^#+ targets\b", re.I)


def python_blocks(page: Path) -> list[tuple[str, bool]]:
    """(code, runs) for each Python block of `page`."""
    return [(m.group(2), m.group(1) is None) for m in BLOCK.finditer(page.read_text())]


RUNNABLE = [p for p in PAGES if any(runs for _, runs in python_blocks(p))]


@pytest.mark.parametrize("page", RUNNABLE, ids=lambda p: p.name)
def test_python_blocks_run(
    page: Path, quick_testbed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each page's Python blocks run top to bottom (the README's quickstart trains one step of
    TRAACTrainer on `model="testbed-tiny"` with open-r1's `problem` and `solution` columns)."""
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__docs__"}
    for k, (code, runs) in enumerate(python_blocks(page)):
        if runs:
            exec(compile(code, f"{page.name}, python block {k + 1}", "exec"), namespace)
    if page.name == "README.md":  # the quickstart trained: one step, its output written
        check_quickstart(namespace["trainer"], tmp_path / "outputs" / "quickstart")


def check_quickstart(trainer, output_dir: Path) -> None:
    """One step that learned (some group's rewards differ, so the loss has a gradient), and in
    `output_dir` a model and tokenizer that load, the telemetry and TRAAC's card."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    assert trainer.state.global_step == 1
    step = trainer.state.log_history[0]
    assert step["reward_std"] > 0 and step["frac_reward_zero_std"] < 1, step
    assert step["grad_norm"] > 0, step
    assert (output_dir / "metrics.jsonl").is_file()
    AutoModelForCausalLM.from_pretrained(output_dir)
    AutoTokenizer.from_pretrained(output_dir)
    card = (output_dir / "README.md").read_text()
    assert "trained with TRAAC" in card and "arxiv.org/abs/2510.01581" in card
    assert "`testbed-tiny`, a model traac builds offline" in card
    assert "huggingface.co/None" not in card and "a method introduced in" not in card


def test_the_python_page_trains_with_the_readmes_quickstart() -> None:
    """One quickstart, so the README's and the Python page's cannot drift apart."""
    [(readme, _)] = python_blocks(ROOT / "README.md")
    assert python_blocks(DOCS / "python.md")[1][0] == readme


def method_anchors() -> set[str]:
    text = (DOCS / "method.md").read_text()
    return set(re.findall(r"^#+ .*\{#([a-z0-9-]+)\}$", text, re.M))


def test_every_method_citation_names_a_section_of_the_method_page() -> None:
    anchors = method_anchors()
    cited: dict[str, set[str]] = {}
    for folder in ("src", "tests", "recipes", "benchmarks", "docs"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix not in (".py", ".md", ".yaml") or path == Path(__file__):
                continue
            text = path.read_text(encoding="utf-8")
            assert not re.search(r"SPEC (section|\d)", text), f"{path}: cites SPEC"
            for first, more in CITATION.findall(text):
                names = [first, *re.findall(r"#([a-z0-9-]+)", more)]
                cited.setdefault(str(path.relative_to(ROOT)), set()).update(names)
    missing = {p: sorted(n - anchors) for p, n in cited.items() if n - anchors}
    assert len(cited) >= 20 and not missing, missing


def test_the_readme_opens_with_set_up_and_installs_early() -> None:
    """A newcomer reads it in five minutes: at most 180 lines, no table wider than 8 columns
    (the wide tables live in docs/results.md)."""
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 180
    widths = [line.strip().strip("|").count("|") + 1 for line in lines if line.startswith("|")]
    assert widths and max(widths) <= 8, max(widths)
    first_block = lines[lines.index("```bash") + 1 : lines.index("```")]
    assert [line.split()[:2] for line in first_block] == [["make", "demo"], ["make", "test"]]
    head = "\n".join(lines[:120])
    assert "pip install" in head and "accelerate launch" in head
    code = python_blocks(ROOT / "README.md")
    assert len(code) == 1 and len(code[0][0].splitlines()) <= 15
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", "\n".join(lines)):
        assert (ROOT / target).exists(), f"README links to {target}, which does not exist"


# A measured figure: a duration, a size, a decimal, a signed number, a percentage or a ratio
# ("8 min 22 s", "38 minutes", "4.3 GB", "92.2", "+12.5", "−50.7%", "2.4x"); plain integers are
# counts and settings.
FIGURE = re.compile(
    r"\d+ min \d+ s"
    r"|\d[\d,]*(?:\.\d+)? (?:minutes|s|GB|GiB)\b"
    r"|(?<![\w.])[+−-]?\d[\d,]*\.\d+(?:%|x\b)?"
    r"|(?<![\w.])[+−]\d[\d,]*(?:\.\d+)?%?"
    r"|(?<![\w.])\d[\d,]*(?:\.\d+)?(?:%|x\b)"
)
NOT_RESULTS = {"3.10"}  # the README's figures that are no measurement: the Python version


def prose(text: str) -> str:
    """A page's text as a reader reads its figures: no code, no link targets, one space for any
    run of whitespace (a figure may break across lines), one minus sign."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"`[^`]*`", "", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    return " ".join(text.replace("−", "-").split())


@pytest.mark.parametrize("page", ["README.md", "docs/index.md"])
def test_every_figure_the_front_pages_give_is_on_the_results_page(page: str) -> None:
    """One source for each figure: what the README and the docs' front page state, docs/results.md
    states too (where its machine, commit and command are)."""
    results = prose((DOCS / "results.md").read_text())
    figures = [m.group(0) for m in FIGURE.finditer(prose((ROOT / page).read_text()))]
    missing = [
        f
        for f in figures
        if f not in NOT_RESULTS and not re.search(rf"(?<![\d.]){re.escape(f)}(?!\d)", results)
    ]
    assert len(figures) >= 20 and not missing, missing


def test_no_tracker_words_where_users_read() -> None:
    pages = [*PAGES, *sorted((ROOT / "recipes").rglob("*.yaml"))]
    found = [
        f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
        for p in pages
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if TRACKER_WORDS.search(line)
    ]
    assert not found, found


UNDERSCORE_OPTION = re.compile(r"--[a-z0-9]+(?:_[a-z0-9]+)+\b")
OTHER_PROGRAMS = {"--use_both_both"}  # L1's data script (docs/peer_methods.md), not a traac option


def test_command_lines_in_the_docs_spell_options_with_dashes() -> None:
    """Help shows `--a-b`, so the docs do too; `--a_b` stays only in a paragraph that shows both
    spellings (saying that either is read) or for another program's option."""
    pages = [*PAGES, *sorted((ROOT / "recipes").rglob("*.yaml"))]
    found = [
        f"{p.relative_to(ROOT)}: {option}"
        for p in pages
        for paragraph in p.read_text().split("\n\n")
        for option in UNDERSCORE_OPTION.findall(paragraph)
        if option not in OTHER_PROGRAMS and option.replace("_", "-") not in paragraph
    ]
    assert not found, found


def test_import_traac_is_light_and_every_public_name_resolves() -> None:
    """`import traac` loads no torch; each name of `__all__` imports on first use."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    probe = "import sys, traac; print('torch' in sys.modules, len(traac.__all__))"
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    assert out.stdout.split() == ["False", str(len(__import__("traac").__all__))], out.stderr
    import traac

    assert all(getattr(traac, name) is not None for name in traac.__all__)
    assert set(dir(traac)) >= set(traac.__all__)
    with pytest.raises(AttributeError):
        _ = traac.NoSuchName


def test_every_table_from_kept_records_is_what_the_records_give(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table between `<!-- records: DIR [OPTIONS] -->` and `<!-- /records -->` is the output of
    `traac records show DIR --markdown [OPTIONS]` on the records kept in the repository, to the
    character."""
    from traac.cli import main as cli_main
    from traac.pipelines.records import BLOCK

    monkeypatch.chdir(ROOT)
    blocks = [(page, m) for page in PAGES for m in BLOCK.finditer(page.read_text())]
    assert any(page.name == "results.md" for page, _ in blocks)
    for page, match in blocks:
        options = match.group(2).split()
        assert cli_main(["records", "show", match.group(1), "--markdown", *options]) == 0
        printed = capsys.readouterr().out.strip()
        assert match.group(3).strip() == printed, f"{page.name}: {match.group(1)}"
