#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One example kernel, one injected defect, end to end through pav:
#   1. pav fuzz --kernel "KERNEL --defect NAME" finds a failure within CASES
#      cases from SEED, shrinks it and saves exactly one case file, and its
#      last line names the property, the seed and that file;
#   2. the file records a shrunk case (at least one shrink or simplify step)
#      that failed again in a fresh worker (meta.reproduction "fresh"; an
#      in-process library without --isolate: "same-instance");
#   3. pav replay of that file with the defect fails (exit 1);
#   4. pav replay of that file without the defect passes (exit 0);
#   5. both failing replays (pav replay, pav fuzz --replay) print one verdict
#      line that says FAIL once.
# Usage: defect_found.sh PAV PYTHON 'KERNEL' NAME CASES SEED WORKDIR
# (PYTHON reads the case file's JSON.) Every command and its output is printed.
set -uo pipefail
if (($# != 7)); then
  echo "usage: $0 PAV PYTHON 'KERNEL' DEFECT CASES SEED WORKDIR" >&2
  exit 2
fi
pav=$1 python=$2 kernel=$3 defect=$4 cases=$5 seed=$6 work=$7
broken="$kernel --defect $defect"

fail() { echo "defect_found: FAIL: $*"; exit 1; }
run() {  # run CMD...: prints the command and its output; sets rc and out
  echo "+ $*"
  out=$("$@" 2>&1)
  rc=$?
  printf '%s\n' "$out"
  echo "[exit $rc]"
}
one_fail() {  # one_fail WHAT: the output of the last run says FAIL once, on a verdict line
  grep -q 'FAIL: FAIL' <<<"$out" && fail "$1 repeats FAIL in its verdict"
  grep -qE '(^verdict   |: )FAIL' <<<"$out" || fail "$1 prints no FAIL verdict"
}

rm -rf "$work"
mkdir -p "$work"
run "$pav" fuzz --kernel "$broken" --property decode --cases "$cases" --seed "$seed" \
  --save "$work" --shrink-tries 400 --quiet
((rc == 1)) || fail "pav fuzz exited $rc, expected 1 (defect found) within $cases cases from seed $seed"
fuzz_out=$out

shopt -s nullglob
files=("$work"/*.json)
((${#files[@]} == 1)) || fail "expected one saved case file in $work, found ${#files[@]}"
case_file=${files[0]}
echo "saved: $case_file"
# The run's last line names the property, the failing case's seed and the file.
[[ $(tail -n 1 <<<"$fuzz_out") =~ ^"pav fuzz: FAIL decode (seed "[0-9]+"); counterexample $case_file"$ ]] ||
  fail "pav fuzz's last line does not name the property, the seed and $case_file"

"$python" - "$case_file" <<'PY' || fail "the saved case does not record a shrunk failure"
import json, sys
meta = json.load(open(sys.argv[1]))["meta"]
shrink = meta["shrink"]
steps = shrink["steps"] + shrink["simplify_steps"]
print("shrunk in %d steps (%d tries): %s" % (steps, shrink["tries"], meta.get("description", "")))
print("first failure:  %s" % meta["first_message"])
print("shrunk failure: %s" % meta["message"])
# A worker is a process: the shrunk case was run again in a fresh one. An
# in-process library (no --isolate) keeps its memory: the run's instance.
want = "same-instance" if meta["kernel"]["adapter"] == "lib" else "fresh"
print("reproduction: %s (expected %s) %s" % (meta.get("reproduction"), want, meta.get("reproduction_note", "")[:200]))
sys.exit(0 if steps >= 1 and meta["message"] and meta.get("reproduction") == want else 1)
PY

run "$pav" replay --kernel "$broken" "$case_file"
((rc == 1)) || fail "replay with the defect exited $rc, expected 1"
one_fail "pav replay"
run "$pav" fuzz --kernel "$broken" --replay "$case_file"
((rc == 1)) || fail "fuzz --replay with the defect exited $rc, expected 1"
one_fail "pav fuzz --replay"
run "$pav" replay --kernel "$kernel" "$case_file"
((rc == 0)) || fail "replay without the defect exited $rc, expected 0"
echo "defect_found: PASS: $defect found, shrunk, saved ($case_file), replay fails with it and passes without"
