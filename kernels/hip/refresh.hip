// SPDX-License-Identifier: Apache-2.0
// The planner refreshes: one block rewrites work_info and reduce_info in place
// from device lengths, for either policy. They run the host planner's PAV_HD
// formulas (plan_tiles, plan_count, plan_task; the balanced steps of
// kernels/planner_balanced.hpp), so the plans agree bit for bit.
// device_common.hpp first: on AMD the runtime header must precede <cstring>.
#include "kernels/hip/device_common.hpp"
#include <stdexcept>

#include "kernels/hip/gpu_backend.hpp"
#include "kernels/planner_balanced.hpp"

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


// ---- balanced policy -----------------------------------------------------------------
constexpr int kRefreshWarps = kRefreshThreads / kWarpSize;

// Sums of a and b and the maximum of c over the block in one pass; every
// thread gets the three. red holds 3 * (kRefreshWarps + 1).
struct SumSumMax {
  int64_t a, b, c;
};
__device__ SumSumMax block_sum_sum_max(SumSumMax v, int64_t* red) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize, warps = blockDim.x / kWarpSize;
  for (int o = kWarpSize / 2; o > 0; o >>= 1) {
    v.a += PAV_SHFL_XOR(v.a, o);
    v.b += PAV_SHFL_XOR(v.b, o);
    v.c = max64(v.c, PAV_SHFL_XOR(v.c, o));
  }
  if (lane == 0) {
    red[3 * warp] = v.a;
    red[3 * warp + 1] = v.b;
    red[3 * warp + 2] = v.c;
  }
  __syncthreads();
  SumSumMax out{0, 0, 0};
  for (int w = 0; w < warps; ++w) {  // every thread, in the same order: the same result
    out.a += red[3 * w];
    out.b += red[3 * w + 1];
    out.c = max64(out.c, red[3 * w + 2]);
  }
  __syncthreads();  // red is reused
  return out;
}

// Exclusive prefix sum over the block in thread order; *total gets the sum.
// red holds kRefreshWarps + 1.
__device__ int64_t block_exclusive_scan_warps(int64_t v, int64_t* red, int64_t* total) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize, warps = blockDim.x / kWarpSize;
  int64_t inc = v;
  for (int o = 1; o < kWarpSize; o <<= 1) {
    const int64_t u = PAV_SHFL_UP(inc, o);
    if (lane >= o) inc += u;
  }
  if (lane == kWarpSize - 1) red[warp] = inc;
  __syncthreads();
  int64_t before = 0, all = 0;
  for (int w = 0; w < warps; ++w) {
    if (w < warp) before += red[w];
    all += red[w];
  }
  __syncthreads();
  *total = all;
  return before + inc - v;
}

// balanced_count_for(tiles, target, split_cost, max_count) for one target and
// many requests, without a division per request: room = target - split_cost
// and its reciprocal are taken once per probe; the quotient from the
// reciprocal is within one of the true one for tiles < 2^24 and is corrected
// exactly. Falls back to the shared rule for larger counts. GpuPlanner.*
// holds the device plans to the host's bit for bit.
struct CountProbe {
  int64_t target, split_cost, room;
  float inv_room;
};
__device__ inline CountProbe count_probe(int64_t target, int64_t split_cost) {
  const int64_t room = target - split_cost;
  return {target, split_cost, room, room >= 1 ? 1.0f / float(room) : 0.0f};
}
__device__ inline int64_t count_at(const CountProbe& c, int32_t tiles, int32_t max_count) {
  if (tiles <= 0) return 0;
  if (tiles <= c.target) return 1;
  if (c.room < 1) return kBalancedUnreachable;
  if (tiles >= (1 << 24) || c.room >= (int64_t(1) << 24))
    return balanced_count_for(tiles, c.target, c.split_cost, max_count);
  const uint32_t num = uint32_t(tiles) - 1u, den = uint32_t(c.room);
  uint32_t q = uint32_t(float(num) * c.inv_room);
  // q is within one of num / den, so q * den <= num + den < 2^25 and
  // (q + 1) * den < 2^26: the products are exact in 32 bits.
  if (q * den > num) --q;                           // one too many
  else if ((q + 1u) * den <= num) ++q;              // one too few
  const int64_t count = int64_t(q) + 1;             // ceil(tiles / room)
  return count <= max_count ? count : kBalancedUnreachable;
}

