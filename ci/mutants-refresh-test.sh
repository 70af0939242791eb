#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Tests of applying kept mutants by content (mutant_apply, ci/mutant_lib.sh) and
# of ci/mutants-refresh.sh, on a scratch tree: an exact patch passes; lines added
# above a hunk leave it applying on its own line, and refresh rewrites its @@
# line; a moved file is found by its text (among files of its extension first),
# and refresh rewrites the path; code moved into another file is found there; a hunk whose text occurs twice, a hunk
# whose text is gone and a moved file whose text is in two files are refused with
# the hunk, the file and the reason named; malformed patches, a patch outside an
# area folder and a name used twice fail --check; patches are found by name in
# their area folders. Exit 0 when all hold.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
script=$here/mutants-refresh.sh
# shellcheck source=ci/mutant_lib.sh
source "$here/mutant_lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export PAV_MUTANTS_ROOT=$tmp/tree
t=$PAV_MUTANTS_ROOT
status=0
ok() { echo "  ok    $1"; }
bad() { echo "  FAIL  $1"; status=1; }
check() { bash "$script" --check "$@" >"$tmp/out" 2>&1; }
fresh() {  # a tree of one file, src/a.cpp: "line 1" .. "line 40"
  rm -rf "$t"; mkdir -p "$t/ci/mutants/area" "$t/src"
  seq 1 40 | sed 's/^/line /' >"$t/src/a.cpp"
}
write_patch() {  # NAME FROM-LINE TO-TEXT [header] [FILE]
  local f=${5:-src/a.cpp}
  {
    [[ ${4:-header} == header ]] && printf 'pav-mutant: test mutant %s\npav-tests: Nothing\n---\n' "$1"
    printf 'diff --git a/%s b/%s\n--- a/%s\n+++ b/%s\n' "$f" "$f" "$f" "$f"
    printf '@@ -%d,7 +%d,7 @@\n' $(($2 - 3)) $(($2 - 3))
    for i in 3 2 1; do echo " line $(($2 - i))"; done
    echo "-line $2"
    echo "+$3"
    for i in 1 2 3; do echo " line $(($2 + i))"; done
  } >"$t/ci/mutants/area/$1.patch"
}
# The line a patch mutated, after applying it to a copy of the tree: LINE-NUMBER.
mutated_at() {
  rm -rf "$tmp/copy"; cp -r "$t" "$tmp/copy"
  mutant_apply "$t/ci/mutants/area/$1.patch" "$tmp/copy" >"$tmp/applied" 2>"$tmp/notes" || return 1
  grep -rn "mutated" "$tmp/copy/src" | cut -d: -f1,2 | sed "s|^$tmp/copy/||"
}

fresh
write_patch exact 20 "line 20 mutated"
check && grep -q ', 0 applying by content only' "$tmp/out" && ok "an exact patch passes --check" ||
  { bad "an exact patch fails --check"; cat "$tmp/out"; }

# Three lines added above the hunk: it still applies, on its own line, and
# refresh rewrites its @@ line.
sed -i '5i added 1\nadded 2\nadded 3' "$t/src/a.cpp"
check; rc=$?
[[ $rc -eq 0 ]] && grep -q 'INEXACT   exact' "$tmp/out" && grep -q 'written for line 17, found at line 20' "$tmp/out" &&
  ok "lines added above a hunk: it applies by content, --check passes and names the move" ||
  { bad "lines added above: not applying by content"; cat "$tmp/out"; }
[[ $(mutated_at exact) == src/a.cpp:23 ]] && ok "the defect lands on its own line (23, not 20)" ||
  { bad "landed at '$(mutated_at exact)'"; cat "$tmp/notes"; }
check --exact; [[ $? -eq 1 ]] && ok "--check --exact refuses a patch that applies only by content" ||
  { bad "--exact accepted it"; cat "$tmp/out"; }
cp "$t/ci/mutants/area/exact.patch" "$tmp/before.patch"
bash "$script" exact >"$tmp/out" 2>&1 || { bad "refresh after added lines failed"; cat "$tmp/out"; }
check --exact && grep -q '^@@ -20,7 +20,7 @@' "$t/ci/mutants/area/exact.patch" &&
  ok "refresh rewrites the @@ line; the patch is exact again" || { bad "not rewritten"; cat "$t/ci/mutants/area/exact.patch"; }
