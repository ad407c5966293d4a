#!/usr/bin/env bash
# The verdict study's runs for one seed, every arm on this machine, two at a time with one thread
# each, niced. Run from a worktree at the study's commit (records/smollm2-think-verdict/README.md):
#   records/smollm2-think-verdict/run.sh SEED STORE OUT
# A rerun resumes: finished runs are kept in STORE, a stopped one continues from its checkpoint.
# The paper's TRAAC runs for seeds 0-2 only (ARMS_PAPER); the after-answer variant for seeds 0-2
# first, all five (AFTER_ANSWER_ALL=1) if its 3-seed mean beats TRAAC without compression.
set -uo pipefail
seed=$1 store=$2 out=$3
here=$(cd "$(dirname "$0")" && pwd)
study_commit=117a743c78ddc128b383c1209b8aaab3ff30e29b  # every kept run's (their run.json legs)
head=$(git -C "$here" rev-parse HEAD 2>/dev/null)
if [ "$head" != "$study_commit" ]; then
  echo "run.sh: this checkout is at ${head:-no git commit}, not the study's commit $study_commit; run from a worktree at it (README.md, Running a seed)" >&2
  exit 2
fi
traac=${TRAAC:-.venv/bin/traac}
run() {  # one arm of this seed
  nice -n 10 "$traac" experiment compare --config "$here/recipe.yaml" --variants "$1" \
    --seeds "$seed" --held-out 40 --runs "$store" --output "$out/$(echo "$1" | tr -c 'a-zA-Z0-9\n' _)-s$seed"
}
# The after-answer variant first: its first 10 steps show (`traac copies`) whether its copies
# lose any computation step before the rest of the study leans on it.
lane_a=("CR+LR" "TRAAC without compression")
lane_b=("TRAAC, answer-only copies")
if [ "$seed" -le 2 ] || [ "${AFTER_ANSWER_ALL:-0}" = 1 ]; then
  lane_b=("TRAAC, after-answer compression" "${lane_b[@]}")
fi
if [ "$seed" -le 2 ]; then lane_a+=("TRAAC"); fi
base="$store/base-smollm2-think/eval-40x4-256t-2026/summary.json"
( for arm in "${lane_a[@]}"; do run "$arm"; done ) &
( until [ -f "$base" ]; do sleep 30; done; for arm in "${lane_b[@]}"; do run "$arm"; done ) &
wait