__global__ void __launch_bounds__(kRefreshThreads)
balanced_refresh_kernel(const int32_t* __restrict__ lens, int num_seqs, int64_t max_partitions, int64_t capacity,
                        int64_t task_budget, int64_t split_cost, int64_t min_chunk, int32_t* __restrict__ work,
                        int32_t* __restrict__ reduce) {
  __shared__ int64_t red[3 * (kRefreshWarps + 1)];
  __shared__ int32_t s_tiles[kMaxPlanBatch], s_most[kMaxPlanBatch];
  __shared__ int s_fits[kRefreshWarps];
  static_assert(kRefreshWarps <= kWarpSize, "one ballot covers every warp's flag");
  const int t = threadIdx.x;
  // Thread t owns the contiguous sequences [b0, b1): prefix order is kept.
  const int per = (num_seqs + int(blockDim.x) - 1) / int(blockDim.x);
  const int b0 = min(t * per, num_seqs), b1 = min(b0 + per, num_seqs);
  int64_t tiles[kSeqsPerThread], most[kSeqsPerThread];
  SumSumMax mine{0, 0, 0};  // tiles, nonempty requests, longest request
#pragma unroll
  for (int k = 0; k < kSeqsPerThread; ++k) {
    tiles[k] = b0 + k < b1 ? plan_tiles(lens[b0 + k]) : 0;
    most[k] = balanced_max_count(tiles[k], max_partitions, min_chunk);
    mine.a += tiles[k];
    mine.b += tiles[k] > 0 ? 1 : 0;
    mine.c = max64(mine.c, tiles[k]);
    if (b0 + k < b1) {
      s_tiles[b0 + k] = int32_t(tiles[k]);  // <= ceil(INT32_MAX / 256) tiles
      s_most[b0 + k] = int32_t(most[k]);    // <= max_partitions
    }
  }
  const SumSumMax all = block_sum_sum_max(mine, red);  // its barrier also publishes s_tiles, s_most
  const int64_t sum_tiles = all.a, nonempty = all.b, max_tiles = all.c;
  const int64_t limit = balanced_task_limit(capacity, nonempty, task_budget);
  // The smallest target in [lo, hi] whose tasks fit `lim` (hi always fits).
  // Each round every warp tests one target of an even spread over the range
  // (warp 0 tests lo), so a round narrows it about warps-fold where a binary
  // step halves it. The task count only falls as the target rises, so this
  // finds the host's binary search's answer. Every thread ends with the same lo.
  const int lane = t % kWarpSize, warp = t / kWarpSize, warps = int(blockDim.x) / kWarpSize;
  auto run = [&](BalancedSearch search, int64_t lim) {
    int64_t lo = search.lo, hi = search.hi;
    while (lo < hi) {
      const int64_t span = hi - lo;
      const CountProbe probe = count_probe(lo + span * warp / warps, split_cost);
      // Four requests per lane at a time, summed apart: their chains of
      // dependent steps overlap.
      int64_t count = 0, c1 = 0, c2 = 0, c3 = 0;
      int b = lane;
      for (; b + 3 * kWarpSize < num_seqs; b += 4 * kWarpSize) {
        count += count_at(probe, s_tiles[b], s_most[b]);
        c1 += count_at(probe, s_tiles[b + kWarpSize], s_most[b + kWarpSize]);
        c2 += count_at(probe, s_tiles[b + 2 * kWarpSize], s_most[b + 2 * kWarpSize]);
        c3 += count_at(probe, s_tiles[b + 3 * kWarpSize], s_most[b + 3 * kWarpSize]);
      }
      for (; b < num_seqs; b += kWarpSize) count += count_at(probe, s_tiles[b], s_most[b]);
      count += c1 + c2 + c3;
      for (int o = kWarpSize / 2; o > 0; o >>= 1) count += PAV_SHFL_XOR(count, o);
      if (lane == 0) s_fits[warp] = count <= lim ? 1 : 0;
      __syncthreads();
      // The first warp whose target fits: one ballot over the flags (warps <=
      // kWarpSize), the same answer in every warp.
      const unsigned long long fits = PAV_BALLOT(lane < warps && s_fits[lane] != 0);
      const int first = fits ? __ffsll(static_cast<long long>(fits)) - 1 : warps;
      const int64_t next_hi = first < warps ? lo + span * first / warps : hi;
      const int64_t next_lo = first == 0 ? lo : lo + span * (first - 1) / warps + 1;
      __syncthreads();  // s_fits is rewritten by the next round
      lo = next_lo;
      hi = next_hi;
    }
    return lo;
  };
  int64_t target = run(balanced_search_init(sum_tiles, max_tiles, nonempty, limit), limit);
  if (capacity > limit && balanced_use_second_wave(target, sum_tiles, task_budget))
    target = run(balanced_second_wave_search_init(sum_tiles, target, nonempty, task_budget), capacity);
  const bool split = target + split_cost < max_tiles;
  int64_t count[kSeqsPerThread];
  int64_t my_count = 0;
#pragma unroll
  for (int k = 0; k < kSeqsPerThread; ++k) {
    count[k] = split ? balanced_count_for(tiles[k], target, split_cost, most[k]) : (tiles[k] > 0 ? 1 : 0);
    my_count += count[k];
  }
  int64_t all_tasks = 0;
  int64_t first = block_exclusive_scan_warps(my_count, red, &all_tasks);
  // Each sequence's first task, in shared memory (s_most is free now), so the
  // task rows can be written one per thread: a long request's tasks written by
  // its own thread alone would serialize the refresh.
  int32_t* s_first = s_most;
#pragma unroll
  for (int k = 0; k < kSeqsPerThread; ++k) {
    const int b = b0 + k;
    if (b >= b1) break;
    reduce[2 * b] = int32_t(first);
    reduce[2 * b + 1] = int32_t(count[k]);
    s_first[b] = int32_t(first);
    first += count[k];
  }
  __syncthreads();
  for (int64_t i = t; i < all_tasks; i += blockDim.x) {
    // The task's sequence: the last b whose first task is <= i (sequences with
    // no task share the next one's first, so the last of equals owns it).
    int lo = 0, hi = num_seqs - 1;
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (s_first[mid] <= i)
        lo = mid;
      else
        hi = mid - 1;
    }
    const int64_t end = lo + 1 < num_seqs ? s_first[lo + 1] : all_tasks;
    plan_task(work + 4 * i, int32_t(lo), i - s_first[lo], s_tiles[lo], end - s_first[lo], lens[lo]);
  }
  for (int64_t i = all_tasks * 4 + t; i < capacity * 4; i += blockDim.x) work[i] = 0;
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

