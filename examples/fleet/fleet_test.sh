#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The fleet workflow end to end on the CPU, through the real binary and the
# multi-GPU runner (its --cpu-shards mode):
#   1. 4 shards as separate processes, merged, against one unsharded run of the
#      same seeds: the same cases per property and every seed below the budget run;
#   2. with a defective kernel: the merged first failure is the unsharded run's
#      (same seed, same shrunk case);
#   3. the merge refuses a missing shard, a shard given twice and a shard of
#      another campaign with exit 2 and a message naming the shard;
#   4. a shard resumed from its report continues its seed stream: its two
#      segments merge as the one run, and time-budgeted segments chain.
# Usage: fleet_test.sh PAV PLUGIN.so WORKDIR   (PLUGIN: examples' split_decode)
set -uo pipefail
(($# == 3)) || { echo "usage: $0 PAV PLUGIN.so WORKDIR" >&2; exit 2; }
pav=$1 plugin=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
rm -rf "$work" && mkdir -p "$work"

fail() { echo "fleet_test: FAIL: $*"; exit 1; }
step() { echo; echo "== $*"; }
# expect RC CMD...: runs CMD (output kept in $work/last.out / last.err) and checks its exit code.
expect() {
  local want=$1
  shift
  echo "+ $*"
  "$@" >"$work/last.out" 2>"$work/last.err"
  local rc=$?
  cat "$work/last.out" "$work/last.err" | tail -n 15
  ((rc == want)) || fail "exit $rc, expected $want: $*"
}
mentions() { grep -qF -- "$1" "$work/last.err" || fail "the message does not mention '$1'"; }

props=planner,gate-mirror,decode,batch-invariance
seed=4242
per_shard=25

step "1. four shards against one unsharded run of the same seeds"
expect 0 bash "$here/multi_gpu.sh" --pav "$pav" --out "$work/fleet" --cpu-shards 4 -- \
  --property $props --cases $per_shard --seed $seed
expect 0 "$pav" fuzz --property $props --cases $((4 * per_shard)) --seed $seed --quiet \
  --save "$work/single-ce" --report "$work/single.json"
$py - "$work/fleet/fleet.json" "$work/single.json" "$((4 * per_shard))" <<'PY' || fail "the merged report differs from the unsharded run"
import json, sys
fleet, single, n = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
assert fleet["shard_count"] == 4 and fleet["exit_code"] == 0 and fleet["failures"] == [], fleet
runs = {r["property"]: r for r in single["runs"]}
for p in fleet["properties"]:
    name = p["property"]
    print("%-18s merged %d cases, unsharded %d; seed prefix %d, unsharded stream at %d" %
          (name, p["cases"], runs[name]["cases"], p["seed_prefix"], single["resume"][name]["next_case"]))
    assert p["cases"] == runs[name]["cases"] == n, name
    assert p["seed_prefix"] == single["resume"][name]["next_case"] == n, name
assert [p["property"] for p in fleet["properties"]] == single["properties"]
# The merged report names the pav that wrote the shards (here the same one).
assert fleet["reports_pav_version"] == single["pav_version"], fleet.get("reports_pav_version")
assert fleet["reports_source_commit"] == single["source_commit"], fleet.get("reports_source_commit")
PY

step "2. a defective kernel: the merged first failure is the unsharded one"
kernel="lib:$plugin --defect empty-row-nan"
expect 1 bash "$here/multi_gpu.sh" --pav "$pav" --out "$work/bad" --cpu-shards 4 -- \
  --kernel "$kernel" --property decode --cases 25 --seed 7 --shrink-tries 200
expect 1 "$pav" fuzz --kernel "$kernel" --property decode --cases 100 --seed 7 --shrink-tries 200 --quiet \
  --save "$work/bad-single-ce" --report "$work/bad-single.json"
$py - "$work/bad/fleet.json" "$work/bad-single.json" <<'PY' || fail "the merged failure differs from the unsharded one"
import json, sys
fleet, single = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
(run,) = single["runs"]
f = run["failure"]
first = fleet["failures"][0]
print("unsharded: seed %d, %s; merged first: seed %d (shard %s), %s; %d distinct" %
      (f["seed"], f["case_id"], first["seed"], first["shard"], first["case_id"], len(fleet["failures"])))
assert fleet["exit_code"] == 1
assert (first["seed"], first["case_id"]) == (f["seed"], f["case_id"])
assert first["shard"] == "%d/4" % ((f["seed"] - 7) % 4)
PY

step "3. the merge refuses what is not one campaign"
r=("$work"/fleet/shard-{0,1,2,3}.json)
expect 2 "$pav" report merge "${r[0]}" "${r[1]}" "${r[3]}"
mentions "shard 2/4 is missing"
expect 2 "$pav" report merge "${r[@]}" "$work/fleet/shard-1.json"
mentions "shard 1/4 is given twice"
expect 0 "$pav" fuzz --property $props --cases 2 --seed $((seed + 1)) --shard 3/4 --quiet \
  --save "$work/other-ce" --report "$work/other-seed.json"
expect 2 "$pav" report merge "${r[0]}" "${r[1]}" "${r[2]}" "$work/other-seed.json"
mentions "shard 3/4 ($work/other-seed.json) does not belong"
mentions "base seed $((seed + 1))"
expect 2 "$pav" report merge "${r[@]}" "$work/single.json"
mentions "shard 0/1 ($work/single.json) does not belong"
echo '{"format": "something else"}' >"$work/not-a-report.json"
expect 2 "$pav" report merge "${r[@]}" "$work/not-a-report.json"
mentions "not-a-report.json: not a pav fuzz report"

step "4. a resumed shard continues its seed stream"
expect 0 "$pav" fuzz --property $props --cases 2 --seed $seed --shard 1/4 --quiet \
  --save "$work/resume-ce" --report "$work/s1-a.json"
expect 0 "$pav" fuzz --resume "$work/s1-a.json" --cases $((per_shard - 2)) --quiet \
  --save "$work/resume-ce" --report "$work/s1-b.json"
expect 2 "$pav" fuzz --resume "$work/s1-a.json" --cases 1 --report "$work/s1-a.json"
mentions "the same file as --resume"
expect 2 "$pav" fuzz --resume "$work/s1-a.json" --cases 1 --seed 1
mentions "base seed $seed, not 1"
expect 0 "$pav" report merge --json-out "$work/resumed.json" "${r[0]}" "$work/s1-b.json" "$work/s1-a.json" "${r[2]}" "${r[3]}"
# Without its first segment the second is refused.
expect 2 "$pav" report merge "${r[0]}" "$work/s1-b.json" "${r[2]}" "${r[3]}"
mentions "shard 1/4: $work/s1-b.json continues an earlier run that is not given"
# Segment a again (overlapping b's start) is refused.
expect 2 "$pav" report merge "${r[0]}" "$work/s1-a.json" "$work/s1-b.json" "$work/s1-b.json" "${r[2]}" "${r[3]}"
mentions "shard 1/4"
$py - "$work/fleet/fleet.json" "$work/resumed.json" <<'PY' || fail "the resumed shard does not merge as the one run"
import json, sys
whole, resumed = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
for a, b in zip(whole["properties"], resumed["properties"]):
    print("%-18s one run %d cases, seed prefix %d; resumed %d, %d" %
          (a["property"], a["cases"], a["seed_prefix"], b["cases"], b["seed_prefix"]))
    assert (a["property"], a["cases"], a["seed_prefix"]) == (b["property"], b["cases"], b["seed_prefix"])
assert [r["segment"] for r in resumed["reports"] if r["shard"] == "1/4"] == [0, 1]
PY
# Time-budgeted segments chain too (two jobs, so a job may stop past the frontier).
expect 0 "$pav" fuzz --property planner --time-budget 1s --jobs 2 --seed 99 --quiet \
  --save "$work/budget-ce" --report "$work/t1.json"
expect 0 "$pav" fuzz --resume "$work/t1.json" --time-budget 1s --jobs 2 --quiet \
  --save "$work/budget-ce" --report "$work/t2.json"
expect 0 "$pav" report merge --json "$work/t2.json" "$work/t1.json"
$py - "$work/last.out" "$work/t1.json" "$work/t2.json" <<'PY' || fail "the time-budgeted segments do not add up"
import json, sys
merged, t1, t2 = (json.load(open(f)) for f in sys.argv[1:])
(p,) = merged["properties"]
n1, n2 = t1["runs"][0]["cases"], t2["runs"][0]["cases"]
print("segments of %d and %d cases; merged %d, seed prefix %d" % (n1, n2, p["cases"], p["seed_prefix"]))
assert n1 > 0 and n2 > 0 and p["cases"] == n1 + n2
assert t2["resumed"]["planner"] == t1["resume"]["planner"]
assert p["seed_prefix"] == t2["resume"]["planner"]["next_case"] <= n1 + n2
PY
# The budget's units, and its errors.
expect 0 "$pav" fuzz --property planner --cases 2 --time-budget 0.5h --seed 1 --quiet --save "$work/budget-ce" \
  --report "$work/u1.json"
expect 0 "$pav" fuzz --property planner --cases 2 --time-budget 90s --seed 1 --quiet --save "$work/budget-ce" \
  --report "$work/u2.json"
$py - "$work/u1.json" "$work/u2.json" <<'PY' || fail "--time-budget's units"
import json, sys
a, b = (json.load(open(f))["budget"]["minutes"] for f in sys.argv[1:])
print("0.5h -> %s min, 90s -> %s min" % (a, b))
assert a == 30 and b == 1.5
PY
for bad in 5 5x 0s -1m 1.5 8d; do
  expect 2 "$pav" fuzz --property planner --time-budget "$bad" --quiet --save "$work/budget-ce"
  mentions "--time-budget"
done

step "5. a run stopped by SIGTERM still reports where it stopped, and resumes from there"
"$pav" fuzz --property planner --minutes 10 --seed 5 --quiet --save "$work/stop-ce" --report "$work/stopped.json" \
  >"$work/stopped.log" 2>&1 &
pid=$!
sleep 2
kill -TERM $pid
wait $pid
rc=$?
cat "$work/stopped.log" | tail -n 4
((rc == 3)) || fail "a run stopped by SIGTERM exited $rc, expected 3"
expect 0 "$pav" fuzz --resume "$work/stopped.json" --cases 5 --quiet --save "$work/stop-ce" --report "$work/after-stop.json"
$py - "$work/stopped.json" "$work/after-stop.json" <<'PY' || fail "the stopped run's report"
import json, sys
stopped, after = (json.load(open(f)) for f in sys.argv[1:])
(run,) = stopped["runs"]
print("stopped after %d cases at %s; resumed from %s to %s" %
      (run["cases"], stopped["resume"]["planner"], after["resumed"]["planner"], after["resume"]["planner"]))
assert stopped["interrupted"] and stopped["exit_code"] == 3 and run["cases"] > 0
assert stopped["resume"]["planner"]["next_case"] > 0
assert after["resumed"]["planner"] == stopped["resume"]["planner"]
assert after["resume"]["planner"]["next_case"] >= stopped["resume"]["planner"]["next_case"] + 5
PY
echo
echo "fleet_test: PASS"
