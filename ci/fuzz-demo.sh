#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Demonstration that pav fuzz finds, shrinks, saves and replays a defect:
#   1. apply an injected defect (a ci/mutants patch) to a scratch copy of the
#      tree and build pav there;
#   2. pav fuzz --property decode --cases 500 must exit 1 and save one file;
#   3. pav replay of that file must fail with the defect present;
#   4. rebuild without the defect: pav replay of the same file must pass.
# Exit 0 when all four hold, 1 otherwise, 2 when the tree cannot be built.
#
# Usage: ci/fuzz-demo.sh [MUTANT]   (a kept mutant's NAME or a patch file; a
#   path under ci/mutants/ that is not there is looked up by its name, whatever
#   its area folder; default decode-causality-off-by-one)
# Environment: PAV_FUZZ_DEMO_DIR (scratch, default build/fuzz-demo),
#   PAV_FUZZ_DEMO_SEED (default 1), PAV_FUZZ_DEMO_PROPERTY (default decode),
#   PAV_JOBS (build and fuzz jobs, default nproc).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=ci/mutant_lib.sh
source "$root/ci/mutant_lib.sh"
patch=${1:-decode-causality-off-by-one}
if [[ ! -f $patch ]]; then
  name=${patch##*/}
  patch=$(mutant_patch "$root" "${name%.patch}") || { echo "fuzz-demo: no patch or kept mutant ${1:-}"; exit 2; }
fi
scratch=${PAV_FUZZ_DEMO_DIR:-$root/build/fuzz-demo}
seed=${PAV_FUZZ_DEMO_SEED:-1}
property=${PAV_FUZZ_DEMO_PROPERTY:-decode}
jobs=${PAV_JOBS:-$(nproc)}
src="$scratch/src"
bld="$scratch/build"
out="$scratch/counterexamples"

sync_tree() {
  mkdir -p "$src"
  # The working tree, committed or not, minus build outputs; mtimes kept so
  # ninja rebuilds only what the patch touches.
  (cd "$root" && git ls-files -co --exclude-standard -z) |
    rsync -a --delete-after --from0 --files-from=- "$root/" "$src/" 2>/dev/null ||
    (cd "$root" && git ls-files -co --exclude-standard | tar cf - -T - | (cd "$src" && tar xf -))
}

build_pav() {
  if [[ ! -f "$bld/build.ninja" ]]; then
    cmake -S "$src" -B "$bld" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPAV_BUILD_TESTS=OFF \
      -DPAV_BUILD_BENCH=OFF >"$scratch/configure.log" 2>&1 || { cat "$scratch/configure.log"; return 1; }
  fi
  cmake --build "$bld" --target pav -j "$jobs" >"$scratch/build.log" 2>&1 || { tail -40 "$scratch/build.log"; return 1; }
}

status=0
check() {  # check DESCRIPTION CONDITION...
  local what=$1; shift
  if "$@"; then echo "  ok    $what"; else echo "  FAIL  $what"; status=1; fi
}

mkdir -p "$scratch"
echo "== fuzz-demo: $(sed -n 's/^pav-mutant:[[:space:]]*//p' "$patch" | head -1)"
echo "   patch $patch"
sync_tree
# By content: each hunk's text exactly once in its file (ci/mutant_lib.sh).
changed=$(mutant_apply "$patch" "$src") || { echo "fuzz-demo: the patch does not apply"; exit 2; }
while read -r f; do
  cmp -s "$src/$f" "$root/$f" && { echo "fuzz-demo: the patch did not take ($f unchanged)"; exit 2; }
done <<<"$changed"
echo "   applied to the scratch tree"
echo "== building pav with the defect ($bld)"
build_pav || { echo "fuzz-demo: build with the defect failed"; exit 2; }
cp "$bld/pav" "$scratch/pav-defect"

rm -rf "$out"
echo "== pav fuzz --property $property --cases 500 --seed $seed --jobs $jobs --save $out"
"$scratch/pav-defect" fuzz --property "$property" --cases 500 --seed "$seed" --jobs "$jobs" --save "$out" --quiet
fuzz_rc=$?
mapfile -t files < <(find "$out" -name '*.json' 2>/dev/null | sort)
check "pav fuzz exited 1 (exit $fuzz_rc)" test "$fuzz_rc" -eq 1
check "one counterexample file saved (${#files[@]})" test "${#files[@]}" -eq 1
file=${files[0]:-$out/missing.json}
echo "   saved: $file"

echo "== pav replay with the defect"
"$scratch/pav-defect" replay --backend cpu "$file"
replay_defect=$?
check "pav replay fails with the defect (exit $replay_defect)" test "$replay_defect" -eq 1
"$scratch/pav-defect" fuzz --backend cpu --replay "$file"
check "pav fuzz --replay fails with the defect" test $? -eq 1

echo "== building pav without the defect"
sync_tree  # restores the patched files, with their old mtimes:
# ninja rebuilds only inputs newer than their outputs, so mark them changed.
while read -r f; do touch "$src/$f"; done <<<"$changed"
build_pav || { echo "fuzz-demo: build without the defect failed"; exit 2; }
cp "$bld/pav" "$scratch/pav-clean"
echo "== pav replay without the defect"
"$scratch/pav-clean" replay --backend cpu "$file"
replay_clean=$?
check "pav replay passes without the defect (exit $replay_clean)" test "$replay_clean" -eq 0
"$scratch/pav-clean" fuzz --backend cpu --replay "$file"
check "pav fuzz --replay passes without the defect" test $? -eq 0

echo
if ((status == 0)); then
  echo "fuzz-demo: PASS: found, shrunk, saved as $file; replay fails with the defect, passes without"
else
  echo "fuzz-demo: FAIL"
fi
exit $status
