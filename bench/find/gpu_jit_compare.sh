#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Triton example (examples/workers/triton_decode.py) on a GPU host, run from the repository root:
# one large-cache case replayed (the example as it is, and with its int32-page-offset defect), then in
# 8 shapes from seed 1: NEW's 100 calls from an empty Triton cache and again warm, OLD's
# (an earlier pav, when given) warm on the same card, NEW's 300 warm calls (MORE=1), then NEW's default
# pav verify. Each run's JSON and log go into $OUT/jit.tgz; a summary line per run is printed.
#   NEW=build/jitkit/bin/pav OLD=build/jitkit-old/bin/pav LIBS=build/jitkit/lib \
#     bash bench/find/gpu_jit_compare.sh
# (a CPU build of pav, stripped, with the libtbb and libfmt it links, carried to the host).
set -u
NEW=${NEW:-build/jitkit/bin/pav} OLD=${OLD:-build/jitkit-old/bin/pav} LIBS=${LIBS:-build/jitkit/lib}
OUT=${OUT:-/tmp/jit-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$LIBS TRITON_CACHE_DIR=/tmp/tc TIMEFORMAT='%R s wall, %U s user, %S s sys'
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "cores $(nproc); transparent huge pages: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null); TMPDIR ${TMPDIR:-/tmp} on $(df --output=fstype "${TMPDIR:-/tmp}" | tail -1)"
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
w="exec:python3 $PWD/examples/workers/triton_decode.py"
o=/tmp/o; mkdir -p $o
# Each run timed; the archive rewritten after each, so a run cut off by a time limit keeps the rest.
t() {
  local n=$1; shift; echo "== $n"
  { time "$@" > $o/$n.json 2> $o/$n.log; } 2>&1; echo "rc $?"; tail -2 $o/$n.log
  tar czf "$OUT/jit.tgz" -C $o --exclude=ce .
}
# A large-cache case (K and V of 4 GiB each, the used pages past element 2^31) through the example as
# it is (PASS) and with its int32 offset defect (FAIL: the read before the buffer), each timed.
large=results/large-cache/h200-2026-12-03-triton-int32-page-offset-case.json
t large-clean $NEW replay $large --kernel "$w" --json
t large-defect $NEW replay $large --kernel "$w --defect int32-page-offset" --json
t new-cold $NEW fuzz --kernel "$w" --property decode --cases 100 --seed 1 --regions --shapes 8 --quiet --json
t new-warm $NEW fuzz --kernel "$w" --property decode --cases 100 --seed 1 --regions --shapes 8 --quiet --json
[[ -x $OLD ]] && t old-warm $OLD fuzz --kernel "$w" --property decode --cases 100 --seed 1 --regions --shapes 8 --quiet --json
[[ ${MORE:-0} == 1 ]] && t new-warm-300 $NEW fuzz --kernel "$w" --property decode --cases 300 --seed 1 --regions --shapes 8 --quiet --json
t new-verify $NEW verify --kernel "$w" --seed 1 --json --save $o/ce
python3 - $o <<'PY'
import glob, json, os, sys
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    try:
        d = json.load(open(f))
    except Exception as e:
        print(os.path.basename(f), "unreadable", e); continue
    runs = d.get("runs") or [c.get("detail") for c in d.get("checks", []) if isinstance(c.get("detail"), dict)]
    for r in runs:
        if r and "cases" in r:
            print(os.path.basename(f), r.get("property"), "cases", r.get("cases"), "seconds", r.get("seconds"),
                  "cpu", r.get("cpu_seconds"), "shapes", r.get("shapes"), "failure", bool(r.get("failure")))
    print(os.path.basename(f), "verdict", d.get("verdict"), "passed", d.get("passed"))
PY
