#!/usr/bin/env bash
# Several seeds of a long study's runs (records/testbed-long-*/README.md): its run.sh's command for
# every (seed, arm), in seed order and run.sh's order of arms, from one queue that two workers take
# from, niced, one thread each, so neither core waits for the other lane's last arm of a seed:
#   records/run-queue.sh records/testbed-long-interleaved STORE OUT SEED...
# Where STORE holds no evaluation of the base model yet, the first job runs alone (it makes it;
# every arm then finds it). Each later job starts at least 45 s after the one before: at the
# studies' commit (35abb59) two arms opening the store's finished base evaluation in the same
# second collide on its lock (main waits for it since cae42fa). A rerun resumes: finished runs are
# found in STORE, a stopped one continues from its checkpoint. TRAAC names the command (default
# .venv/bin/traac).
set -uo pipefail
if [ $# -lt 4 ] || [ ! -f "$1/recipe.yaml" ]; then
  echo "usage: records/run-queue.sh STUDY STORE OUT SEED... (STUDY: a directory holding recipe.yaml; at least one seed)" >&2
  exit 2
fi
for seed in "${@:4}"; do
  [[ $seed =~ ^[0-9]+$ ]] || { echo "records/run-queue.sh: seed $seed is not an integer >= 0" >&2; exit 2; }
done
study=$(cd "$1" && pwd) store=$2 out=$3
shift 3
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
run() {  # one job: seed|arm
  local seed=${1%%|*} arm=${1#*|} name
  name=$(echo "$arm" | tr -c 'a-zA-Z0-9\n' _)-s$seed
  echo "$(date -u +%T) start seed $seed: $arm"
  nice -n 10 "$traac" experiment compare --config "$study/recipe.yaml" --variants "$arm" \
    --seeds "$seed" --held-out 100 --runs "$store" --output "$out/$name" > "$out/$name.log" 2>&1
  echo "$(date -u +%T) end seed $seed: $arm, exit $?"
}
worker() {
  while job=$(take) && [ -n "$job" ]; do run "$job"; done
}
mkdir -p "$out" "$store"
if ! compgen -G "$store/base-*/eval-*/summary.json" > /dev/null; then
  run "$(take)"
fi
worker & worker & wait
