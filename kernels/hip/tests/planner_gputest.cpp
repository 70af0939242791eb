// SPDX-License-Identifier: Apache-2.0
// The device planner refresh against the host planner, bit for bit.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <climits>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/hip/gpu_backend.hpp"
#include "kernels/hip/tests/gpu_test_support.hpp"
#include "kernels/planner.hpp"
#include "properties/gen/gen.hpp"

namespace pav::kernels::gpu::testing {
namespace {

// Refreshes a device plan (buffers pre-filled with garbage) and the host plan
// from the same lengths; returns an empty string when they agree exactly.
std::string compare_plans(const std::vector<int32_t>& lens, PlanParams params) {
  WorkPlan host(params);
  host.refresh(lens.data());
  DevicePlan dev(params);
  DeviceBuffer dlens(lens.size() * 4);
  copy_to_device(dlens.data(), lens.data(), lens.size() * 4);
  dev.refresh(dlens.as<int32_t>());
  std::vector<int32_t> w, r;
  dev.download(w, r);
  for (size_t i = 0; i < r.size(); ++i)
    if (r[i] != host.reduce_info()[i])
      return "reduce_info[" + std::to_string(i / 2) + "][" + std::to_string(i % 2) + "] = " + std::to_string(r[i]) +
             ", host " + std::to_string(host.reduce_info()[i]);
  for (size_t i = 0; i < w.size(); ++i)
    if (w[i] != host.work_info()[i])
      return "work_info[" + std::to_string(i / 4) + "][" + std::to_string(i % 4) + "] = " + std::to_string(w[i]) +
             ", host " + std::to_string(host.work_info()[i]);
  return {};
}

RC_GTEST_PROP(GpuPlanner, RefreshEqualsHostPlanBitForBit, ()) {
  const std::vector<int32_t> lens = *props::gen_plan_lengths(kMaxPlanBatch);
  PlanParams p;
  p.num_seqs = int64_t(lens.size());
  p.kv_heads = *rc::gen::inRange(1, 9);
  p.cu = *rc::gen::element<int64_t>(1, 8, 80, 132, 304);
  p.max_partitions = *rc::gen::inRange<int64_t>(0, p.cu + 1);
  p.workgroup_budget = *rc::gen::element<int64_t>(0, 1, 7, 1000, 100000);
  const std::string diff = compare_plans(lens, p);
  RC_ASSERT(diff.empty());
}

// The balanced policy's device refresh (both searches, the second wave, the
// no-split rule) against WorkPlan's balanced plan, bit for bit.
RC_GTEST_PROP(GpuPlanner, BalancedRefreshEqualsHostPlanBitForBit, ()) {
  const std::vector<int32_t> lens = *props::gen_plan_lengths(kMaxPlanBatch);
  PlanParams p;
  p.policy = PlanPolicy::balanced;
  p.num_seqs = int64_t(lens.size());
  p.kv_heads = *rc::gen::inRange(1, 9);
  p.cu = *rc::gen::element<int64_t>(1, 8, 80, 132, 304);
  p.max_partitions = *rc::gen::inRange<int64_t>(0, p.cu + 1);
  p.workgroup_budget = *rc::gen::element<int64_t>(0, 1, 7, 264, 1000, 100000);
  p.split_cost_tiles = *rc::gen::element<int64_t>(-1, 0, 1, 3);
  p.min_chunk_tiles = *rc::gen::element<int64_t>(0, 1, 2, 5);
  RC_LOG() << "hkv " << p.kv_heads << " cu " << p.cu << " max_partitions " << p.max_partitions << " budget "
           << p.workgroup_budget << " split_cost " << p.split_cost_tiles << " min_chunk " << p.min_chunk_tiles << "\n";
  const std::string diff = compare_plans(lens, p);
  RC_LOG() << diff << "\n";
  RC_ASSERT(diff.empty());
}

// Trace-like batches where the balanced plan splits and takes the second wave
// (a few long requests beside many short ones) and where it does not (equal
// lengths), at Hkv 1 and 8, batch 20..4096.
TEST(GpuPlanner, BalancedRefreshOnTraceLikeBatches) {
  const uint64_t seed = 20251201;
  std::printf("seed %llu\n", (unsigned long long)seed);
  std::mt19937_64 rng(seed);
  for (int batch : {20, 32, 256, 4096})
    for (int64_t hkv : {1, 8})
      for (int shape = 0; shape < 3; ++shape) {
        std::vector<int32_t> lens(static_cast<size_t>(batch), 0);
        for (auto& x : lens) {
          if (shape == 0) x = 32768;                                          // equal
          else if (shape == 1) x = int32_t(1000 + rng() % 7000);             // short, uneven
          else x = rng() % 8 == 0 ? int32_t(100000 + rng() % 700000) : int32_t(1000 + rng() % 7000);  // long tail
        }
        PlanParams p;
        p.policy = PlanPolicy::balanced;
        p.num_seqs = batch;
        p.kv_heads = hkv;
        p.cu = 132;
        EXPECT_EQ(compare_plans(lens, p), "") << "batch " << batch << " hkv " << hkv << " shape " << shape;
      }
}

TEST(GpuPlanner, FullBatchOfBoundaryNegativeAndHugeLengths) {
  const uint64_t seed = 20240601;
  std::printf("seed %llu\n", (unsigned long long)seed);
  std::mt19937_64 rng(seed);
  std::vector<int32_t> pool = props::boundary_lengths();
  for (int32_t x : {0, -1, -256, INT_MIN, INT_MAX, INT_MAX - 1, 1 << 30}) pool.push_back(x);
  std::vector<int32_t> lens(kMaxPlanBatch);
  for (auto& x : lens) x = pool[rng() % pool.size()];
  for (PlanPolicy policy : {PlanPolicy::proportional, PlanPolicy::balanced})
    for (int64_t cu : {8, 132, 304})
      for (int64_t hkv : {1, 8}) {
        PlanParams p;
        p.policy = policy;
        p.num_seqs = kMaxPlanBatch;
        p.kv_heads = hkv;
        p.cu = cu;
        const char* name = policy == PlanPolicy::balanced ? "balanced" : "proportional";
        EXPECT_EQ(compare_plans(lens, p), "") << name << " cu " << cu << " hkv " << hkv;
        p.max_partitions = 1;
        EXPECT_EQ(compare_plans(lens, p), "") << name << " cu " << cu << " hkv " << hkv << " max_partitions 1";
      }
}

TEST(GpuPlanner, SingleSequenceAndAllEmpty) {
  for (PlanPolicy policy : {PlanPolicy::proportional, PlanPolicy::balanced}) {
    for (int32_t len : {0, -7, 1, 256, 257, 200003, INT_MAX}) {
      PlanParams p;
      p.policy = policy;
      p.num_seqs = 1;
      p.cu = 132;
      EXPECT_EQ(compare_plans({len}, p), "") << "len " << len;
    }
    PlanParams p;
    p.policy = policy;
    p.num_seqs = 100;
    p.cu = 132;
    EXPECT_EQ(compare_plans(std::vector<int32_t>(100, 0), p), "");
  }
}

// Refreshing in place rewrites every slot: a second refresh from shorter
// lengths leaves no task of the first behind.
TEST(GpuPlanner, RefreshInPlaceLeavesNothingOfThePreviousPlan) {
  for (PlanPolicy policy : {PlanPolicy::proportional, PlanPolicy::balanced}) {
    PlanParams params;
    params.policy = policy;
    params.num_seqs = 6;
    params.cu = 132;
    const std::vector<int32_t> a = {200003, 4099, 65537, 3, 2305, 700}, b = {1, 0, 257, 3, 0, 2};
    DevicePlan dev(params);
    DeviceBuffer dlens(a.size() * 4);
    copy_to_device(dlens.data(), a.data(), a.size() * 4);
    dev.refresh(dlens.as<int32_t>());
    copy_to_device(dlens.data(), b.data(), b.size() * 4);
    dev.refresh(dlens.as<int32_t>());
    std::vector<int32_t> w, r;
    dev.download(w, r);
    WorkPlan host(params);
    host.refresh(b.data());
    EXPECT_EQ(w, host.work_info());
    EXPECT_EQ(r, host.reduce_info());
  }
}

// The refresh entry refuses a capacity its params do not give (a balanced
// plan's buffers are larger than a proportional one's).
TEST(GpuPlanner, RefreshRefusesACapacityItsParamsDoNotGive) {
  PlanParams p;
  p.policy = PlanPolicy::balanced;
  p.num_seqs = 4;
  p.cu = 132;
  const PlanParams r = resolve(p);
  const int64_t cap = plan_capacity_of(r);
  DeviceBuffer lens(16), work(size_t(cap + 1) * 16), reduce(32);
  EXPECT_THROW(refresh_plan(lens.as<int32_t>(), r, cap - 1, work.as<int32_t>(), reduce.as<int32_t>(), nullptr),
               std::invalid_argument);
  EXPECT_THROW(refresh_plan(lens.as<int32_t>(), r, cap + 1, work.as<int32_t>(), reduce.as<int32_t>(), nullptr),
               std::invalid_argument);
}

}  // namespace
}  // namespace pav::kernels::gpu::testing
