// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "kernels/dispatch/plan_cache.hpp"

using namespace pav::kernels;
using namespace pav::kernels::dispatch;

namespace {
struct Lines {
  std::vector<std::string> lines;
  LogSink sink() {
    return [this](std::string_view l) { lines.emplace_back(l); };
  }
};
PlanCacheConfig small_config() {
  PlanCacheConfig c;
  c.cu = 8;
  c.kv_heads = 2;
  c.head_dim = 64;
  c.group = 2;
  c.max_q_len = 2;
  c.max_plans = 3;
  return c;
}
}  // namespace

TEST(PlanCache, MintsOnlyDuringCapture) {
  Lines log;
  PlanCache cache(small_config(), log.sink());
  const PlanKey key{4, 2, 0, 0};
  for (Phase p : {Phase::warmup, Phase::replay, Phase::eager, Phase::dummy}) {
    EXPECT_EQ(cache.mint(p, key), nullptr) << to_string(p);
  }
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.refused_outside_capture(), 4u);
  EXPECT_TRUE(log.lines.empty());
  auto slot = cache.mint(Phase::capture, key);
  ASSERT_NE(slot, nullptr);
  EXPECT_EQ(cache.minted(), 1u);
  ASSERT_EQ(log.lines.size(), 1u);
  EXPECT_EQ(log.lines[0],
            "plan minted: num_seqs=4 kv_heads=2 device=0 micro_batch=0 capacity=8 max_partitions=8");
}

TEST(PlanCache, NeverReplacesAMintedPlan) {
  Lines log;
  PlanCache cache(small_config(), log.sink());
  const PlanKey key{3, 2, 1, 0};
  auto a = cache.mint(Phase::capture, key);
  auto b = cache.mint(Phase::capture, key);
  EXPECT_EQ(a.get(), b.get());
  EXPECT_EQ(cache.find(key).get(), a.get());
  EXPECT_EQ(cache.minted(), 1u);
  EXPECT_EQ(log.lines.size(), 1u);  // one event per new plan
}

TEST(PlanCache, IsBounded) {
  Lines log;
  PlanCache cache(small_config(), log.sink());  // max_plans = 3
  for (int n = 1; n <= 3; ++n) ASSERT_NE(cache.mint(Phase::capture, PlanKey{n, 2, 0, 0}), nullptr);
  EXPECT_EQ(cache.mint(Phase::capture, PlanKey{4, 2, 0, 0}), nullptr);
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache.refused_full(), 1u);
  EXPECT_NE(log.lines.back().find("plan cache full (3 plans)"), std::string::npos);
  // An existing key is still served when full.
  EXPECT_NE(cache.mint(Phase::capture, PlanKey{2, 2, 0, 0}), nullptr);
}

TEST(PlanCache, KeysSeparateDevicesAndMicroBatches) {
  PlanCache cache(small_config(), nullptr);
  auto a = cache.mint(Phase::capture, PlanKey{4, 2, 0, 0});
  auto b = cache.mint(Phase::capture, PlanKey{4, 2, 0, 1});
  auto c = cache.mint(Phase::capture, PlanKey{4, 2, 1, 0});
  ASSERT_TRUE(a && b && c);
  EXPECT_NE(a.get(), b.get());
  EXPECT_NE(a.get(), c.get());
  // Scratch of distinct slots never overlaps.
  for (const auto& ra : a->scratch_ranges())
    for (const auto& rb : b->scratch_ranges())
      EXPECT_TRUE(ra.end <= rb.begin || rb.end <= ra.begin);
}

TEST(PlanCache, ScratchViewsFitTheSlot) {
  PlanCache cache(small_config(), nullptr);
  auto s = cache.mint(Phase::capture, PlanKey{2, 2, 0, 0});
  const int64_t cap = s->plan().capacity();
  const Scratch sc = s->scratch(3, 64);
  ASSERT_TRUE(sc.partial.present());
  EXPECT_EQ(sc.partial.shape_string(), "[2, " + std::to_string(cap) + ", 3, 64]");
  EXPECT_EQ(sc.m.shape_string(), "[2, " + std::to_string(cap) + ", 3]");
  EXPECT_FALSE(s->scratch(5, 64).partial.present());   // more rows than sized for
  EXPECT_FALSE(s->scratch(3, 128).partial.present());  // another head_dim
}

