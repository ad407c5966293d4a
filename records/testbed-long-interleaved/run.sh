#!/usr/bin/env bash
# The long-interleaved study's runs for one seed (records/testbed-long-interleaved/README.md): every arm on
# this machine, two at a time with one thread each, niced, from a worktree at the study's commit:
#   records/testbed-long-interleaved/run.sh SEED STORE OUT
# A rerun resumes: finished runs are kept in STORE, a stopped one continues from its checkpoint.
# All five arms run for every seed 0-9 (the design fixes them; nothing here depends on a result).
set -uo pipefail
seed=$1 store=$2 out=$3
here=$(cd "$(dirname "$0")" && pwd)
traac=${TRAAC:-.venv/bin/traac}
run() {  # one arm of this seed
  nice -n 10 "$traac" experiment compare --config "$here/recipe.yaml" --variants "$1" \
    --seeds "$seed" --held-out 100 --runs "$store" --output "$out/$(echo "$1" | tr -c 'a-zA-Z0-9\n' _)-s$seed"
}
# The first arm alone: it evaluates the base model, which every arm then finds in STORE.
run "CR+LR"
lane_a=("TRAAC without compression" "TRAAC")
lane_b=("TRAAC, answer-only copies" "TRAAC, after-answer compression")
( for arm in "${lane_a[@]}"; do run "$arm"; done ) &
( for arm in "${lane_b[@]}"; do run "$arm"; done ) &
wait