diff <(sed '1,/^diff/d' "$tmp/before.patch" | grep -E '^[-+][^-+]') \
     <(sed '1,/^diff/d' "$t/ci/mutants/area/exact.patch" | grep -E '^[-+][^-+]') >/dev/null &&
  diff <(sed -n '1,3p' "$tmp/before.patch") <(sed -n '1,3p' "$t/ci/mutants/area/exact.patch") >/dev/null &&
  ok "refresh keeps the header and the changed lines" || bad "the header or the changed lines differ"

# The file moved (and lines edited far from the hunk): found by its text.
fresh
write_patch moved 20 "line 20 mutated"
mkdir -p "$t/src/deeper"; mv "$t/src/a.cpp" "$t/src/deeper/b.cpp"
sed -i 's/^line 2$/line two/' "$t/src/deeper/b.cpp"
check; rc=$?
[[ $rc -eq 0 ]] && grep -q 'moved: src/a.cpp -> src/deeper/b.cpp' "$tmp/out" &&
  ok "a moved file is found by its text (--check passes, names old -> new)" || { bad "moved file not found"; cat "$tmp/out"; }
[[ $(mutated_at moved) == src/deeper/b.cpp:20 ]] && [[ $(cat "$tmp/applied") == src/deeper/b.cpp ]] &&
  ok "the defect lands in the moved file, which mutant_apply names" || { bad "landed at '$(mutated_at moved)'"; cat "$tmp/notes"; }
bash "$script" moved >"$tmp/out" 2>&1 && check --exact && grep -q '^+++ b/src/deeper/b.cpp$' "$t/ci/mutants/area/moved.patch" &&
  ok "refresh rewrites the moved path; the patch is exact again" || { bad "path not rewritten"; cat "$tmp/out"; }

# A moved file whose text a document quotes too: the file of the same extension wins.
fresh
write_patch quoted 20 "line 20 mutated"
mkdir -p "$t/docs"; cp "$t/src/a.cpp" "$t/docs/notes.md"; mv "$t/src/a.cpp" "$t/src/b.cpp"
check quoted && grep -q 'moved: src/a.cpp -> src/b.cpp' "$tmp/out" &&
  ok "a moved file is looked for among files of its extension first" || { bad "quoted text taken"; cat "$tmp/out"; }

# The hunk's code moved into another file, the old file still there.
fresh
write_patch split 30 "line 30 mutated"
sed -n '25,40p' "$t/src/a.cpp" >"$t/src/c.cpp"; sed -i '25,40d' "$t/src/a.cpp"
check && grep -q 'moved: src/a.cpp -> src/c.cpp' "$tmp/out" && [[ $(mutated_at split) == src/c.cpp:6 ]] &&
  ok "code moved into another file is found there" || { bad "code move not followed"; cat "$tmp/out" "$tmp/notes"; }

# A hunk whose text occurs twice: refused, whichever place the line numbers name.
fresh
write_patch twice 20 "line 20 mutated"
seq 17 23 | sed 's/^/line /' >>"$t/src/a.cpp"
check twice; rc=$?
[[ $rc -eq 1 ]] && grep -q 'REFUSED   twice' "$tmp/out" &&
  grep -q 'src/a.cpp: hunk 1 (@@ -17,7 +17,7 @@): its text occurs 2 times in src/a.cpp (lines 17, 41)' "$tmp/out" &&
  ok "a hunk whose text occurs twice is refused (patch, file, hunk and lines named)" || { bad "twice accepted"; cat "$tmp/out"; }
mutated_at twice >/dev/null; [[ $? -eq 1 ]] && cmp -s "$t/src/a.cpp" "$tmp/copy/src/a.cpp" &&
  ok "mutant_apply refuses it and changes nothing" || bad "mutant_apply placed an ambiguous hunk"

# A hunk whose text is gone: refused, the closest text and the differing line shown.
fresh
write_patch gone 10 "line 10 mutated"
sed -i 's/^line 12$/line twelve/' "$t/src/a.cpp"
cp "$t/ci/mutants/area/gone.patch" "$tmp/gone.before"
check gone; rc=$?
[[ $rc -eq 1 ]] && grep -q 'src/a.cpp: hunk 1 (@@ -7,7 +7,7 @@): its text is not in src/a.cpp' "$tmp/out" &&
  grep -q 'closest at line 7 (6 of 7 lines the same)' "$tmp/out" && grep -q "line 12: the hunk has 'line 12'" "$tmp/out" &&
  grep -q "the file has 'line twelve'" "$tmp/out" &&
  ok "a hunk whose text is gone is refused, naming the closest place and the differing line" ||
  { bad "gone hunk not reported"; cat "$tmp/out"; }
