#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Regenerates the parts of docs/*.md whose source is the code: the gate clause
# table, the settings table and every command's options. A generated block is
#
#   <!-- generated: pav gate --clauses --markdown -->
#   ...output of that command...
#   <!-- end generated -->
#
# and a block whose marker says "generated text:" is fenced as ```text. Only
# `pav` commands may appear in a marker; they run with the built binary.
#
# Usage: ci/gen-docs.sh [--check] [--pav PATH] [FILE.md ...]
#   --check     write nothing; exit 1 naming each file whose blocks differ
#   --pav PATH  the pav binary (default build/cpu/pav)
#   FILE.md     the pages to process (default docs/*.md)
# Exit codes: 0 up to date (or rewritten), 1 out of date (--check),
#             2 bad usage or a malformed block, 3 no pav binary or a command failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pav="$root/build/cpu/pav"
check=0
files=()
while (($#)); do
  case "$1" in
    --check) check=1 ;;
    --pav) pav=${2:?--pav needs a path}; shift ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gen-docs: unknown option $1" >&2; exit 2 ;;
    *) files+=("$1") ;;
  esac
  shift
done
((${#files[@]})) || files=("$root"/docs/*.md)
[[ -x "$pav" ]] || { echo "gen-docs: no pav binary at $pav (build it: cmake --build build/cpu --target pav)" >&2; exit 3; }

# The pages must not depend on who generates them: pav's own environment
# variables (which change defaults and routing) are cleared first.
while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^(PAV_|RC_PARAMS$)')

begin_re='^<!-- generated( text)?: (pav( [^>]*[^ >])?) -->$'
end_line='<!-- end generated -->'

# Writes FILE with every generated block refreshed to stdout; exit 2 or 3 on error.
render() {
  local file=$1 line in_block=0 n=0 cmd fence out
  while IFS= read -r line || [[ -n "$line" ]]; do
    n=$((n + 1))
    if ((in_block)); then
      if [[ "$line" == "$end_line" ]]; then in_block=0; printf '%s\n' "$line"; fi
      continue
    fi
    printf '%s\n' "$line"
    [[ "$line" == '<!-- generated'* ]] || continue
    if [[ ! "$line" =~ $begin_re ]]; then
      echo "gen-docs: $file:$n: malformed marker (expected '<!-- generated: pav ARGS -->')" >&2
      return 2
    fi
    fence=${BASH_REMATCH[1]}
    cmd=${BASH_REMATCH[2]}
    # Word-split the arguments as written (no quotes or globbing in markers).
    local -a argv
    read -r -a argv <<< "${cmd#pav}"
    if ! out=$(cd "$root" && "$pav" "${argv[@]}" 2>&1); then
      echo "gen-docs: $file:$n: '$cmd' failed:" >&2
      printf '%s\n' "$out" >&2
      return 3
    fi
    [[ -n "$fence" ]] && printf '```text\n'
    printf '%s\n' "$out"
    [[ -n "$fence" ]] && printf '```\n'
    in_block=1
  done < "$file"
  if ((in_block)); then
    echo "gen-docs: $file: a generated block has no '$end_line'" >&2
    return 2
  fi
}

stale=()
for f in "${files[@]}"; do
  [[ -f "$f" ]] || { echo "gen-docs: $f: no such file" >&2; exit 2; }
  grep -q '^<!-- generated' "$f" || continue
  tmp=$(mktemp)
  render "$f" > "$tmp"
  rc=$?
  if ((rc)); then rm -f "$tmp"; exit "$rc"; fi
  if cmp -s "$tmp" "$f"; then rm -f "$tmp"; continue; fi
  rel=${f#"$root"/}
  if ((check)); then
    stale+=("$rel")
    diff -u "$f" "$tmp" | head -40 >&2
    rm -f "$tmp"
  else
    cat "$tmp" > "$f" && rm -f "$tmp"
    echo "gen-docs: rewrote $rel"
  fi
done
if ((${#stale[@]})); then
  echo "gen-docs: out of date with the code: ${stale[*]}" >&2
  echo "gen-docs: regenerate with: cmake --build build/cpu --target pav && bash ci/gen-docs.sh" >&2
  exit 1
fi
exit 0
