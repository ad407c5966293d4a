"""records/run-queue.sh, the study runner, with a fake `traac` that logs each job: every (seed,
arm) runs once in queue order, the arms from ARMS, EXTRA's options on every job, and the second
worker starts while the first job still runs, but only once the base model's evaluation is in
the store."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "records" / "run-queue.sh"

# Logs "<seed>|<arm>|<whether the base evaluation was there>|<--eval-batching>" as it starts;
# the first job writes the base evaluation, then waits for another job to start beside it (up to
# four minutes, inside the 300-s timeout: a loaded CPU only slows the test, never fails it).
FAKE = r"""#!/usr/bin/env bash
while [ $# -gt 0 ]; do
  case $1 in
    --variants) arm=$2; shift;; --seeds) seed=$2; shift;; --runs) store=$2; shift;;
    --eval-batching) batching=$2; shift;;
  esac
  shift
done
log=$(dirname "$0")/jobs.log
base=no; compgen -G "$store/base-*/eval-*/summary.json" > /dev/null && base=yes
echo "$seed|$arm|$base|${batching:-}" >> "$log"
if [ $base = no ]; then
  mkdir -p "$store/base-m/eval-e" && echo {} > "$store/base-m/eval-e/summary.json"
  for _ in $(seq 2400); do [ "$(wc -l < "$log")" -gt 1 ] && exit 0; sleep 0.1; done
  echo alone >> "$log"
fi
"""


def queue(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    fake = tmp_path / "traac"
    fake.write_text(FAKE)
    fake.chmod(0o755)
    study = tmp_path / "study"
    study.mkdir(exist_ok=True)
    (study / "recipe.yaml").write_text("mode: traac\n")
    return subprocess.run(
        ["bash", str(SCRIPT), str(study), str(tmp_path / "store"), str(tmp_path / "out"), *args],
        capture_output=True, text=True, timeout=300,
        env={"PATH": "/usr/bin:/bin", "TRAAC": str(fake), "GAP": "1", **env},
    )  # fmt: skip


def test_every_job_once_in_order_the_second_worker_after_the_base(tmp_path: Path) -> None:
    out = queue(tmp_path, "3", "7", ARMS="CR+LR|TRAAC, answer-only copies",
                EXTRA="--eval-batching refill")  # fmt: skip
    assert out.returncode == 0, out.stderr
    jobs = (tmp_path / "jobs.log").read_text().splitlines()
    assert jobs == ["3|CR+LR|no|refill", "3|TRAAC, answer-only copies|yes|refill",
                    "7|CR+LR|yes|refill", "7|TRAAC, answer-only copies|yes|refill"]  # fmt: skip
    assert out.stdout.count("exit 0") == 4
    assert (tmp_path / "out" / "TRAAC__answer_only_copies-s7.log").is_file()


def test_the_default_arms_are_the_long_studies_five(tmp_path: Path) -> None:
    (tmp_path / "store" / "base-m" / "eval-e").mkdir(parents=True)
    (tmp_path / "store" / "base-m" / "eval-e" / "summary.json").write_text("{}")
    assert queue(tmp_path, "0").returncode == 0
    arms = [line.split("|")[1] for line in (tmp_path / "jobs.log").read_text().splitlines()]
    assert arms == ["CR+LR", "TRAAC without compression", "TRAAC", "TRAAC, answer-only copies",
                    "TRAAC, after-answer compression"]  # fmt: skip


def test_a_mistake_is_one_line_before_any_job(tmp_path: Path) -> None:
    for args, env, words in [(("x",), {}, "seed x is not an integer"),
                             (("0",), {"GAP": "soon"}, "GAP=soon is not a whole number"),
                             ((), {}, "usage: records/run-queue.sh")]:  # fmt: skip
        out = queue(tmp_path, *args, **env)
        assert out.returncode == 2 and out.stderr.count("\n") == 1 and words in out.stderr
    assert not (tmp_path / "jobs.log").exists()
