// SPDX-License-Identifier: Apache-2.0
#pragma once
// The work planner ("proportional" policy, docs/numerics.md) and the uniform
// split count (section 5). The arithmetic below is PAV_HD: the GPU refresh
// kernel and the host planner share it, so their plans agree bit for bit.
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/call.hpp"
#include "kernels/limits.hpp"
#include "kernels/platform_hd.hpp"

namespace pav::kernels {

inline constexpr int kMaxUniformPartitions = 256;
inline constexpr int kDenseSplitCap = 32;

PAV_HD inline int64_t ceil_div64(int64_t a, int64_t b) { return (a + b - 1) / b; }
PAV_HD inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
PAV_HD inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

// Tiles of a raw context length; negative and zero lengths have none.
PAV_HD inline int64_t plan_tiles(int32_t len) {
  return len > 0 ? ceil_div64(int64_t(len), kTileTokens) : 0;
}

PAV_HD inline int64_t plan_capacity(int64_t num_seqs, int64_t kv_heads, int64_t max_partitions,
                                    int64_t workgroup_budget) {
  return min64(num_seqs * max_partitions, max64(num_seqs, ceil_div64(workgroup_budget, kv_heads)));
}

// Partition count of one sequence given the inclusive tile prefix sum cum.
PAV_HD inline int64_t plan_count(int64_t tiles, int64_t cum, int64_t remaining, int64_t total,
                                 int64_t max_partitions) {
  const int64_t nonempty = tiles > 0 ? 1 : 0;
  const int64_t share = cum * remaining / total - (cum - tiles) * remaining / total;
  return min64(min64(nonempty + share, tiles), max_partitions);
}

// work_info row p of a sequence with `count` partitions over `tiles` tiles.
PAV_HD inline void plan_task(int32_t* row, int32_t seq, int64_t p, int64_t tiles, int64_t count,
                             int32_t len) {
  row[0] = seq;
  row[1] = int32_t(p * tiles / count);
  row[2] = int32_t((p + 1) * tiles / count);
  row[3] = len;
}

// Freshness of one task row, the one rule of every planned launch (the CPU
// backend, the GPU check and attention) and of plan_is_fresh. Row j of sequence
// `seq`'s range [first, first + count) is fresh for the live length when it
// lies inside the capacity, names `seq`, records `live`, is non-empty, starts
// where row j-1 ends (row 0 at tile 0), and the last row ends at the live
// length's last tile. A refresh rewrites every row, so a row one left behind
// (a torn plan: another sequence's row, or this one's under an earlier split,
// whatever length it records) is stale, and so is its sequence. For a range
// that range_stale accepts.
// The other half of that rule: sequence `seq`'s reduce_info row (its range) is
// stale as a whole when the range is not inside the capacity or its count is
// negative, or it has no task though the live length has tokens. Checked first:
// only a range inside the capacity has rows to check.
PAV_HD inline bool range_stale(int64_t first, int64_t count, int64_t capacity, int32_t live) {
  return count < 0 || first < 0 || first > capacity - count || (count == 0 && live > 0);
}

PAV_HD inline bool task_row_stale(const int32_t* work, int64_t capacity, int64_t first, int64_t count, int64_t j,
                                  int32_t seq, int32_t live) {
  const int64_t i = first + j;
  if (first < 0 || i < 0 || i >= capacity) return true;
  const int32_t* row = work + 4 * i;
  if (row[0] != seq || row[3] != live || row[2] <= row[1]) return true;
  if (row[1] != (j == 0 ? 0 : work[4 * (i - 1) + 2])) return true;
  return j == count - 1 && row[2] != plan_tiles(live);
}

// Writes reduce_info [num_seqs, 2] and the task rows of work_info [capacity, 4]
// from per-request partition counts, in request order, then zeroes the padding
// slots. count_of(tiles) is called once per request, in order (both policies'
// count rules go through here).
template <class CountOf>
PAV_HD inline void plan_write(const int32_t* lens, int64_t num_seqs, int64_t capacity, CountOf count_of,
                              int32_t* work_info, int32_t* reduce_info) {
  int64_t first = 0;
  for (int64_t b = 0; b < num_seqs; ++b) {
    const int64_t tiles = plan_tiles(lens[b]);
    const int64_t count = count_of(tiles);
    reduce_info[2 * b] = int32_t(first);
    reduce_info[2 * b + 1] = int32_t(count);
    for (int64_t p = 0; p < count; ++p)
      plan_task(work_info + 4 * (first + p), int32_t(b), p, tiles, count, lens[b]);
    first += count;
  }
  for (int64_t i = first * 4; i < capacity * 4; ++i) work_info[i] = 0;
}

// Fills work_info [capacity, 4] and reduce_info [num_seqs, 2] from lens in one
// pass, padding slots zeroed. Sequential; the GPU refresh parallelises the same
// formulas.
PAV_HD inline void plan_fill(const int32_t* lens, int64_t num_seqs, int64_t max_partitions,
                             int64_t capacity, int32_t* work_info, int32_t* reduce_info) {
  int64_t sum_tiles = 0, sum_nonempty = 0;
  for (int64_t b = 0; b < num_seqs; ++b) {
    const int64_t t = plan_tiles(lens[b]);
    sum_tiles += t;
    sum_nonempty += t > 0 ? 1 : 0;
  }
  const int64_t total = max64(sum_tiles, 1);
  const int64_t remaining = capacity - sum_nonempty;
  int64_t cum = 0;
  plan_write(
      lens, num_seqs, capacity,
      [&](int64_t tiles) {
        cum += tiles;
        return plan_count(tiles, cum, remaining, total, max_partitions);
      },
      work_info, reduce_info);
}

// Uniform split count (docs/numerics.md, "The uniform split").
PAV_HD inline int dense_decode_splits(int64_t batch, int64_t kv_heads, int64_t cu) {
  const int64_t bh = max64(batch * kv_heads, 1);
  const int64_t base = min64(ceil_div64(2 * cu, bh), 8);
  int64_t boost = min64(32, ceil_div64(128, bh));
  int64_t pow2 = 1;
  while (pow2 * 2 <= boost) pow2 *= 2;
  boost = pow2;
  return int(min64(kDenseSplitCap, max64(base, boost)));
}

// proportional: docs/numerics.md, "The proportional policy", exactly. balanced: cost-aware counts
// (kernels/planner_balanced.hpp), same layout and invariants.
enum class PlanPolicy : uint8_t { proportional, balanced };

struct PlanParams {
  int64_t num_seqs = 0;
  int64_t kv_heads = 1;
  int64_t cu = 0;
  int64_t max_partitions = 0;    // 0 = cu
  int64_t workgroup_budget = 0;  // 0 = 2 * cu
  PlanPolicy policy = PlanPolicy::proportional;
  int64_t split_cost_tiles = -1;  // balanced only; -1 = kBalancedSplitCostTiles, else >= 0
  int64_t min_chunk_tiles = 0;    // balanced only; 0 = kBalancedMinChunkTiles, else >= 1
};

// Params with defaults resolved; throws std::invalid_argument naming the field
// when a value is out of range (num_seqs 1..kMaxPlanBatch, kv_heads
// 1..kMaxKvHeads, cu 1..kMaxCu, max_partitions 1..cu, budget
// 1..kMaxWorkgroupBudget, split cost and min chunk 0..kMaxPlanTiles).
PlanParams resolve(PlanParams p);

// Slots a plan of resolved params holds: plan_capacity() for proportional
// (docs/numerics.md), balanced_capacity() for balanced.
int64_t plan_capacity_of(const PlanParams& resolved);

// A non-owning view of a plan's buffers (host or device memory).
struct PlanView {
  int32_t* work_info = nullptr;    // [capacity, 4]
  int32_t* reduce_info = nullptr;  // [num_seqs, 2]
  int64_t num_seqs = 0, kv_heads = 0, max_partitions = 0, capacity = 0;
};

// A host plan. Buffers are sized once at construction; refresh() re-fills them
// in place from new lengths without allocating.
class WorkPlan {
 public:
  explicit WorkPlan(PlanParams params);
  void refresh(const int32_t* lens);  // lens has params().num_seqs entries
  const PlanParams& params() const { return params_; }
  int64_t capacity() const { return capacity_; }
  PlanView view();
  const std::vector<int32_t>& work_info() const { return work_; }
  const std::vector<int32_t>& reduce_info() const { return reduce_; }
  int64_t active_tasks() const;  // sum of counts

 private:
  PlanParams params_;
  int64_t capacity_;
  std::vector<int32_t> work_, reduce_;
};

// Structural checks of a plan's own buffers against its header: counts within
// 1..max_partitions (0 for empty rows), firsts contiguous, tiles covered in order,
// padding zero, active tasks <= capacity. Empty string when valid, else the
// first violation.
std::string check_plan_structure(const PlanView& plan);

// True when the plan was refreshed from exactly these live lengths: every row
// of every sequence's range is fresh (task_row_stale), and sequences without
// tasks have no tokens.
bool plan_is_fresh(const PlanView& plan, const int32_t* live_lens, int64_t num_seqs);

}  // namespace pav::kernels
