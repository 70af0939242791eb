// SPDX-License-Identifier: Apache-2.0
// The per-forward lifecycle: which builder variants attach a plan, when plans
// are minted and refreshed, and what dummy runs leave alone.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/dispatch/metadata.hpp"

using namespace pav::kernels;
using namespace pav::kernels::dispatch;

namespace {

PlanCacheConfig config() {
  PlanCacheConfig c;
  c.cu = 8;
  c.kv_heads = 1;
  c.head_dim = 64;
  c.group = 2;
  c.max_q_len = 2;
  c.max_plans = 8;
  return c;
}
const Settings kOn{true, true};

BatchSpec batch(std::vector<int32_t>& lens, int micro_batch = 0) {
  BatchSpec b;
  b.num_seqs = int64_t(lens.size());
  b.context_lens = lens.data();
  b.micro_batch = micro_batch;
  return b;
}

bool fresh(const ForwardMetadata& md) {
  const PlanView* p = md.plan();
  return p && plan_is_fresh(*p, md.batch().context_lens, md.batch().num_seqs) &&
         check_plan_structure(*p).empty();
}

}  // namespace

TEST(Metadata, EveryVariantAttachesAndRefreshesAtCapture) {
  PlanCache cache(config(), nullptr);
  MetadataBuilder b(cache, kOn);
  std::vector<int32_t> lens{700, 3, 260};
  const ForwardMetadata plain = b.build(Phase::capture, batch(lens));
  const ForwardMetadata graph = b.build_for_graph_capture(batch(lens));
  const ForwardMetadata draft = b.build_draft(Phase::capture, batch(lens));
  const ForwardMetadata micro = b.build_micro_batch(Phase::capture, batch(lens, 1));
  for (const ForwardMetadata* md : {&plain, &graph, &draft, &micro}) {
    EXPECT_TRUE(fresh(*md)) << to_string(md->variant());
  }
  // Each builder records its own variant.
  EXPECT_EQ(plain.variant(), BuilderVariant::plain);
  EXPECT_EQ(graph.variant(), BuilderVariant::graph_capture);
  EXPECT_EQ(draft.variant(), BuilderVariant::draft);
  EXPECT_EQ(micro.variant(), BuilderVariant::micro_batch);
  EXPECT_EQ(graph.phase(), Phase::capture);
  EXPECT_EQ(cache.size(), 2u);  // micro-batch slot 1 has its own plan
  EXPECT_EQ(b.planner_launches(), 4u);
}

TEST(Metadata, RuntimePhasesFindButNeverMint) {
  PlanCache cache(config(), nullptr);
  MetadataBuilder b(cache, kOn);
  std::vector<int32_t> lens{10, 20};
  for (Phase p : {Phase::warmup, Phase::replay, Phase::eager}) {
    const ForwardMetadata md = b.build(p, batch(lens));
    EXPECT_EQ(md.plan(), nullptr) << to_string(p);
  }
  EXPECT_EQ(cache.size(), 0u);
  (void)b.build_for_graph_capture(batch(lens));
  for (Phase p : {Phase::warmup, Phase::replay, Phase::eager}) {
    lens[0] += 300;  // each forward brings new lengths
    const ForwardMetadata md = b.build(p, batch(lens));
    EXPECT_TRUE(fresh(md)) << to_string(p);
  }
  EXPECT_EQ(cache.minted(), 1u);
  // A batch size no capture saw gets no plan and mints nothing.
  std::vector<int32_t> other{1, 2, 3};
  EXPECT_EQ(b.build(Phase::replay, batch(other)).plan(), nullptr);
  EXPECT_EQ(cache.minted(), 1u);
}

TEST(Metadata, OneRefreshPerForwardAndOnePerDraftStep) {
  PlanCache cache(config(), nullptr);
  MetadataBuilder b(cache, kOn);
  std::vector<int32_t> lens{255, 511};
  (void)b.build_for_graph_capture(batch(lens));
  const uint64_t before = b.planner_launches();
  ForwardMetadata md = b.build_draft(Phase::replay, batch(lens));
  EXPECT_EQ(b.planner_launches(), before + 1);
  for (int step = 0; step < 3; ++step) {
    for (int32_t& l : lens) ++l;  // the draft step advances lengths in place
    EXPECT_FALSE(plan_is_fresh(*md.plan(), lens.data(), 2));
    b.begin_draft_step(md);
    EXPECT_TRUE(fresh(md));
  }
  EXPECT_EQ(b.planner_launches(), before + 4);
  EXPECT_EQ(md.slot()->refreshes(), 1u + 4u);  // capture + forward + 3 steps
}

