#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The sanitizer job: the cpu test suite and the hostile-input corpus built with
# AddressSanitizer and UBSan (signed overflow included, every finding fatal) in
# build/sanitize, then run. Any report fails a test, so the job passes only
# with zero reports. The corpus is the cpu test
# HostileCorpus.EveryCommandRejectsBadInputByName, so the ctest selection below
# runs it (every class, 12 random inputs in this build: PAV_SANITIZE), and
# HostileCorpus.IsInTheCpuSuite, in the same selection, fails if the build ever
# stops registering it there. Prints the build and run times.
#   PAV_JOBS=N   parallel build and test jobs (default: nproc)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${PAV_JOBS:-$(nproc)}
# Reports go to stderr and stop the process with codes of their own, so a
# sanitizer death never reads as one of pav's exit codes (0..3). A segfault
# stays a signal (handle_segv=0): the fault tests' fixtures crash on purpose and
# expect signal 11, and any other crash fails its test as a signal all the same.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:exitcode=86:abort_on_error=0:strict_string_checks=1:check_initialization_order=1:handle_segv=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:exitcode=87:handle_segv=0}
start=$SECONDS
cmake --preset sanitize
cmake --build --preset sanitize -j "$jobs"
built=$SECONDS
bash ci/seed-test-costs.sh build/sanitize sanitize
status=0
ctest --test-dir build/sanitize -L cpu -LE 'gpu|fuzz|slow' -j "$jobs" --output-on-failure --timeout 1800 \
  --output-junit test-results/ctest.xml || status=$?
done_at=$SECONDS
echo "sanitize: build $((built - start)) s, tests $((done_at - built)) s, total $((done_at - start)) s (jobs $jobs)"
exit $status
