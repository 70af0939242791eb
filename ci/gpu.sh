#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The GPU runner gate. On a machine with NVIDIA GPUs:
#   1. configure and build the nvidia preset (skipped with --no-build),
#   2. run every test labelled gpu through CTest, one GPU per test, spread over
#      all GPUs (a CTest resource spec generated from nvidia-smi),
#   3. run GpuSanitize.* under compute-sanitizer memcheck and racecheck,
#   4. with --mutants: re-inject every gpu-* mutant (ci/mutants/gpu/) and prove the GPU
#      suite goes red (ci/mutants.sh with PAV_MUTANT_PRESET=nvidia), or with
#      --run-mutants DIR run mutant test binaries built elsewhere
#      (--build-mutants DIR builds them: one gpu_test per patch).
# Exits non-zero on any failure. Logs go to --logs DIR (default build dir).
#
#   ci/gpu.sh                                  build + gate
#   ci/gpu.sh --no-build --build-dir B         gate over a build made elsewhere
#                                              (e.g. carried to a device machine)
#   ci/gpu.sh --build-mutants DIR              (no GPU needed) mutant binaries
#   ci/gpu.sh --no-build --build-dir B --run-mutants DIR
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build/nvidia
do_build=1
sanitize=1
mutants=0
run_mutants=""
build_mutants=""
logs=""
jobs=""

while [[ $# -gt 0 ]]; do
  case $1 in
    --build-dir) build=$(cd "$2" 2>/dev/null && pwd || echo "$2"); shift 2 ;;
    --no-build) do_build=0; shift ;;
    --no-sanitizer) sanitize=0; shift ;;
    --mutants) mutants=1; shift ;;
    --run-mutants) run_mutants=$2; shift 2 ;;
    --build-mutants) build_mutants=$2; shift 2 ;;
    --logs) logs=$2; shift 2 ;;
    -j|--jobs) jobs=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "ci/gpu.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
logs=${logs:-$build/gpu-gate}
mkdir -p "$logs"

# shellcheck source=ci/mutant_lib.sh
source "$root/ci/mutant_lib.sh"
# A ctest -R regex of suite names (A|B.C) as a gtest filter (A*:B.C*).
gtest_filter_of() { echo "$1" | tr '|' '\n' | sed 's/[\\^$]//g; s/$/*/' | paste -sd: -; }

