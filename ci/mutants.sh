#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Re-injects every defect kept under ci/mutants/ and proves the suite catches it.
#
# Each ci/mutants/AREA/NAME.patch starts with a header, then a git diff:
#   pav-mutant: one line saying what defect the patch injects
#   pav-tests:  a ctest -R regex naming the tests that must go red
#   pav-labels: (optional) a ctest -L regex; default: any label
#   pav-targets: (optional) build targets the tests need; default: all
#   pav-preset: (optional) cpu (default), nvidia or sanitize: mutants of GPU
#               code run only where that preset builds and runs (ci/gpu.sh
#               passes PAV_MUTANT_PRESET=nvidia); a defect only a sanitizer can
#               see (a read past a buffer) runs with PAV_MUTANT_PRESET=sanitize
#
# For each patch: apply it by content to a scratch copy of the tree (each hunk's
# text exactly once in its file, a moved file found by that text: mutant_apply
# in ci/mutant_lib.sh), build, run the named tests; "caught" when they fail,
# "MISSED" when they pass, "BROKEN" when the patch does not apply or the tree
# does not build. Exit 1 if any is missed or broken.
#
# The scratch tree is built once and then rebuilt incrementally, only the targets
# each patch names. Its build folder sits at the same relative place as the main
# build (SCRATCH/src/build/PRESET beside build/PRESET), so with ccache's base_dir
# covering both, the first scratch build is mostly cache hits.
#
# Usage: ci/mutants.sh [PATTERN]   (only patches whose NAME contains PATTERN;
# the name is the file's base name, whatever its area folder)
#
# PAV_MUTANT_SHARD=K/N runs only every Nth selected patch, starting at the Kth
# (1 <= K <= N). A patch of a source builds as one compile and one link, a
# single core, so two shards with their own scratch folders keep both cores
# busy; PAV_JOBS=2 each lets a patch of a header use both when the other shard
# is idle.
#   PAV_JOBS=2 PAV_MUTANT_SHARD=1/2 PAV_MUTANT_DIR=build/mutants-a ci/mutants.sh &
#   PAV_JOBS=2 PAV_MUTANT_SHARD=2/2 PAV_MUTANT_DIR=build/mutants-b ci/mutants.sh
#
# PAV_MUTANT_LIST=FILE judges the patches FILE names (one NAME per line, '#'
# comments and blank lines skipped), in that order, instead of every patch in
# name order: a long run can put its cheap patches first (a patch of a header
# rebuilds every source that includes it), or carry on with what an earlier run
# of the same tree left unjudged. A name without a patch is BROKEN.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
preset=${PAV_MUTANT_PRESET:-cpu}
scratch=${PAV_MUTANT_DIR:-$root/build/mutants-$preset}
filter=${1:-}
jobs=${PAV_JOBS:-$(nproc)}
shard=${PAV_MUTANT_SHARD:-1/1}
if [[ ! $shard =~ ^([0-9]+)/([0-9]+)$ ]] || ((BASH_REMATCH[1] < 1 || BASH_REMATCH[1] > BASH_REMATCH[2])); then
  echo "ci/mutants.sh: PAV_MUTANT_SHARD must be K/N with 1 <= K <= N, got '$shard'" >&2
  exit 2
fi
shard_k=${BASH_REMATCH[1]} shard_n=${BASH_REMATCH[2]}

mkdir -p "$scratch"
src="$scratch/src"
bld="$src/build/$preset"

sync_tree() {
  mkdir -p "$src"
  # Mirror the committed-or-not working tree minus build outputs, rewriting only
  # files whose content differs, so ninja rebuilds only what a patch touched or
  # the tree changed. Files the tree no longer has are removed too (sources are
  # globbed), except the scratch build folder.
  (cd "$root" && git ls-files -co --exclude-standard -z) >"$scratch/files"
  # By content (-c) and without copying mtimes: a file restored after a mutant
  # gets the time of its restoring, newer than the objects built from the
  # mutant, so ninja rebuilds it (rsync -a set the old mtime back, and the next
  # mutant then ran against the previous mutant's stale objects).
  rsync -rlpc --from0 --ignore-missing-args --files-from="$scratch/files" "$root/" "$src/" 2>/dev/null ||
    (cd "$root" && tr '\0' '\n' <"$scratch/files" | while read -r f; do [[ -e "$f" ]] && echo "$f"; done |
       tar cf - -T - | (cd "$src" && tar xf -))
  comm -23 <(cd "$src" && find . -path ./build -prune -o -type f -printf '%P\n' | LC_ALL=C sort) \
           <(tr '\0' '\n' <"$scratch/files" | LC_ALL=C sort) |
    (cd "$src" && while read -r f; do rm -f -- "$f"; done)
}

# shellcheck source=ci/mutant_lib.sh
source "$root/ci/mutant_lib.sh"

# A run stopped while a patch was applied leaves objects built from the mutant
# newer than the restored files: make those files newer again so they rebuild.
if [[ -f "$scratch/applied" ]]; then
  sync_tree
  while read -r f; do [[ -e "$src/$f" ]] && touch "$src/$f"; done <"$scratch/applied"
  rm -f "$scratch/applied"
