#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Keeps ci/mutants/*.patch applying exactly to the current tree.
#
# A kept mutant is only worth something while it injects its defect where it was
# written. patch(1) would still apply a drifted patch with an offset or fuzz, and a
# fuzzed hunk can land on the wrong line; so CI insists on exact application, and
# this script regenerates patches whose context moved.
#
# Usage:
#   ci/mutants-refresh.sh [--verify] [PATTERN]
#       Regenerate every patch (file name containing PATTERN) that applies only with
#       an offset or fuzz: apply it to a scratch copy of the files it touches (offset
#       and fuzz allowed there), re-diff those files with git, keep the header. A
#       patch with a hunk that does not apply at all is refused and left as it is.
#       --verify then runs ci/mutants.sh on each regenerated patch (caught again?).
#   ci/mutants-refresh.sh --check [PATTERN]
#       Change nothing; exit 1 when any patch is malformed (no pav-mutant or
#       pav-tests header, no diff) or does not apply exactly (no offset, no fuzz).
#       Takes seconds; .ci/run runs it.
#
# Exit: 0 all good (or all drifted patches regenerated), 1 a patch is malformed,
# refused or does not apply exactly (--check), 2 bad usage.
# PAV_MUTANTS_ROOT: the tree to work on (default: this repository; tests point
# it at a scratch tree).
set -uo pipefail
root=${PAV_MUTANTS_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
mode=refresh
verify=0
filter=""
for arg in "$@"; do
  case "$arg" in
    --check) mode=check ;;
    --verify) verify=1 ;;
    -h|--help) sed -n '2,/^$/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    -*) echo "mutants-refresh: unknown option '$arg' (try --help)" >&2; exit 2 ;;
    *) [[ -n "$filter" ]] && { echo "mutants-refresh: one PATTERN at most" >&2; exit 2; }
       filter=$arg ;;
  esac
done

header_value() { sed -n "s/^$2:[[:space:]]*//p" "$1" | head -1; }
touched_files() { sed -n 's|^+++ b/||p' "$1"; }

# Prints why the patch is malformed, or nothing.
malformed() {
  local patch=$1 f
  [[ -n $(header_value "$patch" pav-mutant) ]] || { echo "no pav-mutant header"; return; }
  [[ -n $(header_value "$patch" pav-tests) ]] || { echo "no pav-tests header"; return; }
  grep -q '^diff --git ' "$patch" || { echo "no 'diff --git' section"; return; }
  grep -q '^@@ ' "$patch" || { echo "no hunk"; return; }
  for f in $(touched_files "$patch"); do
    [[ -f "$root/$f" ]] || { echo "touches $f, which does not exist"; return; }
  done
}

# Dry run against the tree; prints patch(1)'s complaints (offsets, fuzz, failures)
# and returns 0 only when every hunk applies exactly where the patch says.
applies_exactly() {
  local out rc
  out=$(cd "$root" && patch -p1 --dry-run --batch --forward --fuzz=0 <"$1" 2>&1)
  rc=$?
  out=$(grep -v '^checking file ' <<<"$out")
  [[ -n "$out" ]] && printf '%s\n' "$out" | sed 's/^/    /'
  [[ $rc -eq 0 && -z "$out" ]]
}

# The added and removed lines of a diff body, in order (context and headers dropped).
changed_lines() { grep -E '^[-+]' "$1" | grep -vE '^(\+\+\+|---)( |$)'; }

# Rewrites the patch from a scratch copy of the files it touches.
regenerate() {
  local patch=$1 tmp f body
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  for f in $(touched_files "$patch"); do
    mkdir -p "$tmp/a/$(dirname "$f")" "$tmp/b/$(dirname "$f")"
    cp "$root/$f" "$tmp/a/$f"
    cp "$root/$f" "$tmp/b/$f"
  done
  if ! (cd "$tmp/b" && patch -p1 --batch --forward --no-backup-if-mismatch -r - <"$patch" >"$tmp/log" 2>&1); then
    sed 's/^/    /' "$tmp/log"
    echo "    a hunk does not apply even with fuzz: fix it by hand"
    return 1
  fi
  # git's own diff (function names on @@ lines, 3 lines of context) without the
  # index lines, whatever the user's git configuration says.
  body=$(cd "$tmp" && git -c core.quotepath=off -c diff.noprefix=false -c diff.mnemonicprefix=false \
           diff --no-index --no-color --no-ext-diff --no-prefix --diff-algorithm=myers a b |
         grep -vE '^index [0-9a-f]+\.\.[0-9a-f]+')
  if [[ -z "$body" ]]; then
    echo "    the patch changes nothing once applied: fix it by hand"
    return 1
  fi
  # git diff --no-index names files a/PATH and b/PATH already (the scratch folders).
  {
    sed -n '/^diff --git /q;p' "$patch"
    printf '%s\n' "$body"
  } >"$tmp/new.patch"
  if ! diff -q <(changed_lines "$patch") <(changed_lines "$tmp/new.patch") >/dev/null; then
    echo "    warning: the regenerated diff changes different lines than the old one; review it:"
    diff <(changed_lines "$patch") <(changed_lines "$tmp/new.patch") | sed 's/^/      /'
  fi
  if ! (cd "$root" && patch -p1 --dry-run --batch --forward --fuzz=0 <"$tmp/new.patch" >/dev/null 2>&1); then
    echo "    the regenerated patch does not apply exactly either: fix it by hand"
    return 1
  fi
  cp "$tmp/new.patch" "$patch"
}

count=0
bad=0
declare -a refreshed=()
for patch in "$root"/ci/mutants/*.patch; do
  [[ -e "$patch" ]] || continue
  name=$(basename "$patch" .patch)
  [[ -n "$filter" && "$name" != *"$filter"* ]] && continue
  count=$((count + 1))
  why=$(malformed "$patch")
  if [[ -n "$why" ]]; then
    echo "MALFORMED $name: $why"
    bad=$((bad + 1))
    continue
  fi
  if report=$(applies_exactly "$patch"); then
    continue
  fi
  if [[ $mode == check ]]; then
    echo "DRIFTED   $name (run ci/mutants-refresh.sh $name):"
    printf '%s\n' "$report"
    bad=$((bad + 1))
    continue
  fi
  echo "refresh   $name:"
  printf '%s\n' "$report"
  if regenerate "$patch"; then
    echo "    regenerated"
    refreshed+=("$name")
  else
    echo "REFUSED   $name"
    bad=$((bad + 1))
  fi
done

if [[ $mode == check ]]; then
  echo "mutants-refresh --check: $count patch(es), $bad malformed or not applying exactly"
  [[ $bad -eq 0 ]] || exit 1
  exit 0
fi
echo "mutants-refresh: $count patch(es) looked at, ${#refreshed[@]} regenerated, $bad refused or malformed"
if [[ $verify -eq 1 ]]; then
  for name in "${refreshed[@]}"; do
    preset=$(header_value "$root/ci/mutants/$name.patch" pav-preset)
    if [[ "${preset:-cpu}" != cpu ]]; then
      echo "verify: $name is a ${preset} mutant; run it where that preset builds (ci/gpu.sh)"
      continue
    fi
    bash "$(dirname "$0")/mutants.sh" "$name" || bad=$((bad + 1))
  done
elif ((${#refreshed[@]} > 0)); then
  echo "check each is still caught: ci/mutants.sh NAME (or rerun with --verify)"
fi
[[ $bad -eq 0 ]]
