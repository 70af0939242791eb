#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Keeps the kept mutants, ci/mutants/AREA/NAME.patch, applying to the current tree.
#
# A kept mutant is applied by content (ci/mutant_lib.sh, mutant_apply): each
# hunk's text (context and removed lines) must occur exactly once in its file,
# whatever line the @@ line names, and a file that moved is found by that text.
# So code that moves, or lines added above a hunk, leave the mutant valid; only
# an edit of the hunk's own lines needs a person, and the refusal names the
# hunk, the closest text and the lines that differ. Never a fuzzy guess: a hunk
# whose text is gone or occurs twice is refused.
#
# Usage:
#   ci/mutants-refresh.sh --check [--exact] [PATTERN]
#       Change nothing; exit 1 when any patch (NAME containing PATTERN) is
#       malformed (no pav-mutant or pav-tests header, no diff, a name used
#       twice, not in an area folder) or does not apply by content. Patches that
#       apply by content but not as written (a moved file, other line numbers)
#       are listed; with --exact they fail too. Takes seconds; .ci/run runs it.
#   ci/mutants-refresh.sh [--verify] [PATTERN]
#       Rewrite every patch that applies by content but not as written, so it
#       applies exactly again (for git apply and for readers): apply it to a
#       scratch copy of the files it changes, re-diff them with git (the new
#       paths, line numbers and function names), keep the header. A refused
#       patch is left as it is. --verify then runs ci/mutants.sh on each.
#
# Exit: 0 all good (or all inexact patches rewritten), 1 a patch is malformed
# or refused (or inexact, with --check --exact), 2 bad usage.
# PAV_MUTANTS_ROOT: the tree to work on (default: this repository; tests point
# it at a scratch tree).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=${PAV_MUTANTS_ROOT:-$(cd "$here/.." && pwd)}
mode=refresh
verify=0
exact=0
filter=""
for arg in "$@"; do
  case "$arg" in
    --check) mode=check ;;
    --exact) exact=1 ;;
    --verify) verify=1 ;;
    -h|--help) sed -n '2,/^$/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    -*) echo "mutants-refresh: unknown option '$arg' (try --help)" >&2; exit 2 ;;
    *) [[ -n "$filter" ]] && { echo "mutants-refresh: one PATTERN at most" >&2; exit 2; }
       filter=$arg ;;
  esac
done
# shellcheck source=ci/mutant_lib.sh
source "$here/mutant_lib.sh"


# The added and removed lines of a diff body, in order (context and headers dropped).
changed_lines() { sed '1,/^diff --git /d' "$1" | grep -E '^[-+]' | grep -vE '^(\+\+\+|---) '; }

# Rewrites the patch from a scratch copy of the files it changes.
regenerate() {
  local patch=$1 tmp f body
  local -a files
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  mapfile -t files < <(mutant_apply --dry-run "$patch" "$root" 2>/dev/null)
  for f in "${files[@]}"; do
    mkdir -p "$tmp/a/$(dirname "$f")" "$tmp/b/$(dirname "$f")"
    cp "$root/$f" "$tmp/a/$f"
    cp "$root/$f" "$tmp/b/$f"
  done
  mutant_apply "$patch" "$root" "$tmp/b" >/dev/null 2>&1 || { echo "    does not apply"; return 1; }
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
    echo "    warning: the rewritten diff changes different lines than the old one; review it:"
    diff <(changed_lines "$patch") <(changed_lines "$tmp/new.patch") | sed 's/^/      /'
  fi
  if ! mutant_apply --dry-run --exact "$tmp/new.patch" "$root" >/dev/null 2>&1; then
    echo "    the rewritten patch does not apply exactly either: fix it by hand"
    return 1
  fi
  cp "$tmp/new.patch" "$patch"
}

count=0
bad=0
inexact=0
declare -a refreshed=()
declare -A where=()
while read -r patch; do
  name=${patch##*/}; name=${name%.patch}
  if [[ -n ${where[$name]:-} ]]; then
    echo "MALFORMED $name: the name is used twice (${where[$name]#"$root/"}, ${patch#"$root/"})"
    bad=$((bad + 1))
    continue
  fi
  where[$name]=$patch
  [[ -n "$filter" && "$name" != *"$filter"* ]] && continue
  count=$((count + 1))
  # The headers and the diff are mutant_apply's to judge; the place is this one's.
  area=${patch%/*}
  if [[ ${area%/*} != "$root/ci/mutants" ]]; then
    echo "MALFORMED $name: not in an area folder (ci/mutants/AREA/NAME.patch)"
    bad=$((bad + 1))
    continue
  fi
  report=$(mutant_apply --dry-run --exact "$patch" "$root" 2>&1 >/dev/null)
  rc=$?
  ((rc == 0)) && continue
  if ((rc == 2)); then
    echo "MALFORMED $name: ${report#"$name: malformed: "}"
    bad=$((bad + 1))
    continue
  fi
  if ((rc == 1)); then
    echo "REFUSED   $name (fix the hunk by hand):"
    sed "s/^$name: /    /" <<<"$report"
    bad=$((bad + 1))
    continue
  fi
  # Applies by content, not as written.
  inexact=$((inexact + 1))
  if [[ $mode == check ]]; then
    echo "INEXACT   $name (applies by content; ci/mutants-refresh.sh $name rewrites it):"
    sed "s/^$name: /    /" <<<"$report"
    continue
  fi
  echo "refresh   $name:"
  sed "s/^$name: /    /" <<<"$report"
  if regenerate "$patch"; then
    echo "    rewritten"
    refreshed+=("$name")
  else
    echo "REFUSED   $name"
    bad=$((bad + 1))
  fi
done < <(mutant_patches "$root")

if [[ $mode == check ]]; then
  echo "mutants-refresh --check: $count patch(es), $bad malformed or refused, $inexact applying by content only"
  [[ $bad -eq 0 && ($exact -eq 0 || $inexact -eq 0) ]] || exit 1
  exit 0
fi
echo "mutants-refresh: $count patch(es) looked at, ${#refreshed[@]} rewritten, $bad refused or malformed"
if [[ $verify -eq 1 ]]; then
  for name in "${refreshed[@]}"; do
    preset=$(header "${where[$name]}" pav-preset)
    if [[ "${preset:-cpu}" != cpu ]]; then
      echo "verify: $name is a ${preset} mutant; run it where that preset builds (ci/gpu.sh)"
      continue
    fi
    bash "$here/mutants.sh" "$name" || bad=$((bad + 1))
  done
elif ((${#refreshed[@]} > 0)); then
  echo "check each is still caught: ci/mutants.sh NAME (or rerun with --verify)"
fi
[[ $bad -eq 0 ]]
