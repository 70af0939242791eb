#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Compiles the GPU presets on a machine without a GPU: nvidia (nvcc, sm_90) and
# amd (hipcc, gfx90a + gfx940, compile only). Fails on any compile error.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${PAV_JOBS:-$(nproc)}
if [[ -x /usr/local/cuda/bin/nvcc ]]; then
  cmake --preset nvidia -DPAV_BUILD_BENCH=OFF -DPAV_BUILD_PYTHON=OFF
  cmake --build --preset nvidia -j "$jobs"
else
  echo "gpu-compile: /usr/local/cuda/bin/nvcc not found" >&2
  exit 1
fi
cmake --preset amd -DPAV_BUILD_TESTS=OFF -DPAV_BUILD_BENCH=OFF -DPAV_BUILD_PYTHON=OFF
cmake --build --preset amd -j "$jobs"
echo "gpu-compile: nvidia and amd presets compiled"
