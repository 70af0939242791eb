#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Tests of ci/mutants-refresh.sh on a scratch tree: an exact patch passes the
# check; a patch whose context moved fails it, is regenerated to apply exactly
# with the same changed lines and header; a fuzzed context is regenerated too; a
# hunk that no longer applies is refused and left alone; a patch without its
# header fails the check. Exit 0 when all hold.
set -uo pipefail
script=$(cd "$(dirname "$0")" && pwd)/mutants-refresh.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export PAV_MUTANTS_ROOT=$tmp
status=0
ok() { echo "  ok    $1"; }
bad() { echo "  FAIL  $1"; status=1; }
check() { bash "$script" --check "$@" >"$tmp/out" 2>&1; }

mkdir -p "$tmp/ci/mutants" "$tmp/src"
seq 1 40 | sed 's/^/line /' >"$tmp/src/a.cpp"
write_patch() {  # NAME FROM-LINE TO-TEXT [header]
  {
    [[ ${4:-header} == header ]] && printf 'pav-mutant: test mutant %s\npav-tests: Nothing\n---\n' "$1"
    printf 'diff --git a/src/a.cpp b/src/a.cpp\n--- a/src/a.cpp\n+++ b/src/a.cpp\n'
    printf '@@ -%d,7 +%d,7 @@\n' $(($2 - 3)) $(($2 - 3))
    for i in 3 2 1; do echo " line $(($2 - i))"; done
    echo "-line $2"
    echo "+$3"
    for i in 1 2 3; do echo " line $(($2 + i))"; done
  } >"$tmp/ci/mutants/$1.patch"
}

write_patch exact 20 "line 20 mutated"
check && ok "an exact patch passes --check" || { bad "an exact patch fails --check"; cat "$tmp/out"; }

# Three lines inserted above the context: the hunk now applies only at an offset.
sed -i '5i inserted 1\ninserted 2\ninserted 3' "$tmp/src/a.cpp"
check; rc=$?
[[ $rc -eq 1 ]] && grep -q 'DRIFTED   exact' "$tmp/out" && grep -q 'offset 3 lines' "$tmp/out" &&
  ok "an offset patch fails --check (exit 1, named, offset shown)" || { bad "offset not reported"; cat "$tmp/out"; }
cp "$tmp/ci/mutants/exact.patch" "$tmp/before.patch"
bash "$script" exact >"$tmp/out" 2>&1 || { bad "refresh of an offset patch failed"; cat "$tmp/out"; }
check && ok "after refresh the patch applies exactly" || { bad "refreshed patch still drifts"; cat "$tmp/out"; }
grep -q '^@@ -20,7 +20,7 @@' "$tmp/ci/mutants/exact.patch" && ok "the hunk moved by the offset" ||
  { bad "hunk header not moved"; cat "$tmp/ci/mutants/exact.patch"; }
diff <(grep -E '^[-+][^-+]' "$tmp/before.patch") <(grep -E '^[-+][^-+]' "$tmp/ci/mutants/exact.patch") >/dev/null &&
  ok "the changed lines are unchanged" || bad "the changed lines differ"
diff <(sed -n '1,3p' "$tmp/before.patch") <(sed -n '1,3p' "$tmp/ci/mutants/exact.patch") >/dev/null &&
  ok "the header is kept" || bad "the header changed"

# A context line edited: applies only with fuzz; refresh re-diffs it.
sed -i 's/^line 33$/line 33 edited/' "$tmp/src/a.cpp"
write_patch fuzzy 30 "line 30 mutated"
check fuzzy; [[ $? -eq 1 ]] && ok "a fuzzed context fails --check" || bad "fuzz not reported"
bash "$script" fuzzy >"$tmp/out" 2>&1 && check fuzzy && grep -q '^ line 33 edited' "$tmp/ci/mutants/fuzzy.patch" &&
  ok "a fuzzed patch is regenerated with the current context" || { bad "fuzzy refresh"; cat "$tmp/out"; }

# The line a patch removes is gone: refused, file untouched, exit 1.
write_patch gone 10 "line 10 mutated"
sed -i 's/^line 10$/line ten/' "$tmp/src/a.cpp"
cp "$tmp/ci/mutants/gone.patch" "$tmp/gone.before"
bash "$script" gone >"$tmp/out" 2>&1; rc=$?
[[ $rc -eq 1 ]] && grep -q 'REFUSED   gone' "$tmp/out" && cmp -s "$tmp/gone.before" "$tmp/ci/mutants/gone.patch" &&
  ok "a hunk that does not apply is refused and the patch left alone" || { bad "gone not refused"; cat "$tmp/out"; }
rm "$tmp/ci/mutants/gone.patch"

# A patch without its header is malformed.
write_patch headless 36 "line 36 mutated" none
check headless; rc=$?
[[ $rc -eq 1 ]] && grep -q 'MALFORMED headless: no pav-mutant header' "$tmp/out" &&
  ok "a patch without a header fails --check" || { bad "headless accepted"; cat "$tmp/out"; }
exit $status