# ---- mutant binaries, built here (no GPU needed) -------------------------------------
if [[ -n "$build_mutants" ]]; then
  mkdir -p "$build_mutants"
  out=$(cd "$build_mutants" && pwd)
  scratch=$root/build/gpu-mutants
  src=$scratch/src
  bld=$scratch/build
  mkdir -p "$src"
  sync_tree() {
    (cd "$root" && git ls-files -co --exclude-standard -z) |
      rsync -a --delete-after --from0 --files-from=- "$root/" "$src/"
  }
  # The GPU mutants (NAME gpu-*, nvidia preset) and the files they change.
  gpu_patches=()
  while read -r patch; do
    [[ ${patch##*/} == gpu-* && $(header "$patch" pav-preset) == nvidia ]] && gpu_patches+=("$patch")
  done < <(mutant_patches "$root")
  patched=$(for patch in "${gpu_patches[@]}"; do mutant_apply --dry-run "$patch" "$root" 2>/dev/null; done | sort -u)
  # rsync -a restores old mtimes: touch what any patch changes so ninja
  # rebuilds it after every restore.
  touch_patched() {
    while read -r f; do [[ -n $f && -e $src/$f ]] && touch "$src/$f"; done <<<"$patched"
  }
  sync_tree
  if [[ ! -f $bld/build.ninja ]]; then
    cmake -S "$src" -B "$bld" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPAV_GPU_NVIDIA=ON \
      -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DCMAKE_CUDA_ARCHITECTURES=90 >"$out/configure.log" 2>&1 ||
      { echo "mutant build: configure failed ($out/configure.log)"; exit 1; }
  fi
  status=0
  for patch in "${gpu_patches[@]}"; do
    name=$(basename "$patch" .patch)
    sync_tree
    touch_patched
    # By content (ci/mutant_lib.sh): each hunk's text exactly once in its file.
    if ! mutant_apply "$patch" "$src" >/dev/null; then
      echo "BROKEN  $name (patch does not apply)"; status=1; continue
    fi
    mkdir -p "$out/$name"
    if ninja -C "$bld" gpu_test >"$out/$name/build.log" 2>&1; then
      # Debug info stripped: the binaries travel to the GPU machine.
      objcopy --strip-debug "$bld/kernels/hip/tests/gpu_test" "$out/$name/gpu_test" 2>/dev/null ||
        cp "$bld/kernels/hip/tests/gpu_test" "$out/$name/gpu_test"
      gtest_filter_of "$(header "$patch" pav-tests)" >"$out/$name/filter"
      header "$patch" pav-mutant >"$out/$name/what"
      echo "built   $name"
    else
      echo "BROKEN  $name (build failed: $out/$name/build.log)"; status=1
    fi
  done
  sync_tree  # leave the scratch tree unpatched
  touch_patched
  exit $status
fi

# ---- the build ---------------------------------------------------------------------
if [[ $do_build == 1 ]]; then
  echo "== configure + build (nvidia preset) in $build"
  if [[ $build == "$root/build/nvidia" ]]; then
    (cd "$root" && cmake --preset nvidia && cmake --build --preset nvidia ${jobs:+-j $jobs}) >"$logs/build.log" 2>&1
  else
    (cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPAV_GPU_NVIDIA=ON \
       -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DCMAKE_CUDA_ARCHITECTURES=90 &&
     cmake --build "$build" ${jobs:+-j $jobs}) >"$logs/build.log" 2>&1
  fi || { tail -40 "$logs/build.log"; echo "GPU GATE: FAIL (build)"; exit 1; }
fi
[[ -f $build/CTestTestfile.cmake ]] || { echo "ci/gpu.sh: no CTest tree in $build"; exit 1; }

# A build made elsewhere records its own absolute path in the CTest files:
# point that path at this one when it is absent here.
recorded=$(sed -n 's/^CMAKE_CACHEFILE_DIR:INTERNAL=//p' "$build/CMakeCache.txt" 2>/dev/null)
if [[ -n $recorded && $recorded != "$build" && ! -e $recorded ]]; then
  mkdir -p "$(dirname "$recorded")" && ln -s "$build" "$recorded" &&
    echo "== $recorded -> $build (build made elsewhere)"
fi
# Shared libraries carried beside a prebuilt tree (TBB).
[[ -d $build/devlib ]] && export LD_LIBRARY_PATH=$build/devlib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
gpu_test=$build/kernels/hip/tests/gpu_test
[[ -x $gpu_test ]] || { echo "ci/gpu.sh: $gpu_test was not built"; exit 1; }

# ---- devices -------------------------------------------------------------------------
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
[[ ${ngpu:-0} -ge 1 ]] || { echo "ci/gpu.sh: no NVIDIA GPU visible (nvidia-smi -L)"; echo "GPU GATE: FAIL (no device)"; exit 1; }
spec=$logs/resources.json
{
  printf '{"version": {"major": 1, "minor": 0}, "local": [{"gpus": ['
  for ((i = 0; i < ngpu; i++)); do printf '%s{"id": "%d", "slots": 1}' "$([[ $i -gt 0 ]] && echo ', ')" "$i"; done
  printf ']}]}\n'
} >"$spec"
echo "== $ngpu GPU(s): $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"

fail=0
summary=()

# ---- the suites ----------------------------------------------------------------------
echo "== ctest -L gpu over $ngpu GPU(s)"
ctest --test-dir "$build" -L gpu --resource-spec-file "$spec" -j "${jobs:-$ngpu}" \
  --output-on-failure --no-tests=error --timeout 900 >"$logs/ctest.log" 2>&1
rc=$?
grep -E "tests passed|tests failed|Total Test time" "$logs/ctest.log"
grep -E "^\s+[0-9]+ - .*\((Failed|SEGFAULT|Timeout|Subprocess aborted|Not Run)\)" "$logs/ctest.log" | head -20
line=$(grep -E "tests passed" "$logs/ctest.log" | tail -1)
summary+=("ctest -L gpu: ${line:-no summary} (rc $rc)")
[[ $rc == 0 ]] || fail=1

# ---- sanitizers ----------------------------------------------------------------------
if [[ $sanitize == 1 ]]; then
  cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
  if [[ -z $cs ]]; then
    echo "ci/gpu.sh: compute-sanitizer not found"; summary+=("sanitizers: not found"); fail=1
  else
    for tool in memcheck racecheck; do
      echo "== compute-sanitizer --tool $tool (GpuSanitize.*)"
      "$cs" --tool "$tool" --error-exitcode 99 "$gpu_test" --gtest_filter='GpuSanitize.*' \
        >"$logs/sanitizer-$tool.log" 2>&1
      rc=$?
      tail -3 "$logs/sanitizer-$tool.log"
      res=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$logs/sanitizer-$tool.log" | tail -1)
      summary+=("$tool: ${res:-no summary} (rc $rc)")
      [[ $rc == 0 ]] || fail=1
    done
  fi
fi

# ---- mutants ---------------------------------------------------------------------------
if [[ $mutants == 1 ]]; then
  echo "== mutants (nvidia preset)"
  PAV_MUTANT_PRESET=nvidia "$root/ci/mutants.sh" gpu- >"$logs/mutants.log" 2>&1
  rc=$?
  sed -n '/^mutants (/,$p' "$logs/mutants.log"
  summary+=("mutants: $(tail -1 "$logs/mutants.log")")
  [[ $rc == 0 ]] || fail=1
fi
if [[ -n $run_mutants ]]; then
  echo "== prebuilt mutants in $run_mutants"
  caught=0; total=0
  for dir in "$run_mutants"/*/; do
    name=$(basename "$dir")
    [[ -x $dir/gpu_test ]] || continue
    total=$((total + 1))
    filter=$(cat "$dir/filter")
    if "$dir/gpu_test" --gtest_filter="$filter" >"$logs/mutant-$name.log" 2>&1; then
      echo "  MISSED  $name: $(cat "$dir/what")"; fail=1
    else
      n=$(grep -cE '^\[  FAILED  \] .* \([0-9]+ ms\)$' "$logs/mutant-$name.log")
      echo "  caught  $name ($n failing test(s))"; caught=$((caught + 1))
    fi
  done
  summary+=("mutants: $caught of $total caught")
  [[ $caught == "$total" && $total -gt 0 ]] || fail=1
fi

echo
echo "GPU gate summary ($ngpu GPU(s)):"
for s in "${summary[@]}"; do echo "  $s"; done
if [[ $fail == 0 ]]; then echo "GPU GATE: PASS"; else echo "GPU GATE: FAIL"; fi
exit $fail
