#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks ci/gen-docs.sh itself on scratch pages: a stale block fails --check
# (exit 1, naming the page and the command that regenerates it), a rewrite
# makes it pass and leaves hand-written text alone, a fenced block is fenced,
# and malformed markers, a missing end marker, a non-pav command and a failing
# command are refused (exit 2 or 3) without touching the page.
# Usage: ci/gen-docs-test.sh PAV_BINARY
set -uo pipefail
pav=${1:?usage: ci/gen-docs-test.sh PAV_BINARY}
gen="$(cd "$(dirname "$0")" && pwd)/gen-docs.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

expect_rc() {  # expected_rc description command...
  local want=$1 what=$2; shift 2
  "$@" >"$dir/out" 2>"$dir/err"
  local rc=$?
  [[ $rc -eq $want ]] || { fail "$what: exit $rc, expected $want"; cat "$dir/out" "$dir/err"; }
}

# A stale table and a stale fenced block around hand-written text.
cat >"$dir/page.md" <<'EOF'
# A page

Hand-written text before.

<!-- generated: pav gate --clauses --markdown -->
| id | clause | stale |
<!-- end generated -->

Hand-written text between.

<!-- generated text: pav plan --help -->
old help
<!-- end generated -->

Hand-written text after.
EOF
cp "$dir/page.md" "$dir/before.md"
expect_rc 1 "--check on a stale page" bash "$gen" --check --pav "$pav" "$dir/page.md"
grep -q "page.md" "$dir/err" || fail "--check does not name the stale page"
grep -q "bash ci/gen-docs.sh" "$dir/err" || fail "--check does not say how to regenerate"
cmp -s "$dir/page.md" "$dir/before.md" || fail "--check modified the page"

expect_rc 0 "rewrite" bash "$gen" --pav "$pav" "$dir/page.md"
expect_rc 0 "--check after the rewrite" bash "$gen" --check --pav "$pav" "$dir/page.md"
for line in "Hand-written text before." "Hand-written text between." "Hand-written text after."; do
  grep -qxF "$line" "$dir/page.md" || fail "rewrite lost '$line'"
done
grep -qF '| 1 | `alibi` |' "$dir/page.md" || fail "the clause table was not generated"
grep -qF 'old help' "$dir/page.md" && fail "the stale help text survived"
# The help block is fenced: the line after its marker opens a text fence.
awk '/generated text: pav plan --help/ {getline; print; exit}' "$dir/page.md" | grep -qx '```text' ||
  fail "the help block is not fenced as text"
grep -qF -- '--lengths' "$dir/page.md" || fail "the plan help was not generated"

# Refusals: the page must stay as it was.
bad_page() {  # rc description marker_block
  printf '# P\n\n%s\n' "$3" >"$dir/bad.md"
  cp "$dir/bad.md" "$dir/bad.before"
  expect_rc "$1" "$2" bash "$gen" --pav "$pav" "$dir/bad.md"
  cmp -s "$dir/bad.md" "$dir/bad.before" || fail "$2: the page was modified"
}
bad_page 2 "a malformed marker" $'<!-- generated pav plan --help -->\nx\n<!-- end generated -->'
bad_page 2 "a command other than pav" $'<!-- generated: rm -rf / -->\nx\n<!-- end generated -->'
bad_page 2 "a block without an end marker" $'<!-- generated: pav gate --clauses --markdown -->\nx'
bad_page 3 "a command that fails" $'<!-- generated: pav no-such-command -->\nx\n<!-- end generated -->'
expect_rc 3 "no pav binary" bash "$gen" --check --pav "$dir/missing-pav" "$dir/page.md"
expect_rc 2 "an unknown option" bash "$gen" --frobnicate

if ((failures)); then
  echo "gen-docs-test: $failures failure(s)"
  exit 1
fi
echo "gen-docs-test: all checks passed"
