#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Whole `pav verify --checks decode` runs (the default 40 s decode search, then shrinking and the
# sequence search) over one kernel at 20 base seeds 1 + 1000003 i, two at a time: per seed the
# exit code, the wall time of the whole run, the search's time and calls, and where the failure was
# found and how it was saved (fresh, sequence, state-dependent).
#
#   bench/find/verify_timed.sh PAV 'KERNEL' OUTDIR
set -uo pipefail
if (($# != 3)); then sed -n '2,8p' "$0"; exit 2; fi
pav=$1 kernel=$2 out=$3
mkdir -p "$out"
one() {
  local s=$1 dir=$out/seed-$1
  rm -rf "$dir"; mkdir -p "$dir"
  local t0 t1 rc
  t0=$(date +%s.%N)
  "$pav" verify --kernel "$kernel" --checks decode --seed "$s" --quiet --json --save "$dir/ce" >"$dir/report.json" 2>"$dir/log.txt"
  rc=$?
  t1=$(date +%s.%N)
  python3 - "$dir/report.json" "$s" "$rc" "$t0" "$t1" <<'PY'
import json, sys
p, s, rc, t0, t1 = sys.argv[1:]
c = json.load(open(p))["checks"][0]
d = c["detail"] or {}
f = d.get("failure")
print("seed %s exit %s total %.1f s; search %.1f s, %d calls; %s" % (
    s, rc, float(t1) - float(t0), d.get("seconds", 0), c["cases"],
    "found at call %d, %s" % (f["seed"] - int(s), f.get("reproduction")) if f else "not found"))
PY
}
export -f one
export pav kernel out
for i in $(seq 0 19); do echo $((1 + 1000003 * i)); done | xargs -P 2 -I{} bash -c 'one {}'
