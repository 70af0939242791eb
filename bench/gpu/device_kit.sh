#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Packs the folder bench/gpu/device_call.sh runs from, for a GPU machine reached
# by copying files (keep it inside the repository's ignored build/ folder).
#
#   bench/gpu/device_kit.sh W [BASE_BUILD]
#
# W gets gpu_test and pav_gpu_bench of the nvidia build (PAV_NVIDIA_BUILD,
# default build/nvidia; both targets built, debug info stripped), lib/ (the
# Debian TBB and fmt they link), device_call.sh, bench_diff.py and mutkit/
# (mutant_kit.sh pack). With BASE_BUILD (another nvidia build folder, say of
# the commit before a kernel change), W/base/pav_gpu_bench too, for BASE=base.
# About 45 MB with a base; W.tar.xz beside W holds the same compressed (about
# 4 MB), for a copy that must stay small: unpack it there with tar xJf W.tar.xz.
# Then, on the GPU machine:
#   OUT=... W/device_call.sh tkmw            # or BASE=W/base ... tkmwr
# On an H100's host, tkm took 5 minutes with 17 mutants (build 104 s, controls
# 66 s) and w 90 s.
set -euo pipefail
kit=${1:?usage: device_kit.sh W [BASE_BUILD]}
kit=${kit%/}
base=${2:-}
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${PAV_NVIDIA_BUILD:-$root/build/nvidia}
for f in kernels/hip/tests/gpu_test bench/gpu/pav_gpu_bench; do
  [[ -x $build/$f ]] || { echo "device_kit: no $build/$f (cmake --build --preset nvidia --target gpu_test pav_gpu_bench)" >&2; exit 3; }
done
[[ -z $base || -x $base/bench/gpu/pav_gpu_bench ]] || { echo "device_kit: no $base/bench/gpu/pav_gpu_bench" >&2; exit 3; }
rm -rf "$kit"
mkdir -p "$kit/lib"
strip -o "$kit/gpu_test" "$build/kernels/hip/tests/gpu_test"
strip -o "$kit/pav_gpu_bench" "$build/bench/gpu/pav_gpu_bench"
if [[ -n $base ]]; then
  mkdir -p "$kit/base"
  strip -o "$kit/base/pav_gpu_bench" "$base/bench/gpu/pav_gpu_bench"
fi
for l in libtbb.so.12 libfmt.so.9; do cp -L "/usr/lib/x86_64-linux-gnu/$l" "$kit/lib/"; done
cp "$root/bench/gpu/device_call.sh" "$root/bench/gpu/bench_diff.py" "$kit/"
PAV_NVIDIA_BUILD=$build "$root/bench/gpu/mutant_kit.sh" pack "$kit/mutkit" >/dev/null
tar cJf "$kit.tar.xz" -C "$kit" .
du -sh "$kit" "$kit.tar.xz"
