#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# How fast pav runs a kernel that compiles per shape (examples/workers/triton_decode.py, on a CUDA
# machine with PyTorch and Triton), its decode calls in a few shapes and drawn freely, and how
# soon the search finds the worker's defects in the shapes.
#
#   bench/find/jit_shapes.sh PAV OUT [STEPS]
#
# STEPS (default rvd): letters of the runs, each a JSON report OUT/NAME.json and its log
# OUT/NAME.log, and one line "NAME rc=N S s" here:
#   r  throughput: 100 calls in 8 shapes from an empty Triton cache (shapes8-cold), the same
#      100 again on the warm cache (shapes8-warm), and 60 s of calls drawn freely (free-60s);
#      every run draws as pav verify does (--regions) from seed 1
#   v  pav verify with its defaults (the worker declares compiles_per_shape: 8 shapes)
#   d  each defect of the worker: pav fuzz drawing as pav verify does from seed 1 (--regions
#      --shapes 8), up to 60 s, shrinking at most 60 s
# TRITON_CACHE_DIR is OUT/triton-cache, empty at the start: the first run compiles.
set -uo pipefail
if (($# < 2)); then sed -n '2,17p' "$0"; exit 2; fi
pav=$1 out=$2 steps=${3:-rvd}
root=$(cd "$(dirname "$0")/../.." && pwd)
py=${PYTHON:-python3}
worker="exec:$py $root/examples/workers/triton_decode.py"
mkdir -p "$out"
export TRITON_CACHE_DIR=$out/triton-cache
rm -rf "$TRITON_CACHE_DIR"
has() { [[ $steps == *$1* ]]; }
run() {  # run NAME ARGS...: pav ARGS > OUT/NAME.json 2> OUT/NAME.log, timed
  local name=$1
  shift
  local t0 t1
  t0=$(date +%s.%N)
  "$pav" "$@" >"$out/$name.json" 2>"$out/$name.log"
  local rc=$?
  t1=$(date +%s.%N)
  awk -v n="$name" -v rc="$rc" -v a="$t0" -v b="$t1" 'BEGIN { printf "%s rc=%d %.1f s\n", n, rc, b - a }'
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
"$py" -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
if has r; then
  run shapes8-cold fuzz --kernel "$worker" --property decode --cases 100 --seed 1 --regions --shapes 8 --quiet --json
  run shapes8-warm fuzz --kernel "$worker" --property decode --cases 100 --seed 1 --regions --shapes 8 --quiet --json
  run free-60s fuzz --kernel "$worker" --property decode --minutes 1 --seed 1 --regions --quiet --json
fi
if has v; then
  run verify-default verify --kernel "$worker" --seed 1 --json --save "$out/ce-verify"
fi
if has d; then
  for d in window-off-by-one cap-after-mask sink-not-in-denominator int32-page-offset; do
    run "defect-$d" fuzz --kernel "$worker --defect $d" --property decode --minutes 1 --seed 1 --regions --shapes 8 \
      --shrink-minutes 1 --quiet --json --save "$out/ce-$d"
  done
fi
# One line per run: calls, seconds, calls/s, distinct shapes, and the first failure's index.
"$py" - "$out" <<'PY'
import glob, json, os, sys
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    try:
        j = json.load(open(f))
    except ValueError:
        print(os.path.basename(f), "no JSON report")
        continue
    runs = j.get("runs") or [c.get("detail") or {} for c in j.get("checks", [])]
    for r in runs:
        if not r:
            continue
        fail = r.get("failure")
        at = "" if not fail else " first failure at call %d (%s)" % (fail["seed"] - j.get("base_seed", j.get("seed", 0)),
                                                                     fail.get("first_message", "")[:120])
        print("%-28s %-8s %5d calls %6.1f s %6.1f calls/s %3d shapes%s" % (
            os.path.basename(f)[:-5], r.get("property", ""), r["cases"], r["seconds"],
            r["cases"] / r["seconds"] if r["seconds"] else 0, r.get("shapes", 0), at))
PY
