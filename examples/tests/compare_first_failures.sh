#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# pav compare of two defective kernels: the text names each kernel's first
# failure exactly once, and it is the first case its per-case file marks wrong.
# Usage: compare_first_failures.sh PAV 'KERNEL A' 'KERNEL B' WORKDIR
set -uo pipefail
pav=$1 a=$2 b=$3 work=$4
fail() { echo "compare_first_failures: FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work"
out=$("$pav" compare --kernel "$a" --kernel "$b" --cases 40 --seed 1 --out-dir "$work" --quiet 2>&1)
rc=$?
printf '%s\n' "$out"
((rc == 0)) || fail "pav compare exited $rc, expected 0"
for k in a b; do
  K=${k^^}
  lines=$(grep -c "^$K first failure: " <<<"$out")
  ((lines == 1)) || fail "$lines '$K first failure' lines, expected 1"
  first=$(grep -m1 '"correct":false' "$work/compare-$k.jsonl" | sed 's/^{"id":"\([^"]*\)".*/\1/')
  [[ -n $first ]] || fail "compare-$k.jsonl marks no case wrong"
  grep -q "^$K first failure: $first: FAIL" <<<"$out" || fail "kernel $K's first failure is not $first"
done
echo "compare_first_failures: PASS"
