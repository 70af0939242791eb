#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A fault of a kernel under test, end to end through pav's command line:
#   fault_cli.sh PAV FAULTY_KERNEL FIXED_KERNEL EXPECTED [OPTIONS...]
# pav fuzz on FAULTY_KERNEL must fail (exit 1) with EXPECTED in its report and
# save a case file carrying EXPECTED; pav replay of that file through the
# kernel it records must fail the same way, and through FIXED_KERNEL pass.
# OPTIONS (e.g. --timeout 0.5, --isolate) go to both commands; SHRINK_TRIES
# bounds shrinking (default 80).
set -u
pav=$1 faulty=$2 fixed=$3 expected=$4
shift 4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAULT TEST FAILED: $*"; exit 1; }

out=$("$pav" fuzz --kernel "$faulty" --property decode --cases 60 --seed 7 --save "$dir" --quiet \
      --shrink-tries "${SHRINK_TRIES:-80}" "$@" 2>&1)
rc=$?
printf '%s\n' "$out"
[ "$rc" -eq 1 ] || fail "pav fuzz exited $rc, expected 1"
grep -qF -- "$expected" <<<"$out" || fail "pav fuzz did not report: $expected"
case_file=$(ls "$dir"/*.json 2>/dev/null | head -1)
[ -n "$case_file" ] || fail "no case file saved under $dir"
grep -qF -- "$expected" "$case_file" || fail "the saved case does not carry: $expected"
grep -qF -- '"spec"' "$case_file" || fail "the saved case does not record the kernel"

# The case records an exec: or lib: kernel: replaying it through that kernel
# takes --trust-case-kernel (a case file never runs a command on its own).
out=$("$pav" replay "$case_file" --trust-case-kernel "$@" 2>&1)
rc=$?
printf '%s\n' "$out"
[ "$rc" -eq 1 ] || fail "replay through the recorded kernel exited $rc, expected 1"
grep -qF -- "$expected" <<<"$out" || fail "replay through the recorded kernel did not report: $expected"

out=$("$pav" replay "$case_file" --kernel "$fixed" 2>&1)
rc=$?
printf '%s\n' "$out"
[ "$rc" -eq 0 ] || fail "replay through the kernel without the fault exited $rc, expected 0"
echo "fault test passed: $expected"