sed -i 's/^line 10$/line ten/' "$t/src/a.cpp"
check gone; grep -q "the line it changes is nowhere in src/a.cpp: 'line 10'" "$tmp/out" &&
  ok "a changed line that is gone is named" || { bad "gone line not named"; cat "$tmp/out"; }
bash "$script" gone >"$tmp/out" 2>&1; rc=$?
[[ $rc -eq 1 ]] && grep -q 'REFUSED   gone' "$tmp/out" && cmp -s "$tmp/gone.before" "$t/ci/mutants/area/gone.patch" &&
  ok "refresh leaves a refused patch as it is" || { bad "gone rewritten"; cat "$tmp/out"; }

# A moved file whose text is now in two files: refused, both named.
fresh
write_patch copied 20 "line 20 mutated"
mv "$t/src/a.cpp" "$t/src/b.cpp"; cp "$t/src/b.cpp" "$t/src/c.cpp"
check copied; [[ $? -eq 1 ]] && grep -q 'src/a.cpp: its hunks.* text is in several files (src/b.cpp src/c.cpp)' "$tmp/out" &&
  ok "a moved file whose text is in two files is refused, both named" || { bad "copied file accepted"; cat "$tmp/out"; }

# Malformed patches, a patch outside an area folder, a name used twice.
fresh
write_patch headless 20 "line 20 mutated" none
check headless; [[ $? -eq 1 ]] && grep -q 'MALFORMED headless: no pav-mutant header' "$tmp/out" &&
  ok "a patch without a header fails --check" || { bad "headless accepted"; cat "$tmp/out"; }
rm "$t/ci/mutants/area/headless.patch"
write_patch short 20 "line 20 mutated"
sed -i '$d' "$t/ci/mutants/area/short.patch"
check short; [[ $? -eq 1 ]] && grep -q 'MALFORMED short: hunk 1 of src/a.cpp ends before the lines its @@ line counts' "$tmp/out" &&
  ok "a hunk shorter than its @@ line fails --check" || { bad "short hunk accepted"; cat "$tmp/out"; }
rm "$t/ci/mutants/area/short.patch"
write_patch loose 20 "line 20 mutated"
mv "$t/ci/mutants/area/loose.patch" "$t/ci/mutants/loose.patch"
check loose; [[ $? -eq 1 ]] && grep -q 'MALFORMED loose: not in an area folder' "$tmp/out" &&
  ok "a patch outside an area folder fails --check" || { bad "loose patch accepted"; cat "$tmp/out"; }
rm "$t/ci/mutants/loose.patch"
write_patch dup 20 "line 20 mutated"
mkdir -p "$t/ci/mutants/other"; cp "$t/ci/mutants/area/dup.patch" "$t/ci/mutants/other/dup.patch"
check dup; [[ $? -eq 1 ]] && grep -q 'MALFORMED dup: the name is used twice' "$tmp/out" &&
  ok "a name used in two area folders fails --check" || { bad "duplicate name accepted"; cat "$tmp/out"; }
rm "$t/ci/mutants/other/dup.patch"

# Area folders: patches are found by name and listed in name order.
write_patch b-second 30 "line 30 mutated"; mv "$t/ci/mutants/area/b-second.patch" "$t/ci/mutants/other/"
write_patch c-third 10 "line 10 mutated"
[[ $(mutant_patches "$t" | sed "s|^$t/ci/mutants/||" | paste -sd' ') == "other/b-second.patch area/c-third.patch area/dup.patch" ]] &&
  [[ $(mutant_patch "$t" b-second) == "$t/ci/mutants/other/b-second.patch" ]] && ! mutant_patch "$t" nothing >/dev/null &&
  ok "patches in area folders are found by name, listed in name order" ||
  { bad "area folders: $(mutant_patches "$t" | paste -sd' ')"; }
check second && grep -q '1 patch(es), 0 malformed' "$tmp/out" && ok "a PATTERN selects by name across area folders" ||
  { bad "PATTERN across folders"; cat "$tmp/out"; }
exit $status
