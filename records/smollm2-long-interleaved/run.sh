#!/usr/bin/env bash
# The SmolLM2 long-interleaved study's runs for one seed (records/smollm2-long-interleaved/README.md):
# its three arms on this machine, one after another (each a SmolLM2 run of both threads), niced,
# from a worktree at the study's commit:
#   records/smollm2-long-interleaved/run.sh SEED STORE OUT
# A rerun resumes: finished runs are kept in STORE, a stopped one continues from its last checkpoint
# (the recipe saves one every 5 steps; SIGINT or SIGTERM saves one too). The arms and seeds 0-2 are
# fixed by the design; nothing here depends on a result.
set -uo pipefail
if [ $# -ne 3 ] || [[ ! $1 =~ ^[0-2]$ ]]; then
  echo "usage: records/smollm2-long-interleaved/run.sh SEED STORE OUT (SEED: 0, 1 or 2, the design's)" >&2
  exit 2
fi
seed=$1 store=$2 out=$3
here=$(cd "$(dirname "$0")" && pwd)
traac=${TRAAC:-.venv/bin/traac}
for arm in "CR+LR" "TRAAC without compression" "TRAAC"; do
  nice -n 10 "$traac" experiment compare --config "$here/recipe.yaml" --variants "$arm" \
    --seeds "$seed" --held-out 100 --runs "$store" --output "$out/$(echo "$arm" | tr -c 'a-zA-Z0-9\n' _)-s$seed"
done
