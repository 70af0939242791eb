#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One call on an H200 over binaries built elsewhere (nvidia preset): the GPU suite,
# the sanitizers, prebuilt mutants, the bench and Nsight Compute, as one command.
#
#   bench/gpu/device_call.sh STEPS
#
# Run from a folder holding gpu_test, pav_gpu_bench, lib/ (shared libraries the
# binaries need), bench_diff.py (step w) and mutxz/NAME.tar.xz (one per mutant: NAME/gpu_test,
# NAME/filter, NAME/what, as `ci/gpu.sh --build-mutants` writes them) or
# mutkit/ (bench/gpu/mutant_kit.sh pack; step k builds them here). Logs go to
# $OUT (default ./out). STEPS: letters of the steps to run:
#   t  gpu_test, then compute-sanitizer memcheck and racecheck over GpuSanitize.*
#   k  build the mutants here from the kit in ./mutkit (bench/gpu/mutant_kit.sh
#      pack): mut/NAME/ for step m, and two control binaries (the sources
#      compiled here unpatched) whose whole suite must pass
#   m  every prebuilt mutant: caught when its filtered suite fails
#   w  the whole pav_gpu_bench of BASE and of this build, alternately, twice
#      (base-bench-1, bench-1, base-bench-2, bench-2), and bench_diff.py over
#      the four (diff.md); without BASE, this build's twice
#   b  pav_gpu_bench, every config (JSON and log), within what is left of BUDGET
#      seconds (default 570) for the whole script
#   n  Nsight Compute on the matrix attention of equal32-h8g8 (balanced)
#   s  SASS instruction counts of attend_mma_kernel<128, 1>
#   r  Nsight Compute on the balanced refresh at Hkv 1, batch 256, and on the
#      general reduce (the first launch of reduce_kernel<false, ...>; the uniform
#      call before it takes the bounded form) of trace32-h1g16-q1 at balanced@8
#      (BASE's first, when given)
#   x  Nsight Compute on the attention of trace16-h8g8-q4 (32 rows per pass) and
#      trace32-h1g16-q1 (G 16), and the bench of the reduce at budget 8 x SMs
#   q  pav_gpu_bench over the q_len 1..5 rows of trace16-h8g8, equal32-h8g8,
#      trace32-h1g16 and equal32-h1g16 (uniform, balanced, balanced@8), with the
#      table of each row's time against q_len 1 of the same batch; QSECONDS=N
#      skips the configurations left after N seconds of each binary (0: none)
#   y  Nsight Compute on the balanced attention of trace16-h8g8 at q_len 1 and 4,
#      and of trace32-h1g16 at q_len 1 and 2 (8, 32, 16 and 32 rows per pass)
#   h  the machine's interpreter headers and pybind11 headers, for
#      bench/gpu/python_kit.sh: $OUT/pyheaders.tgz
#   p  python_device_tests (python/tests/test_device.py) over pykit/
#      (bench/gpu/python_kit.sh pack): the package as built must pass, and each
#      Python mutant's package must fail
# BASE=DIR (a folder holding another build's pav_gpu_bench) runs steps q, y, w
# and r with that binary too, right before this one's, into base-*; step s also reads
# BASE/decode_mma.o when it is there.
# Exit 1 when the suite, a sanitizer or a mutant fails.
cd "$(dirname "$0")" || exit 3
W=$PWD
OUT=${OUT:-$W/out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$W/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
steps=${1:-tbn}
t0=$(date +%s)
fail=0
stamp() { echo "[$(($(date +%s) - t0)) s] $*"; }
has() { [[ $steps == *$1* ]]; }
stamp start
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)

if has t; then
  timeout 300 ./gpu_test --gtest_brief=1 >"$OUT/gpu_test.log" 2>&1
  rc=$?; stamp "gpu_test rc=$rc"; [[ $rc == 0 ]] || fail=1
  grep -E "^\[  FAILED|^\[  PASSED|tests ran" "$OUT/gpu_test.log" | head -30
  for tool in memcheck racecheck; do
    timeout 150 "$cs" --tool $tool --error-exitcode 99 ./gpu_test --gtest_filter='GpuSanitize.*' >"$OUT/san-$tool.log" 2>&1
    rc=$?; stamp "$tool rc=$rc"; [[ $rc == 0 ]] || fail=1
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/san-$tool.log" | tail -3
  done
fi

