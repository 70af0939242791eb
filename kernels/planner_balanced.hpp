// SPDX-License-Identifier: Apache-2.0
#pragma once
// The "balanced" planner policy: cost-aware split counts over the same plan
// layout as "proportional" (docs/numerics.md). Same work_info /
// reduce_info format, same tile boundaries within a request (plan_task); the
// partition counts differ, and the capacity holds one wave plus one task per
// request (balanced_capacity).
//
// Cost model (one wave of workgroups: Hkv * ceil(budget / Hkv) ~ the workgroup
// budget, what runs at once). Attention time is set by the costliest task, in
// tiles. Splitting a request into k > 1 tasks costs each of its tasks
// a fixed `split_cost` tiles more (the partial write, its m/l, and its share
// of the reduce read). A request of t tiles in k tasks costs
// ceil(t / k) + (k > 1 ? split_cost : 0).
//   1. No split when the nonempty requests already fill the budget per head
//      (nonempty >= task budget): every request gets one partition.
//   2. Otherwise the smallest cost target v (tiles) that fits: each request
//      takes the fewest partitions that keep its cost <= v (1 when t <= v,
//      else ceil(t / (v - split_cost)), at most max_partitions and at most
//      t / min_chunk), and the partitions sum to at most the task limit. A
//      binary search over v: the plan with the cheapest critical path, and
//      requests off that path stay whole.
//   3. A second wave, when one wave leaves slots idle: if the one-wave plan's
//      critical path v is more than 1.5 times the mean work per slot of a wave
//      (sum_tiles / task budget), a few long requests hold the wave while the
//      other slots finish early; then the target search runs again over
//      [ceil(sum_tiles / task budget), longest] with the whole capacity (one
//      wave plus one task per request) as the limit, and the hardware
//      backfills the extra tasks into the idle slots. Below that ratio the
//      tasks are near-equal and a second wave would only add a wave's tail.
//   4. When splitting saves no more than one split cost (v + split_cost >=
//      longest request), nothing is split: the reduce is not worth its launch.
// A request with count 1 is written straight to the output by a kernel that
// honours it (plan_row_is_direct); a plan where no row is split needs no
// reduce at all (plan_needs_reduce).
//
// Everything below is PAV_HD: the host planner runs balanced_fill(); a GPU
// refresh can run the same steps in parallel (BalancedSearch exposes the
// search one probe at a time, each probe a sum over requests).
#include <cstdint>

#include "kernels/planner.hpp"

