"""The README's Python quickstart, timed as a user meets it after a fresh clone.

The README's one Python block runs as written in a fresh process, in a scratch directory, on an
empty traac cache (`TRAAC_CACHE_DIR`), so `testbed-tiny` is built first; then again on the
now-filled cache (the second time a user runs it). Printed: the wall and CPU seconds of each
run, the build's own wall and CPU seconds from the card it wrote, the reward spread the step
logged, the machine and the load average around each run (other work on the cores makes every
figure an upper bound of an idle machine's).

    python benchmarks/quickstart.py
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import children_cpu, command, cpu_name

ROOT = Path(__file__).resolve().parents[1]
PROBE = """
import json, sys
exec(compile(open(sys.argv[1]).read(), "README.md, python block 1", "exec"))
print("QUICKSTART " + json.dumps(trainer.state.log_history[0]))
"""


def readme_block() -> str:
    """The README's Python block (the quickstart), exactly as a reader copies it."""
    [block] = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    return block


def run(script: Path, cache: Path, work: Path) -> tuple[float, float, dict]:
    """(wall s, CPU s, the step's log) of one run of the quickstart in a fresh process."""
    env = {**os.environ, "TRAAC_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT / "src")}
    used = children_cpu()
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", PROBE, str(script)], cwd=work, env=env,
                          capture_output=True, text=True)  # fmt: skip
    wall = time.perf_counter() - started
    cpu = children_cpu() - used
    if done.returncode != 0:
        sys.exit(f"the quickstart failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    line = next(x for x in done.stdout.splitlines() if x.startswith("QUICKSTART "))
    return wall, cpu, json.loads(line.removeprefix("QUICKSTART "))


def load() -> str:
    return "{:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="traac-quickstart-") as scratch:
        root = Path(scratch)
        script, cache, work = root / "quickstart.py", root / "cache", root / "work"
        script.write_text(readme_block())
        work.mkdir()
        print(f"machine: {cpu_name()}, {os.cpu_count()} cores, load average {load()} before")
        rows = []
        for label in ("empty cache (fresh clone)", "model cached"):
            wall, cpu, step = run(script, cache, work)
            rows.append((label, wall, cpu, step, load()))
        [card_path] = (cache / "testbed").glob("tiny-*/testbed_card.json")
        card = json.loads(card_path.read_text())
    print("| run | wall s | CPU s | reward_std | frac_reward_zero_std | load after |")
    print("|---|---:|---:|---:|---:|---|")
    for label, wall, cpu, step, after in rows:
        print(f"| {label} | {wall:.1f} | {cpu:.1f} | {step['reward_std']:.3f} | "
              f"{step['frac_reward_zero_std']:.2f} | {after} |")  # fmt: skip
    phases = ", ".join(f"{k} {v['wall']} s wall / {v['cpu']} s CPU"
                       for k, v in card["phase_seconds"].items())  # fmt: skip
    print(
        f"testbed-tiny build: {card['build_seconds']} s wall ({phases}); "
        f"its card's load average {card['load_average']}"
    )
    print(command())


if __name__ == "__main__":
    main()