if has k; then
  rm -rf mut control-*
  mutkit/mutant_kit.sh build mut -j "$(nproc)" >"$OUT/mutant-build.log" 2>&1
  rc=$?; stamp "mutant build rc=$rc: $(grep -c '^built' "$OUT/mutant-build.log") built"; [[ $rc == 0 ]] || fail=1
  grep -v '^built' "$OUT/mutant-build.log" | head -20
  for c in control-*/; do
    [[ -x $c/gpu_test ]] || { echo "  no ${c%/}"; fail=1; continue; }
    timeout 300 "$c/gpu_test" --gtest_brief=1 >"$OUT/${c%/}.log" 2>&1
    rc=$?; stamp "${c%/} suite rc=$rc: $(grep -E '^\[  (PASSED|FAILED)' "$OUT/${c%/}.log" | head -1)"; [[ $rc == 0 ]] || fail=1
  done
fi

if has m; then
  mkdir -p mut
  for f in mutxz/*.tar.xz; do [[ -f $f ]] && tar xJf "$f" -C mut; done
  caught=0 total=0
  for dir in mut/*/; do
    name=$(basename "$dir"); total=$((total + 1))
    if timeout 200 "$dir/gpu_test" --gtest_brief=1 --gtest_filter="$(cat "$dir/filter")" >"$dir/log" 2>&1; then
      echo "  MISSED  $name: $(cat "$dir/what")"; fail=1
    else
      n=$(grep -cE '^\[  FAILED  \] .* \([0-9]+ ms\)$' "$dir/log")
      echo "  caught  $name ($n failing test(s))"; caught=$((caught + 1))
    fi
  done | tee "$OUT/mutants.log"
  grep -q MISSED "$OUT/mutants.log" && fail=1
  stamp "mutants: $(grep -c caught "$OUT/mutants.log") of $(ls -d mut/*/ | wc -l) caught"
fi

if has n; then
  timeout 150 "$ncu" --clock-control none -k regex:attend_mma --launch-skip 3 -c 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section SchedulerStats --section InstructionStats --section ComputeWorkloadAnalysis \
    --section MemoryWorkloadAnalysis_Tables --section SourceCounters --print-details all \
    ./pav_gpu_bench --only equal32-h8g8-q1 --variants balanced --iters 1 --warmup 0 --bandwidth-gb 0.5 >"$OUT/ncu.log" 2>&1
  stamp "ncu rc=$?"
  grep -E "DRAM Throughput|L2 Cache Throughput|  Duration|Issue Slots Busy|Executed Instructions  |Registers Per|Achieved Occ|L2: T Tag|lts__t_requests_srcunit_tex_op_read.sum |lts__t_sectors_srcunit_tex.sum  |ldgsts_cache_bypass.sum  |L2 Hit Rate  " "$OUT/ncu.log" | head -20
fi

# bins: the pav_gpu_bench binaries to run, each with its file prefix.
bins=("$W/pav_gpu_bench:")
[[ -n ${BASE:-} ]] && bins=("$(cd "$BASE" && pwd)/pav_gpu_bench:base-" "${bins[@]}")

