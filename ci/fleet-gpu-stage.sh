#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Prepares a GPU fleet run on a machine that has a GPU but not pav's build
# dependencies: builds pav with the nvidia preset here, and puts a stripped copy
# with the shared libraries it needs beyond the C library and the CUDA driver
# into build/fleet-gpu/ (bin/pav, lib/). Carry that folder to the GPU machine
# and run ci/fleet-gpu.sh there.
# Usage: ci/fleet-gpu-stage.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cmake --preset nvidia >/dev/null
nice -n 10 cmake --build --preset nvidia -j2 --target pav
out=build/fleet-gpu
rm -rf "$out" && mkdir -p "$out/bin" "$out/lib"
strip -o "$out/bin/pav" build/nvidia/pav
# Shared libraries from the build machine's packages (TBB, fmt, ...): the GPU
# machine has the C library and the driver, nothing else of Debian's.
ldd build/nvidia/pav | awk '$3 ~ /^\// {print $1, $3}' | while read -r name path; do
  case $name in
    libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | ld-linux* | libcuda.so* | libgcc_s.so*) ;;
    *) cp -L "$path" "$out/lib/$name" ;;
  esac
done
ls -la "$out/bin" "$out/lib"
du -sh "$out"
