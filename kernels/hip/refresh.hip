// The planner refresh: one block rewrites work_info and reduce_info in place
// from device lengths. It runs the host planner's PAV_HD formulas
// (plan_tiles, plan_count, plan_task), so the plans agree bit for bit.
// device_common.hpp first: on AMD the runtime header must precede <cstring>.
#include "kernels/hip/device_common.hpp"
#include <stdexcept>

#include "kernels/hip/gpu_backend.hpp"

namespace pav::kernels::gpu {
namespace {

constexpr int kRefreshThreads = 1024;
constexpr int kSeqsPerThread = (kMaxPlanBatch + kRefreshThreads - 1) / kRefreshThreads;

// Exclusive prefix sum over the block (Hillis-Steele in shared memory, 64-bit);
// returns this thread's exclusive prefix and writes the total to *total.
__device__ int64_t block_exclusive_scan(int64_t v, int64_t* buf, int64_t* total) {
  const int t = threadIdx.x;
  buf[t] = v;
  __syncthreads();
  for (int o = 1; o < kRefreshThreads; o <<= 1) {
    const int64_t add = t >= o ? buf[t - o] : 0;
    __syncthreads();
    buf[t] += add;
    __syncthreads();
  }
  const int64_t inclusive = buf[t];
  *total = buf[kRefreshThreads - 1];
  __syncthreads();  // buf is reused by the next scan
  return inclusive - v;
}

__global__ void __launch_bounds__(kRefreshThreads)
refresh_kernel(const int32_t* __restrict__ lens, int num_seqs, int64_t max_partitions,
               int64_t capacity, int32_t* __restrict__ work, int32_t* __restrict__ reduce) {
  __shared__ int64_t buf[kRefreshThreads];
  const int t = threadIdx.x;
  // Thread t owns the contiguous sequences [b0, b1), so prefix order is kept.
  const int per = (num_seqs + kRefreshThreads - 1) / kRefreshThreads;
  const int b0 = min(t * per, num_seqs), b1 = min(b0 + per, num_seqs);

  int64_t tiles[kSeqsPerThread];
  int64_t my_tiles = 0, my_nonempty = 0;
#pragma unroll
  for (int k = 0; k < kSeqsPerThread; ++k) {
    const int b = b0 + k;
    tiles[k] = b < b1 ? plan_tiles(lens[b]) : 0;
    my_tiles += tiles[k];
    my_nonempty += tiles[k] > 0 ? 1 : 0;
  }
  int64_t sum_tiles = 0, sum_nonempty = 0;
  const int64_t tiles_before = block_exclusive_scan(my_tiles, buf, &sum_tiles);
  (void)block_exclusive_scan(my_nonempty, buf, &sum_nonempty);
  const int64_t total = max64(sum_tiles, 1);
  const int64_t remaining = capacity - sum_nonempty;

  int64_t count[kSeqsPerThread];
  int64_t my_count = 0, cum = tiles_before;
#pragma unroll
  for (int k = 0; k < kSeqsPerThread; ++k) {
    cum += tiles[k];
    count[k] = b0 + k < b1 ? plan_count(tiles[k], cum, remaining, total, max_partitions) : 0;
    my_count += count[k];
  }
  int64_t all_tasks = 0;
  int64_t first = block_exclusive_scan(my_count, buf, &all_tasks);

#pragma unroll
  for (int k = 0; k < kSeqsPerThread; ++k) {
    const int b = b0 + k;
    if (b >= b1) break;
    reduce[2 * b] = int32_t(first);
    reduce[2 * b + 1] = int32_t(count[k]);
    for (int64_t p = 0; p < count[k]; ++p)
      plan_task(work + 4 * (first + p), int32_t(b), p, tiles[k], count[k], lens[b]);
    first += count[k];
  }
  // Padding past the active tasks: disjoint from the rows written above.
  for (int64_t i = all_tasks * 4 + t; i < capacity * 4; i += kRefreshThreads) work[i] = 0;
}

}  // namespace

void refresh_plan(const int32_t* dev_lens, int64_t num_seqs, int64_t max_partitions,
                  int64_t capacity, int32_t* dev_work, int32_t* dev_reduce, StreamHandle stream) {
  if (num_seqs < 1 || num_seqs > kMaxPlanBatch)
    throw std::invalid_argument("refresh_plan: num_seqs = " + std::to_string(num_seqs) +
                                " outside 1.." + std::to_string(kMaxPlanBatch));
  if (max_partitions < 1)
    throw std::invalid_argument("refresh_plan: max_partitions = " + std::to_string(max_partitions));
  if (capacity < num_seqs)
    throw std::invalid_argument("refresh_plan: capacity = " + std::to_string(capacity) +
                                " below num_seqs");
  refresh_kernel<<<1, kRefreshThreads, 0, static_cast<hipStream_t>(stream)>>>(
      dev_lens, int(num_seqs), max_partitions, capacity, dev_work, dev_reduce);
  check_launch("refresh_plan");
}

}  // namespace pav::kernels::gpu
