#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# GPU mutant binaries without a second build tree: for each kept mutant gpu-*
# (ci/mutants/gpu/, pav-preset nvidia), compile the sources it changes (those it patches and those
# including a header it patches: bench/gpu/mutant_sources.sh) with the nvidia
# build's own commands, swap them into a copy of their static library, and relink
# gpu_test with the build's own link command. Needs a built nvidia preset
# (gpu_test linked).
#
#   bench/gpu/build_mutants.sh OUTDIR [PATTERN] [-j N] [--rev COMMIT]
#
# --rev: take the source and the patches from that commit rather than the working
# tree (the build's other objects must match it: only the changed sources are rebuilt).
# Writes OUTDIR/NAME.tar.xz (NAME/gpu_test stripped, NAME/filter: the gtest filter of
# pav-tests, NAME/what: pav-mutant) for bench/gpu/device_call.sh step m, or
# `ci/gpu.sh --run-mutants` once unpacked. Exit 1 when a patch does not apply or
# does not build.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${PAV_NVIDIA_BUILD:-$root/build/nvidia}
out=""; pattern=""; jobs=1; rev=""
while [[ $# -gt 0 ]]; do
  case $1 in
    -j) jobs=$2; shift 2 ;;
    --rev) rev=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) if [[ -z $out ]]; then out=$1; else pattern=$1; fi; shift ;;
  esac
done
[[ -n $out ]] || { echo "usage: build_mutants.sh OUTDIR [PATTERN] [-j N]" >&2; exit 2; }
[[ -x $build/kernels/hip/tests/gpu_test ]] || { echo "build_mutants: no gpu_test in $build" >&2; exit 3; }
mkdir -p "$out"; out=$(cd "$out" && pwd)
work=$build/mutant-work
mkdir -p "$work"
# shellcheck source=bench/gpu/mutant_sources.sh
source "$root/bench/gpu/mutant_sources.sh"
# shellcheck source=ci/mutant_lib.sh
source "$root/ci/mutant_lib.sh"
gtest_filter_of() { echo "$1" | tr '|' '\n' | sed 's/[\\^$]//g; s/$/*/' | paste -sd: -; }
link_cmd=$(cd "$build" && ninja -t commands gpu_test | tail -1)
link_cmd=${link_cmd%% && cd *}  # the link alone, not the test discovery after it
[[ $link_cmd == *"-o kernels/hip/tests/gpu_test"* ]] || { echo "build_mutants: unexpected link command" >&2; exit 3; }

one() {
  local patch=$1 name file obj cmd
  local -a sources changed
  name=$(basename "$patch" .patch)
  local dir=$work/$name
  rm -rf "$dir"; mkdir -p "$dir/tree"
  # The kernels' sources: a patch of a header changes every source including it.
  if [[ -n $rev ]]; then git -C "$root" archive "$rev" kernels | tar x -C "$dir/tree"; else cp -r "$root/kernels" "$dir/tree/"; fi
  if ! mapfile -t changed < <(mutant_apply "$patch" "$dir/tree" 2>"$dir/apply.log") || ((${#changed[@]} == 0)); then
    echo "BROKEN  $name (patch does not apply: $dir/apply.log)"; return 1
  fi
  mapfile -t sources < <(mutant_sources "$dir/tree" "${changed[@]}")
  ((${#sources[@]})) || { echo "BROKEN  $name (changes no source of pav_gpu)"; return 1; }
  cp "$build/kernels/hip/libpav_gpu.a" "$dir/libpav_gpu.a"
  for file in "${sources[@]}"; do
    # The production compile command of that source, pointed at the patched
    # copy, the copy's headers ahead of the tree's.
    cmd=$(python3 - "$build/compile_commands.json" "$root/$file" <<'EOF2'
import json, sys
for e in json.load(open(sys.argv[1])):
    if e["file"] == sys.argv[2] and "pav_gpu.dir" in e["command"]:
        print(e["command"]); break
EOF2
)
    [[ -n $cmd ]] || { echo "BROKEN  $name (no compile command for $file)"; return 1; }
    [[ $cmd == *" -I$root "* ]] || { echo "BROKEN  $name (no -I$root in the compile command of $file)"; return 1; }
    obj=$(sed -E 's/.* -o ([^ ]+).*/\1/' <<<"$cmd")
    cmd=${cmd/"$root/$file"/"$dir/tree/$file"}
    cmd=${cmd/" -o $obj"/" -o $dir/$(basename "$obj")"}
    cmd=${cmd/" -I$root "/" -I$dir/tree -I$root "}
    if ! (cd "$build" && eval "nice -n 10 $cmd") >>"$dir/build.log" 2>&1; then
      echo "BROKEN  $name (compile of $file failed: $dir/build.log)"; return 1
    fi
    (cd "$dir" && ar r libpav_gpu.a "$(basename "$obj")") >>"$dir/build.log" 2>&1
  done
  local link=${link_cmd//kernels\/hip\/libpav_gpu.a/$dir\/libpav_gpu.a}
  link=${link/"-o kernels/hip/tests/gpu_test"/"-o $dir/pkg/$name/gpu_test"}
  mkdir -p "$dir/pkg/$name"
  if ! (cd "$build" && eval "$link") >>"$dir/build.log" 2>&1; then
    echo "BROKEN  $name (link failed: $dir/build.log)"; return 1
  fi
  objcopy --strip-debug "$dir/pkg/$name/gpu_test" 2>/dev/null || true
  gtest_filter_of "$(header "$patch" pav-tests)" >"$dir/pkg/$name/filter"
  header "$patch" pav-mutant >"$dir/pkg/$name/what"
  tar cJf "$out/$name.tar.xz" -C "$dir/pkg" "$name"
  echo "built   $name"
}

patches=$root
if [[ -n $rev ]]; then
  patches=$work/patches-$rev; rm -rf "$patches"; mkdir -p "$patches"
  git -C "$root" archive "$rev" ci/mutants | tar x -C "$patches"
fi
status=0
pids=()
while read -r patch; do
  [[ ${patch##*/} == gpu-*"$pattern"*.patch && $(header "$patch" pav-preset) == nvidia ]] || continue
  [[ -e $out/$(basename "$patch" .patch).tar.xz ]] && continue  # built already
  one "$patch" &
  pids+=($!)
  if [[ ${#pids[@]} -ge $jobs ]]; then wait "${pids[0]}" || status=1; pids=("${pids[@]:1}"); fi
done < <(mutant_patches "$patches")
for p in "${pids[@]}"; do wait "$p" || status=1; done
exit $status
