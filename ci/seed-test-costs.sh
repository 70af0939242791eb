#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Hands CTest the tests' run times from an earlier run (ci/test-costs/PRESET.txt,
# a copy of CTest's own cost file) where BUILD_DIR has no record yet, so the
# first run in a fresh build folder starts the longest tests first: with two
# jobs, a long test started last runs alone while the other core idles. Only the
# order changes. After a run CTest keeps its own record in the build folder.
# Refresh the copies from build/PRESET/Testing/Temporary/CTestCostData.txt.
#   ci/seed-test-costs.sh BUILD_DIR PRESET
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?usage: ci/seed-test-costs.sh BUILD_DIR PRESET}
preset=${2:?usage: ci/seed-test-costs.sh BUILD_DIR PRESET}
costs=$root/ci/test-costs/$preset.txt
record=$build/Testing/Temporary/CTestCostData.txt
[[ -f $costs ]] || { echo "seed-test-costs: no $costs" >&2; exit 2; }
if [[ ! -f $record ]]; then
  mkdir -p "$(dirname "$record")"
  cp "$costs" "$record"
fi