TEST(Metadata, DummyRunLeavesTheLivePlanBitIdentical) {
  PlanCache cache(config(), nullptr);
  MetadataBuilder b(cache, kOn);
  std::vector<int32_t> lens{300, 40};
  (void)b.build_for_graph_capture(batch(lens));
  const ForwardMetadata live = b.build(Phase::replay, batch(lens));
  const std::vector<int32_t> work = live.slot()->plan().work_info();
  const std::vector<int32_t> reduce = live.slot()->plan().reduce_info();
  const uint64_t launches = b.planner_launches();
  std::vector<int32_t> synthetic{1 << 20, 1 << 20};  // past every block table
  for (auto make : {+[](MetadataBuilder& mb, BatchSpec s) { return mb.build(Phase::dummy, s); },
                    +[](MetadataBuilder& mb, BatchSpec s) { return mb.build_draft(Phase::dummy, s); },
                    +[](MetadataBuilder& mb, BatchSpec s) { return mb.build_micro_batch(Phase::dummy, s); }}) {
    ForwardMetadata dummy = make(b, batch(synthetic));
    EXPECT_EQ(dummy.plan(), nullptr);
    b.begin_draft_step(dummy);
  }
  // Running batch 0 is a dummy run whatever the phase says.
  BatchSpec empty = batch(synthetic);
  empty.num_seqs = 0;
  EXPECT_EQ(b.build(Phase::replay, empty).plan(), nullptr);
  EXPECT_EQ(b.planner_launches(), launches);
  EXPECT_EQ(live.slot()->plan().work_info(), work);
  EXPECT_EQ(live.slot()->plan().reduce_info(), reduce);
}

TEST(Metadata, FeatureOffOrPlanOffMintsNothing) {
  for (Settings s : {Settings{false, true}, Settings{true, false}, Settings{false, false}}) {
    PlanCache cache(config(), nullptr);
    MetadataBuilder b(cache, s);
    std::vector<int32_t> lens{10};
    EXPECT_EQ(b.build_for_graph_capture(batch(lens)).plan(), nullptr);
    EXPECT_EQ(cache.size(), 0u);
    EXPECT_EQ(b.planner_launches(), 0u);
  }
}

TEST(Metadata, MicroBatchesOwnDisjointPlansAndScratch) {
  PlanCache cache(config(), nullptr);
  MetadataBuilder b(cache, kOn);
  std::vector<int32_t> a{100, 900}, c{900, 100};
  const ForwardMetadata ma = b.build_micro_batch(Phase::capture, batch(a, 0));
  const ForwardMetadata mc = b.build_micro_batch(Phase::capture, batch(c, 1));
  ASSERT_TRUE(ma.plan() && mc.plan());
  EXPECT_NE(ma.plan()->work_info, mc.plan()->work_info);
  for (const auto& ra : ma.slot()->scratch_ranges())
    for (const auto& rc : mc.slot()->scratch_ranges()) EXPECT_TRUE(ra.end <= rc.begin || rc.end <= ra.begin);
  EXPECT_TRUE(fresh(ma));
  EXPECT_TRUE(fresh(mc));
}

// A batch the planned kernel cannot take (past kMaxPlanBatch sequences), or one
// without lengths, gets no plan and mints nothing, at capture as at replay; the
// largest batch it takes gets one.
TEST(Metadata, NoPlanPastTheLargestBatchOrWithoutLengths) {
  PlanCache cache(config(), nullptr);
  MetadataBuilder b(cache, kOn);
  std::vector<int32_t> too_many(size_t(kMaxPlanBatch) + 1, 5), largest(size_t(kMaxPlanBatch), 5);
  for (Phase p : {Phase::capture, Phase::replay}) {
    EXPECT_EQ(b.build(p, batch(too_many)).plan(), nullptr) << to_string(p);
    BatchSpec no_lens = batch(largest);
    no_lens.context_lens = nullptr;
    EXPECT_EQ(b.build(p, no_lens).plan(), nullptr) << to_string(p);
  }
  EXPECT_EQ(cache.minted(), 0u);
  EXPECT_TRUE(fresh(b.build(Phase::capture, batch(largest))));
  EXPECT_EQ(cache.minted(), 1u);
}
