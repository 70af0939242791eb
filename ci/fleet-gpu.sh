#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The multi-GPU fleet runner on a real GPU host: one shard per visible GPU with
# the GPU backend, merged, and the fleet report checked (one shard per GPU,
# each on its own device, the same seeds as one unsharded run would have).
# Uses pav from build/fleet-gpu (ci/fleet-gpu-stage.sh) or PAV=path.
# Usage: ci/fleet-gpu.sh [BUDGET]   (per shard; default 2m)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
budget=${1:-2m}
stage=$root/build/fleet-gpu
pav=${PAV:-$stage/bin/pav}
[[ -d $stage/lib ]] && export LD_LIBRARY_PATH=$stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
out=${PAV_FLEET_OUT:-${OUT:-/tmp}/fleet-gpu}
nvidia-smi -L || true
"$pav" --version || { echo "fleet-gpu: pav does not run here"; exit 3; }
bash "$root/examples/fleet/multi_gpu.sh" --pav "$pav" --out "$out" -- --time-budget "$budget" --seed 20261201 \
  --shrink-tries 2000
rc=$?
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
/usr/bin/env python3 - "$out/fleet.json" "$ngpu" <<'PY'
import json, sys
fleet, ngpu = json.load(open(sys.argv[1])), int(sys.argv[2])
print("shards %d (GPUs %d), backend %s" % (fleet["shard_count"], ngpu, fleet["backend"]))
for r in fleet["reports"]:
    print("  shard %s on %s: %.0f s wall, %.0f s CPU, exit %d" % (r["shard"], r["device"], r["wall_seconds"], r["cpu_seconds"], r["exit_code"]))
for p in fleet["properties"]:
    print("  %-18s %8d cases %10.1f cases/s  seed prefix %d  failures %d" %
          (p["property"], p["cases"], p["cases_per_second"], p["seed_prefix"], p["failures"]))
assert fleet["shard_count"] == ngpu and fleet["backend"] == "gpu", "one GPU shard per GPU"
devices = [r["device"] for r in fleet["reports"]]
assert len(set(devices)) == len(devices), "each shard pinned to its own GPU: %s" % devices
print("fleet-gpu: the runner gave every GPU its shard")
PY
check=$?
echo "fleet-gpu: merge exit $rc, checks exit $check"
((check == 0)) || exit 1
exit $rc
