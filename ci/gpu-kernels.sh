#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Kernels under test on an NVIDIA GPU machine, in one call: what pav's "verify any
# kernel" work claims on a GPU, checked and written down.
#   1. build the nvidia preset's pav and plugins (skipped with --no-build);
#   2. each example worker on the GPU (--workers, default torch,triton,mla: the
#      PyTorch decode, the Triton split-KV decode and the PyTorch MLA decode) passes
#      pav verify, e.g.
#        pav verify --kernel exec:'python3 examples/workers/torch_decode.py --device cuda'
#   3. a timed pav fuzz run of each (--minutes, default 2);
#   4. each with each of its injected defects (torch: no-max-subtract; triton:
#      window-off-by-one, cap-after-mask, sink-not-in-denominator; mla: rope-dropped,
#      v-includes-rope-offset, scale-from-latent-dim) is caught on the GPU: pav fuzz
#      exits 1 with a shrunk case saved, pav replay of it fails with the defect and
#      passes without;
#   5. pav's own GPU kernels pass through the plugin ABI:
#        pav verify --kernel lib:BUILD/adapters/libpav_gpu_kernel.so
#   6. the adapter overhead benchmark (bench/adapter_bench: CPU only, but the
#      GPU host is a quiet machine to time it on), into adapter-bench.json.
# Writes summary.md (for people and the docs) and summary.json plus one log per
# step under --out DIR (default BUILD/gpu-kernels); with --tar FILE also packs
# that folder (logs, saved cases) into one file. Exits 1 if any step fails.
#
#   ci/gpu-kernels.sh [--build-dir B] [--no-build] [--python PY] [--minutes M] [--out DIR] [--tar FILE]
#                     [--step-limit SECONDS (each step's, default 240)] [--workers LIST]
#                     [--no-plugin] (skips steps 5 and 6)
#   ci/gpu-kernels.sh --pack DIR
#
# A GPU runner without pav's build dependencies (fmt, TBB, CLI11, rapidcheck, ...)
# runs a build made elsewhere: --pack DIR (on a machine with nvcc and those
# packages) builds the nvidia preset's pav, GPU plugin, adapter bench and its
# null kernel, and copies them into DIR in the build tree's layout, with the
# shared libraries they need beyond glibc, the driver and libstdc++ in DIR/devlib
# (pav and the plugin link libstdc++ statically). Then, on the runner:
#   ci/gpu-kernels.sh --no-build --build-dir DIR
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build/nvidia
do_build=1
python=python3
minutes=2
out=""
tarball=""
pack=""
step_limit=240
workers=torch,triton,mla
plugin=1

while [[ $# -gt 0 ]]; do
  case $1 in
    --build-dir) build=$(cd "$2" 2>/dev/null && pwd || echo "$2"); shift 2 ;;
    --no-build) do_build=0; shift ;;
    --python) python=$2; shift 2 ;;
    --minutes) minutes=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --tar) tarball=$2; shift 2 ;;
    --step-limit) step_limit=$2; shift 2 ;;
    --pack) pack=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --no-plugin) plugin=0; shift ;;
    -h|--help) sed -n '2,35p' "$0"; exit 0 ;;
    *) echo "ci/gpu-kernels.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
# ---- --pack: build here, copy what the runner needs ---------------------------------
if [[ -n $pack ]]; then
  set -e
  (cd "$root" && cmake --preset nvidia -B "$build" >/dev/null &&
    cmake --build "$build" -j "${PAV_JOBS:-$(nproc)}" --target pav pav_gpu_kernel adapter_bench pav_null_kernel)
  rm -rf "$pack"
  mkdir -p "$pack/adapters" "$pack/bench" "$pack/devlib"
  cp "$build/pav" "$pack/"
  cp "$build/adapters/libpav_gpu_kernel.so" "$pack/adapters/"
  cp "$build/bench/adapter_bench" "$build/bench/libpav_null_kernel.so" "$pack/bench/"
  # Every resolved library but glibc's own, the dynamic loader, the driver and
  # the C++ runtime: the runner's own libstdc++ serves libtbb and libfmt, and one
  # carried here would, through LD_LIBRARY_PATH, also be the one the Python
  # workers (PyTorch) load, older than theirs.
  for f in "$pack/pav" "$pack/adapters/libpav_gpu_kernel.so" "$pack/bench/adapter_bench"; do
    ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// {print $3}'
  done | sort -u | grep -Ev '/(libc|libm|libdl|libpthread|librt|libcuda|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
    while read -r lib; do cp -L "$lib" "$pack/devlib/"; done
  # Debug info stays here: the pack travels (a device machine takes 64 MiB).
  find "$pack" -type f -exec strip --strip-debug {} +
  echo "packed into $pack ($(du -sh "$pack" | cut -f1)):"
  (cd "$pack" && find . -type f | sort)
  exit 0
fi

out=${out:-$build/gpu-kernels}
mkdir -p "$out"
out=$(cd "$out" && pwd)
export PYTHONDONTWRITEBYTECODE=1

