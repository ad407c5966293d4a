#!/usr/bin/env bash
# The long-interleaved study's runs from seed 2 on (README.md, "The runs so far"): run.sh's command
# for every (seed, arm), in seed order and run.sh's order of arms, from one queue that two workers
# take from, niced, one thread each, so neither core waits for the other lane's last arm of a seed:
#   records/testbed-long-interleaved/run-queue.sh STORE OUT SEED...
# Each job starts at least 45 s after the one before: at the study's commit (35abb59) two arms
# opening the store's finished base evaluation in the same second collide on its lock (main waits
# for it since cae42fa). A rerun resumes: finished runs are found in STORE, a stopped one
# continues from its checkpoint.
set -uo pipefail
store=$1 out=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
traac=${TRAAC:-.venv/bin/traac}
queue=$(mktemp)
trap 'rm -f "$queue" "$queue".*' EXIT
for seed in "$@"; do
  for arm in "CR+LR" "TRAAC without compression" "TRAAC" "TRAAC, answer-only copies" \
      "TRAAC, after-answer compression"; do
    echo "$seed|$arm" >> "$queue"
  done
done
date +%s > "$queue.last"
take() {  # the next job, at least 45 s after the last one started; nothing when none is left
  flock "$queue.lock" bash -c '
    line=$(head -n 1 "$1"); [ -z "$line" ] && exit 0
    sed -i 1d "$1"
    wait=$(( $(cat "$1.last") + 45 - $(date +%s) )); [ "$wait" -gt 0 ] && sleep "$wait"
    date +%s > "$1.last"; echo "$line"' _ "$queue"
}
worker() {
  while job=$(take) && [ -n "$job" ]; do
    seed=${job%%|*} arm=${job#*|}
    name=$(echo "$arm" | tr -c 'a-zA-Z0-9\n' _)-s$seed
    echo "$(date -u +%T) start seed $seed: $arm"
    nice -n 10 "$traac" experiment compare --config "$here/recipe.yaml" --variants "$arm" \
      --seeds "$seed" --held-out 100 --runs "$store" --output "$out/$name" > "$out/$name.log" 2>&1
    echo "$(date -u +%T) end seed $seed: $arm, exit $?"
  done
}
mkdir -p "$out"
worker & worker & wait
