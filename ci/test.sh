#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The whole CPU test suite: configure the cpu preset, build, run every test
# labelled cpu (gpu, fuzz and slow tests are separate gates). JUnit XML lands in
# build/cpu/test-results/.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${PAV_JOBS:-$(nproc)}
cmake --preset cpu
cmake --build --preset cpu -j "$jobs"
bash ci/seed-test-costs.sh build/cpu cpu
ctest --test-dir build/cpu -L cpu -LE 'gpu|fuzz|slow' -j "$jobs" --output-on-failure --timeout 600 \
  --output-junit test-results/ctest.xml