# Shared libraries carried beside a build made elsewhere (--pack).
[[ -d $build/devlib ]] && export LD_LIBRARY_PATH=$build/devlib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
pav=$build/pav
gpu_plugin=$build/adapters/libpav_gpu_kernel.so
# Each example worker: its kernel spec on the GPU and its defects.
declare -A worker_kernel=(
  [torch]="exec:$python $root/examples/workers/torch_decode.py --device cuda"
  [triton]="exec:$python $root/examples/workers/triton_decode.py --device cuda"
  [mla]="exec:$python $root/examples/workers/torch_mla.py --device cuda"
)
declare -A worker_defects=(
  [torch]="no-max-subtract"
  [triton]="window-off-by-one cap-after-mask sink-not-in-denominator"
  [mla]="rope-dropped v-includes-rope-offset scale-from-latent-dim"
)
declare -a rows=()
status=0

# summary.md, summary.json (and --tar) as they stand: written after every step,
# so a run stopped from outside still leaves what it had done.
report() {
  local w
  {
    echo "# Kernels under test on the GPU ($(date -u +%Y-%m-%d))"
    echo
    sed 's/^/    /' "$out/environment.log"
    echo
    echo "| step | exit | expected | seconds | verdict |"
    echo "|---|---|---|---|---|"
    for r in "${rows[@]}"; do echo "| ${r//|/ | } |"; done
    echo
    for w in ${workers//,/ }; do
      echo "Timed fuzz run of $w ($minutes min): $(grep -E 'cases' "$out/$w-fuzz.log" 2>/dev/null | tail -n 1)"
      echo
    done
    echo
    echo "Adapter overhead per call (bench/adapter_bench):"
    echo
    sed -n '/^adapter/,$p' "$out/adapter-bench.log" 2>/dev/null | sed 's/^/    /'
  } >"$out/summary.md"
  {
    echo "{\"date\": \"$(date -u +%FT%TZ)\", \"minutes\": $minutes, \"steps\": ["
    local sep="" n rc want secs verdict
    for r in "${rows[@]}"; do
      IFS='|' read -r n rc want secs verdict <<<"$r"
      echo "$sep{\"step\": \"$n\", \"exit\": \"$rc\", \"expected\": $want, \"seconds\": $secs, \"verdict\": \"$verdict\"}"
      sep=","
    done
    echo "], \"passed\": $([[ $status -eq 0 ]] && echo true || echo false)}"
  } >"$out/summary.json"
  [[ -z $tarball ]] || tar -czf "$tarball" -C "$(dirname "$out")" "$(basename "$out")"
}

# step NAME EXPECTED_EXIT CMD...: runs CMD with its output in $out/NAME.log and
# records the exit code and the time.
step() {
  local name=$1 want=$2
  shift 2
  echo "== $name: $*"
  local t0=$SECONDS
  # A step past its limit is stopped (SIGINT: pav ends cleanly and says so),
  # so the summary is always written.
  timeout -s INT -k 15 "$step_limit" "$@" >"$out/$name.log" 2>&1
  local rc=$? secs=$((SECONDS - t0))
  local verdict=ok
  if [[ $rc -ne $want ]]; then verdict="FAILED (exit $rc, expected $want)"; status=1; fi
  echo "   exit $rc in ${secs}s: $verdict"
  tail -n 15 "$out/$name.log" | sed 's/^/   | /'
  rows+=("$name|$rc|$want|$secs|$verdict")
  report
  return 0
}

{
  echo "host: $(hostname)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -4
  "$python" -c 'import torch, numpy; print("python", __import__("sys").version.split()[0], "torch", torch.__version__, "cuda", torch.cuda.is_available(), "numpy", numpy.__version__)' 2>&1
} >"$out/environment.log"
cat "$out/environment.log"

if ((do_build)); then
  step build 0 bash -c "cd '$root' && cmake --preset nvidia -B '$build' && cmake --build '$build' -j \$(nproc) --target pav pav_gpu_kernel split_decode adapter_bench"
fi

for w in ${workers//,/ }; do
  kernel=${worker_kernel[$w]:-}
  if [[ -z $kernel ]]; then
    echo "ci/gpu-kernels.sh: unknown worker $w (expected torch, triton, mla)" >&2
    exit 2
  fi
  step "$w-verify" 0 "$pav" verify --kernel "$kernel" --save "$out/verify-cases"
  step "$w-fuzz" 0 "$pav" fuzz --kernel "$kernel" --property decode --minutes "$minutes" --save "$out/fuzz-cases"
  for defect in ${worker_defects[$w]}; do
    cases="$out/defect-cases/$w-$defect"
    rm -rf "$cases"
    step "$w-$defect-fuzz" 1 "$pav" fuzz --kernel "$kernel --defect $defect" --property decode \
      --cases 200 --seed 1 --shrink-tries 400 --save "$cases"
    defect_case=$(ls "$cases"/*.json 2>/dev/null | head -1)
    if [[ -n "$defect_case" ]]; then
      step "$w-$defect-replay" 1 "$pav" replay --kernel "$kernel --defect $defect" "$defect_case"
      step "$w-$defect-replay-fixed" 0 "$pav" replay --kernel "$kernel" "$defect_case"
    else
      rows+=("$w-$defect-replay|-|1|0|FAILED (no case saved)")
      status=1
      report
    fi
  done
done
if ((plugin)); then
  step gpu-plugin-verify 0 "$pav" verify --kernel "lib:$gpu_plugin" --save "$out/verify-cases"
  step adapter-bench 0 "$build/bench/adapter_bench" --calls 200 --json-out "$out/adapter-bench.json" \
    --pav "$pav" --python "$python" --null-kernel "$build/bench/libpav_null_kernel.so" \
    --null-worker "$root/bench/adapter/null_worker.py"
fi

report
cat "$out/summary.md"
exit $status
