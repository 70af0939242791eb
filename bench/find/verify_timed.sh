#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Whole `pav verify` runs over one kernel at 20 base seeds 1 + 1000003 i, two at a time: per seed
# the exit code, the wall time of the whole run, the decode search's time and calls, and where the
# failure was found and how it was saved (fresh, sequence, state-dependent); then a summary line.
# By default only the decode check (`--checks decode`: the 40 s search, shrinking and the sequence
# search); CHECKS=all runs the default set of checks, CHECKS=LIST those. SEEDS=N (default 20),
# JOBS=N (default 2).
#
#   bench/find/verify_timed.sh PAV 'KERNEL' OUTDIR
set -uo pipefail
if (($# != 3)); then sed -n '2,10p' "$0"; exit 2; fi
pav=$1 kernel=$2 out=$3 checks=${CHECKS:-decode}
mkdir -p "$out"
one() {
  local s=$1 dir=$out/seed-$1
  rm -rf "$dir"; mkdir -p "$dir"
  local t0 t1 rc
  local -a sel=(--checks "$checks")
  [[ $checks == all ]] && sel=()
  t0=$(date +%s.%N)
  "$pav" verify --kernel "$kernel" "${sel[@]}" --seed "$s" --quiet --json --save "$dir/ce" >"$dir/report.json" 2>"$dir/log.txt"
  rc=$?
  t1=$(date +%s.%N)
  python3 - "$dir/report.json" "$s" "$rc" "$t0" "$t1" <<'PY'
import json, sys
p, s, rc, t0, t1 = sys.argv[1:]
try:
    checks = json.load(open(p))["checks"]
except (OSError, ValueError, KeyError) as e:
    print("seed %s exit %s total %.1f s; no report (%s)" % (s, rc, float(t1) - float(t0), e))
    sys.exit()
c = next((c for c in checks if c.get("name") == "decode"), checks[0])
d = c["detail"] or {}
f = d.get("failure")
failed = [x["name"] for x in checks if x.get("passed") is False]
print("seed %s exit %s total %.1f s; search %.1f s, %d calls; %s; failing checks: %s" % (
    s, rc, float(t1) - float(t0), d.get("seconds", 0) or 0, c.get("cases") or 0,
    "decode found at call %d, %s" % (f["seed"] - int(s), f.get("reproduction")) if f else "decode not found",
    ",".join(failed) or "none"))
PY
}
export -f one
export pav kernel out checks
for i in $(seq 0 $((${SEEDS:-20} - 1))); do echo $((1 + 1000003 * i)); done |
  xargs -P "${JOBS:-2}" -I{} bash -c 'one {}' | tee "$out/seeds.txt"
awk '{n++; if ($4 == 1) f++; t = $6 + 0; if (t > worst) worst = t}
     END {printf "summary: %d of %d seeds exit 1 (a defect found); the longest whole run %.1f s\n", f, n, worst}' "$out/seeds.txt"