if has q; then
  for b in "${bins[@]}"; do
    bin=${b%%:*} pre=${b##*:}
    timeout 240 "$bin" --only trace16-h8g8,equal32-h8g8,trace32-h1g16,equal32-h1g16 \
      --variants uniform,balanced,balanced@8 --max-seconds "${QSECONDS:-0}" \
      --json "$OUT/${pre}bench-q.json" >"$OUT/${pre}bench-q.log" 2>&1
    stamp "${pre}bench q rc=$?"
    grep -E "^\| [a-z0-9-]+-q[2-5] \| (balanced|balanced@8) \| [0-9.]+ \|" "$OUT/${pre}bench-q.log"
  done
fi

if has y; then
  for b in "${bins[@]}"; do
    bin=${b%%:*} pre=${b##*:}
    for cfg in trace16-h8g8-q1 trace16-h8g8-q4 trace32-h1g16-q1 trace32-h1g16-q2; do
      # the planned call's attention: the 3rd attend_mma launch of the balanced variant's first timing
      timeout 100 "$ncu" --clock-control none -k regex:attend_mma --launch-skip 3 -c 1 \
        --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
        --section SchedulerStats --section InstructionStats --section MemoryWorkloadAnalysis \
        --section ComputeWorkloadAnalysis --section SourceCounters --print-details all \
        "$bin" --only "$cfg" --variants balanced --iters 1 --warmup 0 --bandwidth-gb 0.5 \
        >"$OUT/${pre}ncu-$cfg.log" 2>&1
      stamp "${pre}ncu $cfg rc=$?"
      grep -E "DRAM Throughput|  Duration|Issue Slots Busy|Executed Instructions  |Registers Per|No Eligible|Achieved Occ" \
        "$OUT/${pre}ncu-$cfg.log" | head -8
    done
  done
fi

if has w; then
  jsons=()
  for i in 1 2; do
    for b in "${bins[@]}"; do
      bin=${b%%:*} pre=${b##*:}
      timeout 240 "$bin" --json "$OUT/${pre}bench-$i.json" --max-seconds 170 >"$OUT/${pre}bench-$i.log" 2>&1
      stamp "${pre}bench $i rc=$?"
      jsons+=("$OUT/${pre}bench-$i.json")
    done
  done
  python3 "$W/bench_diff.py" "${jsons[@]}" >"$OUT/diff.md" 2>&1
  grep -E '^\| [a-z0-9-]+-q1 \| (uniform|balanced|balanced@8) \||^\| [a-z0-9-]+-q[2-5] \| balanced \|' "$OUT/diff.md" | cut -c1-200
  grep -E 'balanced:|refresh' "$OUT/diff.md"
fi

if has b; then
  # The bench gets what is left of BUDGET seconds (default 570) for the whole script.
  left=$((${BUDGET:-570} - ($(date +%s) - t0) - 40))
  [[ $left -gt 170 ]] && left=170; [[ $left -lt 30 ]] && left=30
  timeout $((left + 40)) ./pav_gpu_bench --json "$OUT/bench.json" --max-seconds $left >"$OUT/bench.log" 2>&1
  stamp "bench rc=$?"
  grep -E "^\| (peer|trace|equal)[^|]*\| (uniform|balanced) \||^\| refresh" "$OUT/bench.log" | cut -c1-150
fi

if has s; then
  # attend_mma_kernel<128, NT> for 8, 16 and 32 rows per pass; with BASE, also
  # that build's object of decode_mma.hip (BASE/decode_mma.o) when it is there.
  srcs=(./gpu_test)
  [[ -n ${BASE:-} && -f $BASE/decode_mma.o ]] && srcs+=("$BASE/decode_mma.o")
  for src in "${srcs[@]}"; do
    pre=; [[ $src == ./gpu_test ]] || pre=base-
    for nt in 1 2 4; do
      cuobjdump -sass "$src" 2>/dev/null | awk -v k="attend_mma_kernelILi128ELi${nt}E" '/Function : /{f = index($0, k) > 0} f' \
        >"$OUT/${pre}sass-128-$nt.txt"
      echo "${pre}SASS of attend_mma_kernel<128, $nt>: $(grep -cE '^ +/\*[0-9a-f]{4}\*/' "$OUT/${pre}sass-128-$nt.txt") instructions"
      grep -oE "(LDGSTS|LDG|STG|LDS|STS|HMMA|BAR|MUFU|F2FP|MOVM|SHFL|LDL|STL|FADD|FMUL|FFMA|FMNMX|ISETP)[.A-Z0-9_]*" \
        "$OUT/${pre}sass-128-$nt.txt" | sort | uniq -c | sort -rn | head -16 | paste -sd' '
    done
  done
  cuobjdump -res-usage ./gpu_test 2>/dev/null | grep -A1 "attend_mma" | grep -oE "(_Z[A-Za-z0-9_]*attend_mma[a-z_]*kernelILi[0-9]+ELi[0-9]+E(Li[0-9]+E)?|REG:[0-9]+|STACK:[0-9]+|SHARED:[0-9]+|LOCAL:[0-9]+)" |
    paste -sd' ' | sed 's/ _Z/\n_Z/g' >"$OUT/resources.txt"
  cat "$OUT/resources.txt"
fi

if has r; then
  for b in "${bins[@]}"; do
    bin=${b%%:*} pre=${b##*:}
    timeout 100 "$ncu" --clock-control none -k regex:balanced_refresh --launch-skip 3 -c 1 \
      --section SpeedOfLight --section LaunchStats --section WarpStateStats --section SchedulerStats \
      --section InstructionStats --section SourceCounters \
      "$bin" --only refresh --refresh-kv-heads 1 --variants uniform --iters 20 --bandwidth-gb 0.5 \
      >"$OUT/${pre}ncu-refresh.log" 2>&1
    stamp "${pre}ncu refresh rc=$?"
    grep -E "  Duration|Executed Instructions  |Warp Cycles Per Issued|Issue Slots Busy" "$OUT/${pre}ncu-refresh.log" | head
    timeout 100 "$ncu" --clock-control none --kernel-name-base demangled -k "regex:reduce_kernel<(0|false)," -c 1 \
      --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
      "$bin" --only trace32-h1g16-q1 --variants balanced@8 --iters 1 --warmup 0 --bandwidth-gb 0.5 \
      >"$OUT/${pre}ncu-reduce.log" 2>&1
    stamp "${pre}ncu reduce rc=$?"
    grep -E "  Duration|Grid Size|Achieved Occupancy|Registers Per" "$OUT/${pre}ncu-reduce.log" | head
  done
fi
if has x; then
  for cfg in trace16-h8g8-q4 trace32-h1g16-q1; do
    timeout 100 "$ncu" --clock-control none -k regex:attend_mma --launch-skip 3 -c 1 \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
      --section SchedulerStats --section InstructionStats --section MemoryWorkloadAnalysis \
      ./pav_gpu_bench --only $cfg --variants balanced --iters 1 --warmup 0 --bandwidth-gb 0.5 \
      >"$OUT/ncu-$cfg.log" 2>&1
    stamp "ncu $cfg rc=$?"
    grep -E "DRAM Throughput|  Duration|Issue Slots Busy|Executed Instructions  |Registers Per|Eligible Warps|Grid Size|Waves Per SM" \
      "$OUT/ncu-$cfg.log" | head -10
  done
  timeout 120 ./pav_gpu_bench --only trace32-h1g16-q1,trace32-h1g16-q4 --variants uniform,proportional@8,balanced@8 \
    --json "$OUT/bench-reduce.json" >"$OUT/bench-reduce.log" 2>&1
  stamp "reduce bench rc=$?"
  grep -E "^\| trace32" "$OUT/bench-reduce.log" | cut -c1-150
fi
if has h; then
  py=$(command -v python3)
  inc=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
  conf=$("$py" -c 'import sysconfig; print(sysconfig.get_config_h_filename())')
  pb=$("$py" -c 'import os, pybind11; print(os.path.dirname(pybind11.__file__))')
  # the multiarch pyconfig.h the interpreter's own pyconfig.h includes, if any
  multi=$(ls -d /usr/include/*-linux-gnu/"$(basename "$inc")" 2>/dev/null | head -1)
  tar czf "$OUT/pyheaders.tgz" "$inc" ${multi:+"$multi"} -C "$(dirname "$pb")" pybind11/include 2>/dev/null
  stamp "headers rc=$?: $py, $inc, $conf, pybind11 $("$py" -c 'import pybind11; print(pybind11.__version__)')"
fi

if has p; then
  # A Python mutant of module.cpp brings its own extension; one of the package's
  # .py files runs with the extension as built.
  for d in pykit/pkg/*/; do
    ls "$d"pav/_pav.*.so >/dev/null 2>&1 || cp pykit/pkg/base/pav/_pav.*.so "$d"pav/
  done
  mkdir -p pyrun
  pyrun() {  # pyrun PACKAGE: python_device_tests as CTest runs them, over pykit/pkg/PACKAGE
    (cd pyrun && PYTHONPATH=$W/pykit/pkg/$1 PAV_BINARY=$W/pykit/bin/pav PAV_SOURCE_DIR=$W/pykit/src \
       LD_LIBRARY_PATH=$W/pykit/lib:$LD_LIBRARY_PATH timeout 200 python3 -m pytest -q -p no:cacheprovider \
       "$W/pykit/src/python/tests/test_device.py" >"$OUT/python-$1.log" 2>&1)
  }
  pyrun base
  rc=$?; stamp "python_device_tests rc=$rc: $(tail -1 "$OUT/python-base.log")"; [[ $rc == 0 ]] || fail=1
  for d in pykit/pkg/*/; do
    name=$(basename "$d"); [[ $name == base ]] && continue
    if pyrun "$name"; then
      echo "  MISSED  $name: $(cat "$d/what")"
    else
      echo "  caught  $name ($(grep -cE '^FAILED ' "$OUT/python-$name.log") failing test(s): $(tail -1 "$OUT/python-$name.log"))"
    fi
  done | tee "$OUT/python-mutants.log"
  grep -q MISSED "$OUT/python-mutants.log" && fail=1
  stamp "python mutants: $(grep -c caught "$OUT/python-mutants.log") of $(($(ls -d pykit/pkg/*/ | wc -l) - 1)) caught"
fi
stamp "done (fail=$fail)"
exit $fail
