#!/usr/bin/env bash
# Several seeds of a study's runs, from one queue that two workers take from, niced, so neither
# core waits for the other lane's last arm of a seed (each run takes its recipe's num_threads; the
# long studies' recipes say one):
#   records/run-queue.sh STUDY STORE OUT SEED...
# ARMS names the study's arms, separated by '|', in the order they run for each seed (default: the
# five of the tiny long studies, records/testbed-long-*/run.sh's order). Where STORE holds no
# evaluation of the base model yet, the first job starts alone (it makes it; every arm then finds
# it) and the second worker starts once that evaluation is done. Each later job starts at least
# GAP seconds (default 45) after the one before: at the tiny studies' commit (35abb59) two arms
# opening the store's finished base evaluation in the same second collide on its lock (main
# waits for it since cae42fa). A rerun resumes: finished runs are
# found in STORE, a stopped one continues from its checkpoint. TRAAC names the command (default
# .venv/bin/traac); EXTRA, options added to every job's (`--eval-batching refill`).
set -uo pipefail
if [ $# -lt 4 ] || [ ! -f "$1/recipe.yaml" ]; then
  echo "usage: records/run-queue.sh STUDY STORE OUT SEED... (STUDY: a directory holding recipe.yaml; at least one seed)" >&2
  exit 2
fi
for seed in "${@:4}"; do
  [[ $seed =~ ^[0-9]+$ ]] || { echo "records/run-queue.sh: seed $seed is not an integer >= 0" >&2; exit 2; }
done
[[ ${GAP:-45} =~ ^[0-9]+$ ]] || { echo "records/run-queue.sh: GAP=$GAP is not a whole number of seconds" >&2; exit 2; }
IFS='|' read -r -a arms <<< "${ARMS:-CR+LR|TRAAC without compression|TRAAC|TRAAC, answer-only copies|TRAAC, after-answer compression}"
study=$(cd "$1" && pwd) store=$2 out=$3 gap=${GAP:-45}
shift 3
traac=${TRAAC:-.venv/bin/traac}
queue=$(mktemp)
trap 'rm -f "$queue" "$queue".*' EXIT
for seed in "$@"; do
  for arm in "${arms[@]}"; do
    echo "$seed|$arm" >> "$queue"
  done
done
date +%s > "$queue.last"
take() {  # the next job, at least GAP s after the last one started; nothing when none is left
  flock "$queue.lock" bash -c '
    line=$(head -n 1 "$1"); [ -z "$line" ] && exit 0
    sed -i 1d "$1"
    wait=$(( $(cat "$1.last") + $2 - $(date +%s) )); [ "$wait" -gt 0 ] && sleep "$wait"
    date +%s > "$1.last"; echo "$line"' _ "$queue" "$gap"
}
run() {  # one job: seed|arm
  local seed=${1%%|*} arm=${1#*|} name
  name=$(echo "$arm" | tr -c 'a-zA-Z0-9\n' _)-s$seed
  echo "$(date -u +%T) start seed $seed: $arm"
  nice -n 10 "$traac" experiment compare --config "$study/recipe.yaml" --variants "$arm" \
    --seeds "$seed" --held-out 100 --runs "$store" --output "$out/$name" ${EXTRA:-} > "$out/$name.log" 2>&1
  echo "$(date -u +%T) end seed $seed: $arm, exit $?"
}
worker() {
  while job=$(take) && [ -n "$job" ]; do run "$job"; done
}
based() { compgen -G "$store/base-*/eval-*/summary.json" > /dev/null; }
mkdir -p "$out" "$store"
if based; then
  worker & worker & wait
else
  ( run "$(take)"; worker ) &
  while ! based && kill -0 $! 2> /dev/null; do sleep 10; done
  worker & wait
fi
