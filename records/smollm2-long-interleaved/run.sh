#!/usr/bin/env bash
# The SmolLM2 long-interleaved study's runs (records/smollm2-long-interleaved/README.md): the three
# arms of each seed given, two at a time with one thread each (records/run-queue.sh, niced), from a
# worktree at the study's commit:
#   records/smollm2-long-interleaved/run.sh STORE OUT SEED...
# A rerun resumes: finished runs are kept in STORE, a stopped one continues from its last checkpoint
# (the recipe saves one every 5 steps; SIGINT or SIGTERM saves one too), an evaluation from its last
# sample. The arms and seeds 0-2 are fixed by the design; nothing here depends on a result.
set -uo pipefail
if [ $# -lt 3 ]; then
  echo "usage: records/smollm2-long-interleaved/run.sh STORE OUT SEED... (SEED: 0, 1 or 2, the design's)" >&2
  exit 2
fi
for seed in "${@:3}"; do
  [[ $seed =~ ^[0-2]$ ]] || { echo "records/smollm2-long-interleaved/run.sh: seed $seed is not one of the design's, 0, 1 or 2" >&2; exit 2; }
done
here=$(cd "$(dirname "$0")" && pwd)
ARMS="CR+LR|TRAAC without compression|TRAAC" EXTRA="--eval-batching refill" exec "$here/../run-queue.sh" "$here" "$@"