// The ranges a disjointness check reads are the slot's scratch, exactly: each
// starts where its view at the largest row count starts and ends one byte past
// that view's last element. (An inverted or short range would pass any
// "ends before the other begins" check.)
TEST(PlanCache, ScratchRangesAreTheBuffersExactly) {
  PlanCache cache(small_config(), nullptr);  // max_rows = group 2 x max_q_len 2
  auto s = cache.mint(Phase::capture, PlanKey{3, 2, 0, 0});
  ASSERT_TRUE(s);
  const Scratch sc = s->scratch(4, 64);
  ASSERT_TRUE(sc.partial.present());
  const auto ranges = s->scratch_ranges();
  ASSERT_EQ(ranges.size(), 3u);
  const TensorView* views[] = {&sc.partial, &sc.m, &sc.l};
  for (size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE("range " + std::to_string(i));
    const auto* begin = static_cast<const std::byte*>(ranges[i].begin);
    const auto* end = static_cast<const std::byte*>(ranges[i].end);
    EXPECT_EQ(begin, views[i]->data);
    ASSERT_LE(begin, end);
    EXPECT_EQ(end - begin, views[i]->numel() * int64_t(dtype_size(views[i]->dtype)));
  }
}

TEST(PlanCache, RejectsAConfigThePlannerRejects) {
  PlanCacheConfig c = small_config();
  c.max_partitions = 9;  // > cu
  EXPECT_THROW(PlanCache(c, nullptr), std::invalid_argument);
}

// The configured policy reaches the minted plan: a balanced slot refreshes to
// the balanced planner's plan (capacity included), not the proportional one.
TEST(PlanCache, ConfiguredPolicyReachesTheMintedPlan) {
  // One long request beside short ones: the policies give different counts.
  const std::vector<int32_t> lens = {100000, 300, 0, 2000};
  for (PlanPolicy policy : {PlanPolicy::proportional, PlanPolicy::balanced}) {
    PlanCacheConfig c = small_config();
    c.policy = policy;
    PlanCache cache(c, nullptr);
    auto slot = cache.mint(Phase::capture, PlanKey{4, 2, 0, 0});
    ASSERT_NE(slot, nullptr);
    EXPECT_EQ(slot->plan().params().policy, policy);
    slot->refresh(lens.data());
    PlanParams p;
    p.num_seqs = 4;
    p.kv_heads = 2;
    p.cu = 8;
    p.policy = policy;
    WorkPlan expect(p);
    expect.refresh(lens.data());
    EXPECT_EQ(slot->plan().capacity(), expect.capacity());
    EXPECT_EQ(slot->plan().reduce_info(), expect.reduce_info());
    EXPECT_EQ(slot->plan().work_info(), expect.work_info());
  }
  // The two policies differ on this batch, so the check above can tell them apart.
  PlanParams a;
  a.num_seqs = 4;
  a.kv_heads = 2;
  a.cu = 8;
  PlanParams b = a;
  b.policy = PlanPolicy::balanced;
  WorkPlan pa(a), pb(b);
  pa.refresh(lens.data());
  pb.refresh(lens.data());
  EXPECT_NE(pa.reduce_info(), pb.reduce_info());
}

// The scratch a slot hands out is sized from the config: views for 1 to
// max_rows() rows at exactly the configured head_dim, empty ones one row past
// and one head dim either side. The defaults (one KV head, head_dim 128, one
// row) are checked the same way, so a changed default shows as a slot sized for
// another model.
TEST(PlanCache, ScratchServesUpToItsSizedRowsAtItsHeadDimOnly) {
  struct Sized {
    PlanCacheConfig config;
    int64_t rows, head_dim;
  };
  for (const Sized& s : {Sized{PlanCacheConfig{}, 1, 128}, Sized{small_config(), 4, 64}}) {
    SCOPED_TRACE("rows " + std::to_string(s.rows) + ", head_dim " + std::to_string(s.head_dim));
    EXPECT_EQ(s.config.max_rows(), s.rows);
    PlanCache cache(s.config, nullptr);
    auto slot = cache.mint(Phase::capture, PlanKey{3, s.config.kv_heads, 0, 0});
    ASSERT_NE(slot, nullptr);
    for (const int64_t rows : {int64_t(1), s.rows}) {
      const Scratch ok = slot->scratch(rows, s.head_dim);
      EXPECT_TRUE(ok.partial.present() && ok.m.present() && ok.l.present()) << rows << " rows";
      EXPECT_EQ(ok.partial.shape[2], rows);
      EXPECT_EQ(ok.partial.shape[3], s.head_dim);
    }
    EXPECT_FALSE(slot->scratch(0, s.head_dim).partial.present()) << "no row";
    EXPECT_FALSE(slot->scratch(s.rows + 1, s.head_dim).partial.present()) << "one row past";
    EXPECT_FALSE(slot->scratch(s.rows, s.head_dim + 1).partial.present()) << "one head dim above";
    EXPECT_FALSE(slot->scratch(s.rows, s.head_dim - 1).partial.present()) << "one head dim below";
  }
}
