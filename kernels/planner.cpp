// SPDX-License-Identifier: Apache-2.0
#include "kernels/planner.hpp"

#include "kernels/planner_balanced.hpp"

#include <stdexcept>

namespace pav::kernels {

PlanParams resolve(PlanParams p) {
  auto bad = [](const std::string& field, int64_t v, const std::string& rule) {
    throw std::invalid_argument(field + " = " + std::to_string(v) + ": " + rule);
  };
  const std::string cu_range = "must be in 1.." + std::to_string(kMaxCu);
  // Every product the planners form stays inside int64 because of these bounds
  // (kernels/limits.hpp): none is checked again per request.
  if (p.num_seqs < 1 || p.num_seqs > kMaxPlanBatch) bad("num_seqs", p.num_seqs, "must be in 1..4096");
  if (p.kv_heads < 1 || p.kv_heads > kMaxKvHeads)
    bad("kv_heads", p.kv_heads, "must be in 1.." + std::to_string(kMaxKvHeads));
  if (p.cu < 1 || p.cu > kMaxCu) bad("cu", p.cu, cu_range);
  if (p.max_partitions == 0) p.max_partitions = p.cu;
  if (p.max_partitions < 1 || p.max_partitions > p.cu)
    bad("max_partitions", p.max_partitions, "must be in 1..cu");
  if (p.workgroup_budget == 0) p.workgroup_budget = 2 * p.cu;
  if (p.workgroup_budget < 1 || p.workgroup_budget > kMaxWorkgroupBudget)
    bad("workgroup_budget", p.workgroup_budget, "must be in 1.." + std::to_string(kMaxWorkgroupBudget));
  if (p.split_cost_tiles == -1) p.split_cost_tiles = kBalancedSplitCostTiles;
  if (p.split_cost_tiles < 0 || p.split_cost_tiles > kMaxPlanTiles)
    bad("split_cost_tiles", p.split_cost_tiles, "must be in 0.." + std::to_string(kMaxPlanTiles));
  if (p.min_chunk_tiles == 0) p.min_chunk_tiles = kBalancedMinChunkTiles;
  if (p.min_chunk_tiles < 1 || p.min_chunk_tiles > kMaxPlanTiles)
    bad("min_chunk_tiles", p.min_chunk_tiles, "must be in 1.." + std::to_string(kMaxPlanTiles));
  return p;
}

int64_t plan_capacity_of(const PlanParams& p) {
  if (p.policy == PlanPolicy::balanced)
    return balanced_capacity(p.num_seqs, p.kv_heads, p.max_partitions, p.workgroup_budget);
  return plan_capacity(p.num_seqs, p.kv_heads, p.max_partitions, p.workgroup_budget);
}

WorkPlan::WorkPlan(PlanParams params)
    : params_(resolve(params)),
      capacity_(plan_capacity_of(params_)),
      work_(size_t(capacity_) * 4, 0),
      reduce_(size_t(params_.num_seqs) * 2, 0) {}

void WorkPlan::refresh(const int32_t* lens) {
  if (params_.policy == PlanPolicy::balanced) {
    balanced_fill(lens, params_.num_seqs, params_.max_partitions, capacity_,
                  balanced_task_budget(params_.workgroup_budget, params_.kv_heads),
                  params_.split_cost_tiles, params_.min_chunk_tiles, work_.data(), reduce_.data());
    return;
  }
  plan_fill(lens, params_.num_seqs, params_.max_partitions, capacity_, work_.data(),
            reduce_.data());
}

PlanView WorkPlan::view() {
  return PlanView{work_.data(), reduce_.data(), params_.num_seqs, params_.kv_heads,
                  params_.max_partitions, capacity_};
}

int64_t WorkPlan::active_tasks() const {
  int64_t n = 0;
  for (int64_t b = 0; b < params_.num_seqs; ++b) n += reduce_[2 * b + 1];
  return n;
}

std::string check_plan_structure(const PlanView& plan) {
  const int32_t* w = plan.work_info;
  const int32_t* r = plan.reduce_info;
  int64_t expect_first = 0;
  for (int64_t b = 0; b < plan.num_seqs; ++b) {
    const int64_t first = r[2 * b], count = r[2 * b + 1];
    const std::string at = "reduce_info[" + std::to_string(b) + "]";
    if (first != expect_first) return at + ".first = " + std::to_string(first) + ", expected " + std::to_string(expect_first);
    if (count < 0 || count > plan.max_partitions)
      return at + ".count = " + std::to_string(count) + " outside 0..max_partitions";
    if (first + count > plan.capacity) return at + " runs past capacity " + std::to_string(plan.capacity);
    int64_t next_tile = 0;
    for (int64_t p = 0; p < count; ++p) {
      const int32_t* row = w + 4 * (first + p);
      const std::string wat = "work_info[" + std::to_string(first + p) + "]";
      if (row[0] != b) return wat + ".seq = " + std::to_string(row[0]) + ", expected " + std::to_string(b);
      if (row[1] != next_tile || row[2] <= row[1])
        return wat + " tiles [" + std::to_string(row[1]) + ", " + std::to_string(row[2]) + ") not contiguous";
      if (row[3] != w[4 * first + 3]) return wat + ".len differs within sequence " + std::to_string(b);
      next_tile = row[2];
    }
    if (count > 0 && next_tile != plan_tiles(w[4 * first + 3]))
      return "sequence " + std::to_string(b) + " covers " + std::to_string(next_tile) + " tiles of " +
             std::to_string(plan_tiles(w[4 * first + 3]));
    expect_first += count;
  }
  for (int64_t i = expect_first * 4; i < plan.capacity * 4; ++i)
    if (w[i] != 0) return "padding work_info[" + std::to_string(i / 4) + "] is not zero";
  return {};
}

bool plan_is_fresh(const PlanView& plan, const int32_t* live_lens, int64_t num_seqs) {
  if (num_seqs != plan.num_seqs) return false;
  for (int64_t b = 0; b < num_seqs; ++b) {
    const int64_t first = plan.reduce_info[2 * b], count = plan.reduce_info[2 * b + 1];
    if (range_stale(first, count, plan.capacity, live_lens[b])) return false;
    for (int64_t j = 0; j < count; ++j)
      if (task_row_stale(plan.work_info, plan.capacity, first, count, j, int32_t(b), live_lens[b])) return false;
  }
  return true;
}

}  // namespace pav::kernels
