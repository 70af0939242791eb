#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Time-boxed fuzz run: the nightly CPU job, and GPU runners (--backend gpu when a
# device is present). Runs every property of `pav fuzz` until the budget is
# spent or the first failure; a failure is shrunk and saved as a case file.
# Exits 0 when nothing failed, 1 on a failure (the counterexample paths are
# printed: keep them as the job's artifacts), 2 on bad input, 3 when it could
# not run (no device, an unwritable --save folder) or was stopped by a signal.
#
# Usage: ci/fuzz.sh [MINUTES]
# Environment (all optional):
#   PAV_FUZZ_MINUTES  budget for all properties together (default 20; the argument wins)
#   PAV_FUZZ_SEED     base seed (default: pav draws one and prints it)
#   PAV_FUZZ_SHARD    I/N: this runner's share of the seed space (default 0/1)
#   PAV_FUZZ_JOBS     worker threads (default: nproc)
#   PAV_FUZZ_BACKEND  cpu | gpu | auto (default: gpu when nvidia-smi sees a device, else cpu)
#   PAV_FUZZ_SAVE     directory for counterexamples (default build/fuzz-artifacts)
#   PAV_FUZZ_PROPERTIES  space-separated property names (default: all)
#   PAV               a pav binary to use instead of building one
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
minutes=${1:-${PAV_FUZZ_MINUTES:-20}}
jobs=${PAV_FUZZ_JOBS:-$(nproc)}
save=${PAV_FUZZ_SAVE:-$root/build/fuzz-artifacts}

backend=${PAV_FUZZ_BACKEND:-}
if [[ -z "$backend" ]]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    backend=gpu
  else
    backend=cpu
  fi
fi

pav=${PAV:-}
if [[ -z "$pav" ]]; then
  preset=cpu
  [[ "$backend" == gpu ]] && preset=nvidia
  cmake --preset "$preset" >/dev/null || exit 2
  cmake --build --preset "$preset" --target pav -j "${PAV_JOBS:-$(nproc)}" || exit 2
  pav="$root/build/$preset/pav"
fi

args=(fuzz --minutes "$minutes" --jobs "$jobs" --backend "$backend" --save "$save")
[[ -n "${PAV_FUZZ_SEED:-}" ]] && args+=(--seed "$PAV_FUZZ_SEED")
[[ -n "${PAV_FUZZ_SHARD:-}" ]] && args+=(--shard "$PAV_FUZZ_SHARD")
for p in ${PAV_FUZZ_PROPERTIES:-}; do args+=(--property "$p"); done

mkdir -p "$save"
marker=$(mktemp)
echo "ci/fuzz.sh: $pav ${args[*]}"
# No progress redraws in CI logs: pav prints a progress line every 10 s when
# stderr is not a terminal.
"$pav" "${args[@]}"
rc=$?

mapfile -t found < <(find "$save" -name '*.json' -newer "$marker" 2>/dev/null | sort)
rm -f "$marker"
if ((${#found[@]})); then
  echo "ci/fuzz.sh: counterexample file(s), keep as artifacts:"
  printf '  %s\n' "${found[@]}"
fi
case $rc in
  0) echo "ci/fuzz.sh: PASS" ;;
  1) echo "ci/fuzz.sh: FAIL (a property failed; replay with: $pav fuzz --replay FILE)" ;;
  3) echo "ci/fuzz.sh: could not run, or stopped before the budget was spent (exit 3)" ;;
  *) echo "ci/fuzz.sh: error (exit $rc)" ;;
esac
exit $rc