namespace pav::kernels {

// Defaults, in 256-token tiles. A tile of D = 128 K+V fp8 is 64 KiB; a split's
// partial (rows * D * 2 bytes + m, l) is written once and read once by the
// reduce, and the reduce launch itself costs about a tile's time per block.
inline constexpr int64_t kBalancedSplitCostTiles = 1;
inline constexpr int64_t kBalancedMinChunkTiles = 2;  // 512 tokens

// Tasks per KV head the workgroup budget allows.
PAV_HD inline int64_t balanced_task_budget(int64_t workgroup_budget, int64_t kv_heads) {
  return ceil_div64(workgroup_budget, kv_heads);
}

// Capacity of a balanced plan: one wave of tasks per head (the proportional
// plan's ceil(budget / Hkv)) plus one per request, at most max_partitions per
// request, so a batch that fills a wave by itself can still split its long
// requests into a second wave (step 3).
PAV_HD inline int64_t balanced_capacity(int64_t num_seqs, int64_t kv_heads, int64_t max_partitions,
                                        int64_t workgroup_budget) {
  return min64(num_seqs * max_partitions, num_seqs + balanced_task_budget(workgroup_budget, kv_heads));
}

// Step 3's test: the one-wave target is more than 1.5 times the mean work per
// slot of a wave.
PAV_HD inline bool balanced_use_second_wave(int64_t one_wave_target, int64_t sum_tiles, int64_t task_budget) {
  return 2 * one_wave_target > 3 * ceil_div64(sum_tiles, task_budget);
}

// Tasks the one-wave plan may use: never more than capacity; only more than
// one per nonempty request when the budget leaves room.
PAV_HD inline int64_t balanced_task_limit(int64_t capacity, int64_t nonempty, int64_t task_budget) {
  return min64(capacity, max64(nonempty, task_budget));
}

// Most partitions a request may get: each task at least min_chunk tiles (a
// shorter request stays whole), at most max_partitions.
PAV_HD inline int64_t balanced_max_count(int64_t tiles, int64_t max_partitions, int64_t min_chunk) {
  if (tiles <= 0) return 0;
  return max64(1, min64(max_partitions, tiles / min_chunk));
}

// Cost of a request of `tiles` in `count` partitions: its longest task, plus
// the split cost when it is split.
PAV_HD inline int64_t balanced_cost(int64_t tiles, int64_t count, int64_t split_cost) {
  if (count <= 0) return 0;
  return ceil_div64(tiles, count) + (count > 1 ? split_cost : 0);
}

// A count no task limit reaches: the target cannot be met within the caps.
// 4096 of them still sum without overflow.
inline constexpr int64_t kBalancedUnreachable = int64_t(1) << 40;

// Fewest partitions that keep the request's cost <= target, within
// max_count; kBalancedUnreachable when no count does.
PAV_HD inline int64_t balanced_count_for(int64_t tiles, int64_t target, int64_t split_cost, int64_t max_count) {
  if (tiles <= 0) return 0;
  if (tiles <= target) return 1;
  const int64_t room = target - split_cost;  // longest task a split request may have
  if (room < 1) return kBalancedUnreachable;
  // 32-bit division where it fits (always, for int32 lengths): a 64-bit one is
  // a long subroutine on a GPU, and the search calls this per request per probe.
  const int64_t count = tiles < (int64_t(1) << 31) && room < (int64_t(1) << 31)
                            ? int64_t((uint32_t(tiles) - 1u) / uint32_t(room) + 1u)
                            : ceil_div64(tiles, room);
  return count <= max_count ? count : kBalancedUnreachable;
}

// The search for the cheapest target: the smallest v in [lo, hi] whose counts
// fit the task limit; hi always fits (every request whole).
struct BalancedSearch {
  int64_t lo = 0, hi = 0;
  PAV_HD bool done() const { return lo >= hi; }
  PAV_HD int64_t probe() const { return lo + (hi - lo) / 2; }
  // tasks: sum of balanced_count_for(.., probe(), ..) over the requests.
  PAV_HD void step(int64_t tasks, int64_t limit) {
    const int64_t mid = probe();
    if (tasks <= limit)
      hi = mid;
    else
      lo = mid + 1;
  }
};

PAV_HD inline BalancedSearch balanced_search_init(int64_t sum_tiles, int64_t max_tiles, int64_t nonempty,
                                                  int64_t limit) {
  BalancedSearch s;
  if (nonempty == 0) return s;  // no request: counts are all 0
  s.hi = max_tiles;
  // No room: one partition each. Otherwise every task of cost <= v covers at
  // most v tiles, so the limit needs v >= sum_tiles / limit.
  s.lo = limit <= nonempty ? max_tiles : max64(1, ceil_div64(sum_tiles, limit));
  return s;
}

// The second-wave search (step 3): targets from the mean work per slot of a
// wave (finer splits only add tasks no wave runs at once) up to the one-wave
// target, which fits (the capacity holds the one-wave plan).
PAV_HD inline BalancedSearch balanced_second_wave_search_init(int64_t sum_tiles, int64_t one_wave_target,
                                                              int64_t nonempty, int64_t task_budget) {
  BalancedSearch s;
  if (nonempty == 0) return s;
  s.hi = one_wave_target;
  s.lo = min64(one_wave_target, max64(1, ceil_div64(sum_tiles, task_budget)));
  return s;
}

// True when the plan's request b writes its output directly (one partition):
// no partial, no reduce for that row.
PAV_HD inline bool plan_row_is_direct(const int32_t* reduce_info, int64_t b) {
  return reduce_info[2 * b + 1] == 1;
}

// True when some request is split, i.e. the reduce has work to do.
PAV_HD inline bool plan_needs_reduce(const int32_t* reduce_info, int64_t num_seqs) {
  for (int64_t b = 0; b < num_seqs; ++b)
    if (reduce_info[2 * b + 1] > 1) return true;
  return false;
}

// Fills work_info [capacity, 4] and reduce_info [num_seqs, 2] with the
// balanced plan, padding zeroed. Sequential; a few passes over lens per probe,
// no allocation. split_cost >= 0, min_chunk >= 1, capacity >= num_seqs.
// Partitions the whole batch takes at `target` (step 2's sum).
PAV_HD inline int64_t balanced_tasks_at(const int32_t* lens, int64_t num_seqs, int64_t target,
                                        int64_t max_partitions, int64_t split_cost, int64_t min_chunk) {
  int64_t tasks = 0;
  for (int64_t b = 0; b < num_seqs; ++b) {
    const int64_t t = plan_tiles(lens[b]);
    tasks += balanced_count_for(t, target, split_cost, balanced_max_count(t, max_partitions, min_chunk));
  }
  return tasks;
}

// Runs a search to its end: the smallest target in range whose tasks fit `limit`.
PAV_HD inline int64_t balanced_search_run(BalancedSearch search, const int32_t* lens, int64_t num_seqs,
                                          int64_t limit, int64_t max_partitions, int64_t split_cost,
                                          int64_t min_chunk) {
  while (!search.done())
    search.step(balanced_tasks_at(lens, num_seqs, search.probe(), max_partitions, split_cost, min_chunk), limit);
  return search.lo;
}

PAV_HD inline void balanced_fill(const int32_t* lens, int64_t num_seqs, int64_t max_partitions,
                                 int64_t capacity, int64_t task_budget, int64_t split_cost,
                                 int64_t min_chunk, int32_t* work_info, int32_t* reduce_info) {
  int64_t sum_tiles = 0, nonempty = 0, max_tiles = 0;
  for (int64_t b = 0; b < num_seqs; ++b) {
    const int64_t t = plan_tiles(lens[b]);
    sum_tiles += t;
    nonempty += t > 0 ? 1 : 0;
    max_tiles = max64(max_tiles, t);
  }
  const int64_t limit = balanced_task_limit(capacity, nonempty, task_budget);
  int64_t target = balanced_search_run(balanced_search_init(sum_tiles, max_tiles, nonempty, limit), lens, num_seqs,
                                       limit, max_partitions, split_cost, min_chunk);
  if (capacity > limit && balanced_use_second_wave(target, sum_tiles, task_budget))
    target = balanced_search_run(balanced_second_wave_search_init(sum_tiles, target, nonempty, task_budget),
                                 lens, num_seqs, capacity, max_partitions, split_cost, min_chunk);
  const bool split = target + split_cost < max_tiles;
  plan_write(
      lens, num_seqs, capacity,
      [&](int64_t t) -> int64_t {
        if (!split) return t > 0 ? 1 : 0;
        return balanced_count_for(t, target, split_cost, balanced_max_count(t, max_partitions, min_chunk));
      },
      work_info, reduce_info);
}

}  // namespace pav::kernels
