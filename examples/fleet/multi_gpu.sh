#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One fuzz campaign over every GPU of this host: one `pav fuzz` process per GPU,
# each pinned to its GPU through CUDA_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES
# and running shard I/N of one base seed, then `pav report merge` over their
# reports. Works for any number of GPUs, one included.
#
# Usage: multi_gpu.sh [--pav PATH] [--out DIR] [--gpus N|LIST] [--cpu-shards N] [--] [pav fuzz options]
#   --pav PATH        the pav binary (default: pav on PATH)
#   --out DIR         where reports, logs, counterexamples and fleet.json go (default: pav-fleet)
#   --gpus N|LIST     use the first N GPUs, or the GPUs listed ("0,2,3"); default: every GPU found
#                     (CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES when set, else nvidia-smi, else rocm-smi)
#   --cpu-shards N    no GPU: N shards on the CPU backend (a CPU host, or a dry run of this script)
# Every other option goes to each `pav fuzz` (e.g. --time-budget 1h --property decode). Without
# --seed a base seed is drawn once and printed; without --backend the shards use gpu (cpu with
# --cpu-shards); without --save the cases go to DIR/counterexamples.
#
# Output: DIR/shard-I.json (each shard's report), DIR/shard-I.log, DIR/fleet.json (the merge).
# Exit: the merge's code (0 pass, 1 a failure found or a shard stopped early, 2 reports that
# are malformed or do not make one campaign); 2 for bad usage; 3 when no GPU is found or a shard
# wrote no report. SIGINT/SIGTERM are passed to the shards, which stop cleanly and report.
set -uo pipefail

usage() { sed -n '3,21p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "multi_gpu: $1" >&2; exit "${2:-2}"; }

pav=pav out=pav-fleet gpus="" cpu_shards=""
while (($#)); do
  case $1 in
    --pav) pav=${2:?--pav needs a path}; shift 2 ;;
    --out) out=${2:?--out needs a folder}; shift 2 ;;
    --gpus) gpus=${2:?--gpus needs N or a list}; shift 2 ;;
    --cpu-shards) cpu_shards=${2:?--cpu-shards needs N}; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    *) break ;;
  esac
done
fuzz_args=("$@")
has_option() {  # has_option --name: the fuzz options name it (as "--name V" or "--name=V")
  local a
  for a in "${fuzz_args[@]}"; do [[ $a == "$1" || $a == "$1="* ]] && return 0; done
  return 1
}
for forbidden in --shard --report --resume --json; do
  has_option "$forbidden" && die "$forbidden is set per shard by this script; leave it out"
done
command -v "$pav" >/dev/null 2>&1 || [[ -x $pav ]] || die "no pav binary at '$pav' (use --pav PATH)" 3

# The devices, one shard each.
devices=()
if [[ -n $cpu_shards ]]; then
  [[ $cpu_shards =~ ^[1-9][0-9]*$ ]] || die "--cpu-shards: expected a positive count, got '$cpu_shards'"
  [[ -z $gpus ]] || die "--gpus and --cpu-shards: give one"
  for ((i = 0; i < cpu_shards; ++i)); do devices+=(cpu); done
else
  found=()
  if [[ -n ${CUDA_VISIBLE_DEVICES:-} ]]; then
    IFS=, read -ra found <<<"$CUDA_VISIBLE_DEVICES"
  elif [[ -n ${HIP_VISIBLE_DEVICES:-} ]]; then
    IFS=, read -ra found <<<"$HIP_VISIBLE_DEVICES"
  elif command -v nvidia-smi >/dev/null 2>&1; then
    mapfile -t found < <(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null)
  elif command -v rocm-smi >/dev/null 2>&1; then
    mapfile -t found < <(rocm-smi --showid 2>/dev/null | sed -n 's/^GPU\[\([0-9]*\)\].*/\1/p' | sort -un)
  fi
  if [[ -z $gpus ]]; then
    devices=("${found[@]}")
  elif [[ $gpus =~ ^[1-9][0-9]*$ ]]; then
    ((gpus <= ${#found[@]})) || die "--gpus $gpus: only ${#found[@]} GPU(s) found (${found[*]:-none})" 3
    devices=("${found[@]:0:gpus}")
  else
    [[ $gpus =~ ^[0-9A-Za-z-]+(,[0-9A-Za-z-]+)*$ ]] || die "--gpus: expected a count or a list like 0,2,3, got '$gpus'"
    IFS=, read -ra devices <<<"$gpus"
  fi
  ((${#devices[@]} > 0)) || die "no GPU found (no CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES, nvidia-smi or rocm-smi); use --cpu-shards N to fuzz on the CPU" 3
fi
n=${#devices[@]}

seed_args=()
if ! has_option --seed; then
  seed=$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')
  seed_args=(--seed "$seed")
fi
backend_args=()
has_option --backend || backend_args=(--backend "$([[ -n $cpu_shards ]] && echo cpu || echo gpu)")
save_args=()
has_option --save || save_args=(--save "$out/counterexamples")

mkdir -p "$out" || die "cannot create $out" 3
rm -f "$out"/shard-*.json "$out"/shard-*.log "$out/fleet.json"
echo "multi_gpu: $n shard(s) on ${devices[*]}${seed_args[*]:+, base seed ${seed_args[1]}}; reports in $out"

pids=()
for ((i = 0; i < n; ++i)); do
  dev=${devices[i]}
  cmd=("$pav" fuzz --shard "$i/$n" --report "$out/shard-$i.json" --quiet
       "${seed_args[@]}" "${backend_args[@]}" "${save_args[@]}" "${fuzz_args[@]}")
  if [[ $dev == cpu ]]; then
    "${cmd[@]}" >"$out/shard-$i.log" 2>&1 &
  else
    CUDA_VISIBLE_DEVICES=$dev HIP_VISIBLE_DEVICES=$dev "${cmd[@]}" >"$out/shard-$i.log" 2>&1 &
  fi
  pids+=($!)
  echo "  shard $i/$n on $([[ $dev == cpu ]] && echo "the CPU" || echo "GPU $dev"): pid $!, log $out/shard-$i.log"
done
trap 'kill -TERM "${pids[@]}" 2>/dev/null' INT TERM

codes=()
for ((i = 0; i < n; ++i)); do
  while :; do
    wait "${pids[i]}"
    rc=$?
    # A trapped signal interrupts wait with 128+sig; the shard is still finishing.
    if ((rc > 128)) && kill -0 "${pids[i]}" 2>/dev/null; then continue; fi
    break
  done
  codes+=("$rc")
  echo "  shard $i/$n exited $rc"
done

missing=0
for ((i = 0; i < n; ++i)); do
  if [[ ! -s $out/shard-$i.json ]]; then
    echo "multi_gpu: shard $i/$n wrote no report (exit ${codes[i]}); the end of its log:" >&2
    tail -n 20 "$out/shard-$i.log" >&2
    missing=1
  fi
done
if ((missing)); then
  for c in "${codes[@]}"; do ((c == 2)) && exit 2; done
  exit 3
fi

reports=()
for ((i = 0; i < n; ++i)); do reports+=("$out/shard-$i.json"); done
"$pav" report merge "${reports[@]}" --json-out "$out/fleet.json"
rc=$?
echo "multi_gpu: fleet report $out/fleet.json (exit $rc)"
exit "$rc"
