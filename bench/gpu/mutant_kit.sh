#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# GPU mutant binaries built on the GPU machine (many cores) rather than here.
#
#   bench/gpu/mutant_kit.sh pack KIT     # here, after an nvidia build (gpu_test linked)
#   KIT/mutant_kit.sh build MUTDIR [-j N] # there: MUTDIR/NAME/{gpu_test,filter,what},
#                                         # and MUTDIR/../control-{decode,refresh}/gpu_test
#
# pack copies into KIT what the gpu_test link needs besides the patched source
# (its objects and static libraries, debug info stripped; the Debian rapidcheck,
# gtest, TBB and fmt libraries), the kernels/ sources, every kept mutant gpu-*
# and ci/mutant_lib.sh. build applies each patch by content to a copy of the
# sources, compiles the sources it changes (mutant_sources.sh) with nvcc (the
# nvidia preset's flags), swaps the objects into libpav_gpu.a and links gpu_test
# with the machine's g++: only the defect differs from the suite's own binary.
# Two control binaries (the decode sources, and the refresh, compiled there
# unpatched) must pass the suite: a mutant counts as caught only where they do.
# The layout of MUTDIR is the one bench/gpu/device_call.sh step m runs (mut/NAME/...).
set -uo pipefail
mode=${1:-}; shift || true
if [[ $mode == pack ]]; then
  kit=${1:?usage: mutant_kit.sh pack KIT}
  root=$(cd "$(dirname "$0")/../.." && pwd)
  build=${PAV_NVIDIA_BUILD:-$root/build/nvidia}
  [[ -x $build/kernels/hip/tests/gpu_test ]] || { echo "mutant_kit: no gpu_test in $build" >&2; exit 3; }
  rm -rf "$kit"; mkdir -p "$kit/lib" "$kit/obj" "$kit/src/kernels/hip" "$kit/patches"
  cp "$root"/kernels/*.hpp "$kit/src/kernels/"
  cp "$root"/kernels/hip/*.hip "$root"/kernels/hip/*.hpp "$kit/src/kernels/hip/"
  find "$root/ci/mutants" -name 'gpu-*.patch' -exec cp {} "$kit/patches/" \;
  cp "$root/ci/mutant_lib.sh" "$kit/"
  cp "$build"/kernels/hip/tests/CMakeFiles/gpu_test.dir/*.o "$kit/obj/"
  for a in kernels/hip/libpav_gpu.a properties/libpav_props.a reference/libpav_reference.a kernels/libpav_kernels.a \
           adapters/libpav_adapters.a adapters/libpav_adapters_core.a common/libpav_common.a stats/libpav_stats.a \
           input/libpav_input.a; do
    objcopy --strip-debug "$build/$a" "$kit/lib/$(basename "$a")"
  done
  for o in "$kit"/obj/*.o; do objcopy --strip-debug "$o"; done
  for l in librapidcheck.a libgtest.a libtbb.so.12 libfmt.so.9; do cp -L "/usr/lib/x86_64-linux-gnu/$l" "$kit/lib/"; done
  python3 - "$build/compile_commands.json" "$root" >"$kit/nvcc_flags" <<'PY'
import json, sys, shlex
for e in json.load(open(sys.argv[1])):
    if e["file"].endswith("kernels/hip/decode.hip") and "pav_gpu.dir" in e["command"]:
        a = shlex.split(e["command"])[1:]
        keep, skip = [], False
        for x in a:
            if skip: skip = False; continue
            if x in ("-c", "-o"): skip = True; continue
            if x.startswith("-I") or x.startswith("-isystem") or x == "-x" or x == "cu": continue
            keep.append(x)
        print(" ".join(keep)); break
PY
  cp "$0" "$kit/mutant_kit.sh"
  cp "$root/bench/gpu/mutant_sources.sh" "$kit/"
  du -sh "$kit"
  exit 0
fi
[[ $mode == build ]] || { sed -n '2,15p' "$0"; exit 2; }
kit=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: mutant_kit.sh build MUTDIR [-j N]}; shift
jobs=8; [[ ${1:-} == -j ]] && jobs=$2
mkdir -p "$out"; out=$(cd "$out" && pwd)
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
cudalib=/usr/local/cuda/lib64; [[ -d $cudalib ]] || cudalib=/usr/local/cuda/targets/x86_64-linux/lib
# shellcheck source=ci/mutant_lib.sh
source "$kit/mutant_lib.sh"
gtest_filter_of() { echo "$1" | tr '|' '\n' | sed 's/[\\^$]//g; s/$/*/' | paste -sd: -; }
# shellcheck source=bench/gpu/mutant_sources.sh
source "$kit/mutant_sources.sh"
# one PATCH: the mutant's binary in $out/NAME, the sources it changes compiled
# again; one control NAME FILE...: those files unpatched, in $out/../control-NAME
# (not a mutant: its suite must pass).
one() {
  local patch=$1 name file stem dir dest
  local -a files
  if [[ $patch == control ]]; then
    name=control-$2; files=("${@:3}"); dir=$out/.work/$name; dest=$out/../$name
    rm -rf "$dir"; mkdir -p "$dir"; cp -r "$kit/src" "$dir/src"
  else
    name=$(basename "$patch" .patch); dir=$out/.work/$name; dest=$out/$name
    rm -rf "$dir"; mkdir -p "$dir"; cp -r "$kit/src" "$dir/src"
    mapfile -t files < <(mutant_apply "$patch" "$dir/src" 2>"$dir/apply.log")
    ((${#files[@]})) || { echo "BROKEN  $name (patch does not apply)"; cat "$dir/apply.log"; return 1; }
    mapfile -t files < <(mutant_sources "$dir/src" "${files[@]}")
    ((${#files[@]})) || { echo "BROKEN  $name (changes no source of pav_gpu)"; return 1; }
  fi
  cp "$kit/lib/libpav_gpu.a" "$dir/libpav_gpu.a"
  for file in "${files[@]}"; do
    stem=$(basename "$file")
    # shellcheck disable=SC2046
    "$nvcc" $(cat "$kit/nvcc_flags") -I"$dir/src" -x cu -c "$dir/src/$file" -o "$dir/$stem.o" >>"$dir/build.log" 2>&1 ||
      { echo "BROKEN  $name (compile of $file failed)"; tail -5 "$dir/build.log"; return 1; }
    (cd "$dir" && ar r libpav_gpu.a "$stem.o") >>"$dir/build.log" 2>&1
  done
  local L=$kit/lib
  mkdir -p "$dest"
  g++ -O2 -static-libstdc++ -static-libgcc "$kit"/obj/*.o -o "$dest/gpu_test" -L"$cudalib" \
    "$dir/libpav_gpu.a" "$L/libpav_props.a" "$L/libpav_reference.a" "$L/libpav_kernels.a" "$L/librapidcheck.a" "$L/libgtest.a" \
    "$L/libpav_adapters.a" "$dir/libpav_gpu.a" -lcudart_static "$L/libpav_adapters_core.a" "$L/libpav_reference.a" \
    "$L/libpav_kernels.a" "$L/libtbb.so.12" "$L/libpav_common.a" -ldl "$L/libpav_stats.a" "$L/libpav_input.a" "$L/libfmt.so.9" \
    "$L/librapidcheck.a" -lcudadevrt -lcudart_static -lrt -lpthread -ldl >>"$dir/build.log" 2>&1 ||
    { echo "BROKEN  $name (link failed)"; tail -5 "$dir/build.log"; return 1; }
  if [[ $patch != control ]]; then
    gtest_filter_of "$(header "$patch" pav-tests)" >"$dest/filter"
    header "$patch" pav-mutant >"$dest/what"
  fi
  echo "built   $name"
}
status=0; pids=()
# Two controls: the decode sources (the entries and every body) and the refresh.
decode_sources=()
for f in "$kit"/src/kernels/hip/*.hip; do
  [[ $f == */refresh.hip || $f == */runtime.hip ]] || decode_sources+=("kernels/hip/$(basename "$f")")
done
one control decode "${decode_sources[@]}" & pids+=($!)
one control refresh kernels/hip/refresh.hip & pids+=($!)
for patch in "$kit"/patches/gpu-*.patch; do
  [[ $(header "$patch" pav-preset) == nvidia ]] || continue
  one "$patch" & pids+=($!)
  if [[ ${#pids[@]} -ge $jobs ]]; then wait "${pids[0]}" || status=1; pids=("${pids[@]:1}"); fi
done
for p in "${pids[@]}"; do wait "$p" || status=1; done
rm -rf "$out/.work"
exit $status