void refresh_balanced_plan(const int32_t* dev_lens, int64_t num_seqs, int64_t max_partitions, int64_t capacity,
                           int64_t task_budget, int64_t split_cost, int64_t min_chunk, int32_t* dev_work,
                           int32_t* dev_reduce, StreamHandle stream) {
  if (num_seqs < 1 || num_seqs > kMaxPlanBatch)
    throw std::invalid_argument("refresh_balanced_plan: num_seqs = " + std::to_string(num_seqs) + " outside 1.." +
                                std::to_string(kMaxPlanBatch));
  if (max_partitions < 1 || min_chunk < 1 || split_cost < 0 || task_budget < 1)
    throw std::invalid_argument("refresh_balanced_plan: max_partitions, min_chunk, task_budget >= 1 and "
                                "split_cost >= 0 required");
  if (capacity < num_seqs)
    throw std::invalid_argument("refresh_balanced_plan: capacity = " + std::to_string(capacity) +
                                " below num_seqs");
  // As many whole warps as sequences, at least 512 threads: each warp tests
  // one target per round of the search.
  const int64_t warps_needed = (num_seqs + kWarpSize - 1) / kWarpSize;
  const int threads = int(min64(kRefreshThreads, max64(512, warps_needed * kWarpSize)));
  balanced_refresh_kernel<<<1, threads, 0, static_cast<hipStream_t>(stream)>>>(
      dev_lens, int(num_seqs), max_partitions, capacity, task_budget, split_cost, min_chunk, dev_work, dev_reduce);
  check_launch("refresh_balanced_plan");
}

void refresh_plan(const int32_t* dev_lens, const PlanParams& resolved, int64_t capacity, int32_t* dev_work,
                  int32_t* dev_reduce, StreamHandle stream) {
  if (capacity != plan_capacity_of(resolved))
    throw std::invalid_argument("refresh_plan: capacity = " + std::to_string(capacity) + ", the plan's params give " +
                                std::to_string(plan_capacity_of(resolved)));
  if (resolved.policy == PlanPolicy::balanced)
    refresh_balanced_plan(dev_lens, resolved.num_seqs, resolved.max_partitions, capacity,
                          balanced_task_budget(resolved.workgroup_budget, resolved.kv_heads), resolved.split_cost_tiles,
                          resolved.min_chunk_tiles, dev_work, dev_reduce, stream);
  else
    refresh_plan(dev_lens, resolved.num_seqs, resolved.max_partitions, capacity, dev_work, dev_reduce, stream);
}

}  // namespace pav::kernels::gpu
