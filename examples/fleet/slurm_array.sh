#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A pav fuzz campaign as a Slurm job array: array task I of N runs shard I/N,
# one GPU each, all with one base seed (the array's job id unless PAV_SEED is
# set), and writes its report to a shared folder. Submit the array, then the
# merge as a job that runs once every task has ended:
#
#   jid=$(sbatch --parsable --array=0-7 examples/fleet/slurm_array.sh)
#   sbatch --dependency=afterany:$jid --wrap \
#     "pav report merge pav-fleet-$jid/shard-*.json --json-out pav-fleet-$jid/fleet.json"
#
# Environment: PAV (the binary, default pav), PAV_SEED, PAV_FLEET_DIR (default
# $SLURM_SUBMIT_DIR/pav-fleet-<array job id>), PAV_FUZZ_ARGS (extra pav fuzz
# options; default a 50-minute budget over every property, inside the time limit).
# A task cut short by the time limit gets SIGTERM first (--signal below) and
# still writes its report.
#SBATCH --job-name=pav-fuzz
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task=4
#SBATCH --time=01:00:00
#SBATCH --signal=B:TERM@120
#SBATCH --output=pav-fuzz-%A_%a.log
set -uo pipefail

: "${SLURM_ARRAY_TASK_ID:?run this as a job array: sbatch --array=0-N-1 $0}"
shards=${SLURM_ARRAY_TASK_COUNT:?this Slurm does not set SLURM_ARRAY_TASK_COUNT}
job=${SLURM_ARRAY_JOB_ID:?}
dir=${PAV_FLEET_DIR:-${SLURM_SUBMIT_DIR:-.}/pav-fleet-$job}
mkdir -p "$dir"
read -ra extra <<<"${PAV_FUZZ_ARGS:---time-budget 50m}"

# Array indices must be 0..N-1 (--array=0-7), one task per shard.
((SLURM_ARRAY_TASK_ID < shards)) || {
  echo "array index $SLURM_ARRAY_TASK_ID is not below the task count $shards: use --array=0-$((shards - 1))" >&2
  exit 2
}
"${PAV:-pav}" fuzz --backend gpu --shard "$SLURM_ARRAY_TASK_ID/$shards" --seed "${PAV_SEED:-$job}" \
  --report "$dir/shard-$SLURM_ARRAY_TASK_ID.json" --save "$dir/counterexamples" --quiet "${extra[@]}" &
pid=$!
trap 'kill -TERM $pid' TERM INT
wait $pid
rc=$?
if ((rc > 128)) && kill -0 $pid 2>/dev/null; then wait $pid; rc=$?; fi
exit $rc