fi

declare -a results=()
status=0
# Each verdict is printed as it is reached (a run stopped part way keeps what it
# judged) and summarised again at the end.
verdict() {
  results+=("$1")
  echo "   $1"
  [[ $1 == caught* ]] || status=1
}
count=0
selected=0
if [[ -n ${PAV_MUTANT_LIST:-} ]]; then
  [[ -r $PAV_MUTANT_LIST ]] || { echo "ci/mutants.sh: PAV_MUTANT_LIST: cannot read '$PAV_MUTANT_LIST'" >&2; exit 2; }
  patches=()
  while read -r name; do
    patches+=("$(mutant_patch "$root" "$name" || echo "$name")")
  done < <(sed 's/#.*//; s/[[:space:]]*$//; s/^[[:space:]]*//; /^$/d' "$PAV_MUTANT_LIST")
else
  mapfile -t patches < <(mutant_patches "$root")
fi
for patch in "${patches[@]}"; do
  if [[ ! -e "$patch" ]]; then
    count=$((count + 1))
    verdict "BROKEN  $patch (no such patch in ci/mutants/)"
    continue
  fi
  name=$(basename "$patch" .patch)
  [[ -n "$filter" && "$name" != *"$filter"* ]] && continue
  ppreset=$(header "$patch" pav-preset); ppreset=${ppreset:-cpu}
  [[ "$ppreset" != "$preset" ]] && continue
  selected=$((selected + 1))
  (((selected - 1) % shard_n == shard_k - 1)) || continue
  tests=$(header "$patch" pav-tests)
  labels=$(header "$patch" pav-labels)
  what=$(header "$patch" pav-mutant)
  targets=$(header "$patch" pav-targets)
  count=$((count + 1))
  echo "== mutant $name: $what"
  sync_tree
  # The files it changes (moved ones where they are now), noted before they
  # change, then changed.
  started=$SECONDS
  if ! touched=$(mutant_apply --dry-run "$patch" "$src" 2>"$scratch/$name.apply.log"); then
    sed 's/^/     /' "$scratch/$name.apply.log"
    verdict "BROKEN  $name (does not apply: ci/mutants-refresh.sh --check $name)"
    continue
  fi
  sed 's/^/   /' "$scratch/$name.apply.log"
  printf '%s\n' "$touched" >"$scratch/applied"
  if ! mutant_apply "$patch" "$src" >/dev/null 2>"$scratch/$name.apply.log"; then
    verdict "BROKEN  $name (does not apply: $scratch/$name.apply.log)"
    sync_tree; for f in $touched; do touch "$src/$f"; done
    continue
  fi
  for f in $touched; do
    if cmp -s "$src/$f" "$root/$f"; then
      verdict "BROKEN  $name (patch left $f unchanged)"; continue 2
    fi
  done
  if [[ ! -f "$bld/build.ninja" ]]; then
    cmake -S "$src" -B "$bld" -G Ninja --preset "$preset" >/dev/null 2>&1 ||
      cmake -S "$src" -B "$bld" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        $([[ $preset == nvidia ]] && echo -DPAV_GPU_NVIDIA=ON) >/dev/null
  fi
  if ! cmake --build "$bld" -j "$jobs" ${targets:+--target $targets} >"$scratch/$name.build.log" 2>&1; then
    verdict "BROKEN  $name (build failed: $scratch/$name.build.log)"
    sync_tree; for f in $touched; do touch "$src/$f"; done
    continue
  fi
  args=(--test-dir "$bld" -R "$tests" --timeout 600 -j "$jobs" --no-tests=error)
  [[ -n "$labels" ]] && args+=(-L "$labels")
  ctest "${args[@]}" >"$scratch/$name.test.log" 2>&1
  test_rc=$?
  # Restore the touched files and make them newer than the objects built from
  # the mutant, so the next build recompiles them.
  sync_tree
  for f in $touched; do touch "$src/$f"; done
  if [[ $test_rc -eq 0 ]]; then
    verdict "MISSED  $name: $what ($((SECONDS - started)) s)"
  else
    # ctest's closing list names every failed test, whatever killed it
    # (Failed, SEGFAULT, NUMERICAL, Subprocess aborted, Timeout, ...).
    failed=$(sed -n '/^The following tests FAILED:/,$p' "$scratch/$name.test.log" | grep -cE '^[[:space:]]+[0-9]+ - ')
    if grep -q "No tests were found" "$scratch/$name.test.log"; then
      verdict "BROKEN  $name (no test matches '$tests')"
    else
      verdict "caught  $name ($failed failing test(s), $((SECONDS - started)) s)"
    fi
  fi
done
# Leave the scratch tree clean for the next run.
sync_tree
rm -f "$scratch/applied"
echo
echo "mutants ($preset preset$([[ $shard_n -gt 1 ]] && echo ", shard $shard of $selected selected")): $count run"
for r in "${results[@]}"; do echo "  $r"; done
caught=$(printf '%s\n' "${results[@]}" | grep -c '^caught' || true)
echo "$caught caught, $((count - caught)) not caught"
exit $status
