"""Every 2-process launch the docs print runs, as printed: the `accelerate launch` commands of
docs/distributed.md and docs/training.md whose accelerate config runs on CPU processes
(`recipes/accelerate/cpu_*.yaml`), each on 2 CPU processes here.

Three things are added to each command, none a setting of the run: a free port (launches of
other test sessions may run beside), an output directory in the test's scratch space (the
printed one is under the checkout), and a step count of 1 (`--max-steps 1`, replacing a printed
one: the docs' runs are as long as their recipes). The models are the test session's (its
`TRAAC_CACHE_DIR`). A command fails on a non-zero exit or a traceback in its output.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = (ROOT / "docs" / "distributed.md", ROOT / "docs" / "training.md")
BASH = re.compile(r"```bash\n(.*?)```", re.S)
ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=")


def cpu_launches(page: Path) -> list[str]:
    """The page's printed `accelerate launch` commands on a CPU accelerate config, each joined
    across its backslash continuations, its comments dropped."""
    commands = []
    for block in BASH.findall(page.read_text()):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = line.split(" #", 1)[0].strip()
            if "accelerate launch" in line and "recipes/accelerate/cpu_" in line:
                commands.append(line)
    return commands


PRINTED = [(page.name, command) for page in PAGES for command in cpu_launches(page)]
LAUNCHES = list(dict.fromkeys(command for _, command in PRINTED))  # one run for a repeated one


def test_the_docs_print_the_cpu_launches_this_file_runs() -> None:
    """ZeRO-2, ZeRO-3 with and without its partitioned initialisation, and plain data parallel
    (a page that stops printing one, or a parser that stops finding it, fails here)."""
    configs = sorted({re.search(r"cpu_\w+\.yaml", c).group() for c in LAUNCHES})
    assert configs == ["cpu_2proc.yaml", "cpu_zero2.yaml", "cpu_zero3.yaml"]
    assert sum("cpu_zero3.yaml" in c for c in LAUNCHES) == 2
    assert any("--zero3-init-flag false" in c for c in LAUNCHES)
    assert {page for page, _ in PRINTED} == {"distributed.md", "training.md"}


def as_run(command: str, port: int, out: Path) -> tuple[dict[str, str], list[str]]:
    """The environment and argv of a printed command, with the three additions of the module
    docstring."""
    words = shlex.split(command)
    env = {}
    while ASSIGNMENT.match(words[0]):
        name, value = words.pop(0).split("=", 1)
        env[name] = value
    assert words[:2] == ["accelerate", "launch"], command
    words[0] = str(Path(sys.executable).with_name("accelerate"))  # the venv's, as on PATH
    words[2:2] = ["--main-process-port", str(port)]
    for flag in ("--max-steps", "--output-dir"):
        if flag in words:
            at = words.index(flag)
            del words[at : at + 2]
    return env, [*words, "--max-steps", "1", "--output-dir", str(out)]


@pytest.mark.slow
@pytest.mark.parametrize("command", LAUNCHES)
def test_a_printed_launch_trains(
    command: str,
    quick_testbed: Path,
    tmp_path: Path,
    free_port: Callable[[], int],
    request: pytest.FixtureRequest,
) -> None:
    cache = getattr(request.config, "cache", None)  # DeepSpeed's comm op, compiled once
    extensions = cache.mkdir("torch-extensions") if cache else tmp_path / "torch-extensions"
    env, argv = as_run(command, free_port(), tmp_path / "run")
    run_env = {**os.environ, "OMP_NUM_THREADS": "1", "TORCH_EXTENSIONS_DIR": str(extensions), **env}
    try:  # a launch takes a minute; a deadlock would hold it for ever
        done = subprocess.run(argv, cwd=ROOT, env=run_env, capture_output=True, text=True,
                              timeout=600)  # fmt: skip
    except subprocess.TimeoutExpired as err:
        pytest.fail(f"{command} hung; stderr: {err.stderr!s:.3000}")
    output = done.stdout + done.stderr
    assert done.returncode == 0 and "Traceback" not in output, output[-4000:]
    assert "traac train: 1 steps" in output or "traac train: 1 step" in output, output[-2000:]
    assert (tmp_path / "run" / "metrics.jsonl").is_file()
