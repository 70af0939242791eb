// SPDX-License-Identifier: Apache-2.0
// The plan freshness check (decode_common.hpp lists the decode files).
#include "kernels/hip/decode_common.hpp"

namespace pav::kernels::gpu {
namespace {

// ---- freshness ----------------------------------------------------------------------------
// One block: the CPU backend's freshness rules over the whole plan, written as
// status words {stale flag, stale tasks, stale rows, stale sequences}.
__global__ void __launch_bounds__(kCheckThreads) check_kernel(const Params p, uint32_t* status) {
  __shared__ uint8_t stale[kMaxPlanBatch];
  __shared__ unsigned int n_tasks, n_rows, n_seqs;
  const int t = threadIdx.x, B = p.num_seqs;
  if (t == 0) n_tasks = n_rows = n_seqs = 0;
  for (int b = t; b < B; b += kCheckThreads) stale[b] = 0;
  __syncthreads();
  // A warp per sequence, its lanes over the rows of its range.
  const int warp = t / kWarpSize, lane = t % kWarpSize;
  for (int b = warp; b < B; b += kCheckThreads / kWarpSize) {
    const int64_t first = p.reduce_info[2 * b], count = p.reduce_info[2 * b + 1];
    const int32_t live = p.lens[b];
    if (range_stale(first, count, p.capacity, live)) {
      if (lane == 0) {
        atomicAdd(&n_rows, 1u);
        stale[b] = 1;
      }
      continue;
    }
    for (int64_t j = lane; j < count; j += kWarpSize)
      if (task_row_stale(p.work, p.capacity, first, count, j, b, live)) {
        atomicAdd(&n_tasks, 1u);
        stale[b] = 1;  // every writer writes 1
      }
  }
  __syncthreads();
  for (int b = t; b < B; b += kCheckThreads)
    if (stale[b]) atomicAdd(&n_seqs, 1u);
  __syncthreads();
  if (t == 0) {
    status[0] = (n_tasks || n_rows) ? uint32_t(DecodeStatus::stale_plan) : uint32_t(DecodeStatus::ok);
    status[1] = n_tasks;
    status[2] = n_rows;
    status[3] = n_seqs;
  }
}

}  // namespace

void launch_check(const Params& p, uint32_t* status, hipStream_t s) {
  check_kernel<<<1, kCheckThreads, 0, s>>>(p, status);
  check_launch("plan freshness check");
}

}  // namespace pav::kernels::gpu
