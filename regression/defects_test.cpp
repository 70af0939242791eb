// SPDX-License-Identifier: Apache-2.0
// One pin per defect of docs/numerics.md, "The defects pav pins" (the upstream review's 13). Each
// suite DefectNN_* goes red when ci/mutants/defect/defect-NN-*.patch re-injects the
// defect. (Defect 9 counts allocations, so it lives in alloc_hook_test.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <thread>
#include <type_traits>

#include "common/test_paths.hpp"
#include "kernels/codecs.hpp"
#include "kernels/dispatch/device_visibility.hpp"
#include "kernels/dispatch/route.hpp"
#include "kernels/launch.hpp"
#include "kernels/split_rules.hpp"
#include "properties/gen/gate_gen.hpp"
#include "properties/gen/gen.hpp"
#include "properties/case/host_case.hpp"
#include "properties/gen/stale_gen.hpp"
#include "reference/compare.hpp"
#include "reference/decode.hpp"

using namespace pav::kernels;
using namespace pav::kernels::dispatch;
using namespace pav::props;

namespace {

// A model with one captured batch size: the case's buffers, its plan cache,
// builder and router, all with the planned kernel and work plans on.
struct Engine {
  explicit Engine(const CaseSpec& spec, Settings settings = {true, true})
      : host(build_case(spec)), cache(cache_config(spec), nullptr), builder(cache, settings), router(settings, nullptr) {}
  BatchSpec batch(int32_t* lens = nullptr, int micro_batch = 0) { return batch_of(host, lens, micro_batch); }
  ForwardMetadata capture() { return builder.build_for_graph_capture(batch()); }
  HostCase host;
  PlanCache cache;
  MetadataBuilder builder;
  Router router;
};

CaseSpec small_spec(std::vector<int32_t> lens) {
  CaseSpec s;
  s.lens = std::move(lens);
  s.hkv = 2;
  s.group = 3;
  s.head_dim = 128;
  s.block_size = 16;
  s.scales = ScaleKind::per_token;
  s.opt.cu = 8;
  s.opt.partial = DType::bf16;
  s.seed = 11;
  s.sentinels = boundary_sentinels(s.lens);
  return s;
}

pav::reference::CompareReport against_reference(const DecodeCall& call) {
  return pav::reference::compare(call.out, pav::reference::decode(call));
}

void fill_nan(const Scratch& s) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t i = 0; i < s.m.numel(); ++i) {
    s.m.as<float>()[i] = nan;
    s.l.as<float>()[i] = nan;
  }
}

}  // namespace

// ---- 1. The routed call really runs ----------------------------------------
// The entries' types are pinned: a caller passing what an entry does not take
// fails to compile here (upstream, an unknown keyword killed every routed call).
static_assert(std::is_same_v<decltype(launch_planned), PlannedLaunchFn>);
static_assert(std::is_same_v<PlannedLaunchFn, DecodeResult(const DecodeCall&, const PlanView*, const Scratch&, Backend)>);
static_assert(std::is_same_v<decltype(launch_uniform), UniformLaunchFn>);
static_assert(std::is_same_v<decltype(&decode),
                             DecodeOutcome (*)(Router&, const DecodeCall&, Site, const ForwardMetadata*, Backend)>);

TEST(Defect01_RoutedCallRuns, PlannedRouteRunsTheKernelOverThePlan) {
  Engine e(small_spec({700, 3, 260}));
  (void)e.capture();
  const ForwardMetadata md = e.builder.build(Phase::replay, e.batch());
  ASSERT_NE(md.plan(), nullptr);
  const Scratch scratch = md.plan_scratch(e.host.spec.group, e.host.spec.head_dim);
  fill_nan(scratch);
  e.host.poison_output();
  const DecodeCall call = e.host.call();
  const DecodeOutcome o = decode(e.router, call, Site::dense, &md);
  ASSERT_EQ(o.route.kind, RouteKind::planned);
  EXPECT_EQ(o.result.status, DecodeStatus::ok);
  const auto rep = against_reference(call);
  EXPECT_TRUE(rep.passed()) << rep.verdict;
  // The planned kernel wrote m for exactly the plan's active tasks, per head.
  const int64_t cap = md.plan()->capacity, active = md.slot()->plan().active_tasks();
  const int64_t rows = scratch.m.shape[2];
  for (int64_t h = 0; h < e.host.spec.hkv; ++h)
    for (int64_t i = 0; i < cap; ++i)
      EXPECT_EQ(std::isnan(scratch.m.as<float>()[(h * cap + i) * rows]), i >= active) << "slot " << i;
}

TEST(Defect01_RoutedCallRuns, FixedSplitsRouteRunsTheKernel) {
  Engine e(small_spec({700, 3, 260}), Settings{true, false});
  e.host.poison_output();
  const DecodeCall call = e.host.call();
  const DecodeOutcome o = decode(e.router, call, Site::sparse, nullptr);
  ASSERT_EQ(o.route.kind, RouteKind::planned_fixed_splits);
  const auto rep = against_reference(call);
  EXPECT_TRUE(rep.passed()) << rep.verdict;
}

// ---- 2. A draft step never attends over the target's stale plan -------------
TEST(Defect02_DraftStepRefreshesOrRefuses, PlanMatchesComparesLengthsNotOnlyShapes) {
  CaseSpec spec = small_spec({256, 3});
  spec.lens = {257, 4};  // the cache holds the drafted tokens
  spec.sentinels = {{0, 256}, {1, 3}};
  Engine e(spec);
  e.host.lens = {256, 3};
  ForwardMetadata md = e.builder.build_draft(Phase::capture, e.batch());
  const DecodeCall call = e.host.call();
  ASSERT_TRUE(plan_matches(*md.plan(), call));
  for (int32_t& l : e.host.lens) ++l;  // the draft step advances lengths in place
  EXPECT_FALSE(plan_matches(*md.plan(), call)) << "shapes agree, lengths do not";
  const Route r = e.router.route(call, Site::dense, &md);
  EXPECT_EQ(r.kind, RouteKind::uniform);
  EXPECT_EQ(r.reason, RouteReason::plan_refused);
}

TEST(Defect02_DraftStepRefreshesOrRefuses, StalePlanLaunchIsFlaggedRefreshedOneAttendsTheNewToken) {
  CaseSpec spec = small_spec({256, 3});
  spec.lens = {257, 4};
  spec.sentinels = {{0, 256}, {1, 3}};  // the drafted tokens: dominant keys
  Engine e(spec);
  e.host.lens = {256, 3};
  ForwardMetadata md = e.builder.build_draft(Phase::capture, e.batch());
  const DecodeCall call = e.host.call();
  for (int32_t& l : e.host.lens) ++l;
  const Scratch scratch = md.plan_scratch(spec.group, spec.head_dim);
  e.host.poison_output();
  const DecodeResult stale = launch_planned(call, md.plan(), scratch);
  EXPECT_EQ(stale.status, DecodeStatus::stale_plan);
  e.builder.begin_draft_step(md);
  e.host.poison_output();
  const DecodeOutcome o = decode(e.router, call, Site::dense, &md);
  EXPECT_EQ(o.route.kind, RouteKind::planned);
  EXPECT_EQ(o.result.status, DecodeStatus::ok);
  const auto rep = against_reference(call);
  EXPECT_TRUE(rep.passed()) << rep.verdict;
}

// ---- 3. Plan and scratch live on the metadata, per micro-batch ---------------
TEST(Defect03_PerForwardStateOnMetadata, MicroBatchesOwnPlanAndScratchAndRunConcurrently) {
  Engine e(small_spec({700, 3, 260}));
  // Micro-batch 1: same batch size, other lengths, its own buffers.
  CaseSpec spec1 = small_spec({40, 513, 1});
  spec1.seed = 12;
  HostCase other = build_case(spec1);
  const ForwardMetadata md0 = e.builder.build_micro_batch(Phase::capture, e.batch(nullptr, 0));
  BatchSpec b1 = e.batch(other.lens.data(), 1);
  const ForwardMetadata md1 = e.builder.build_micro_batch(Phase::capture, b1);
  ASSERT_TRUE(md0.plan() && md1.plan());
  EXPECT_NE(md0.slot(), md1.slot());
  for (const auto& a : md0.slot()->scratch_ranges())
    for (const auto& b : md1.slot()->scratch_ranges()) EXPECT_TRUE(a.end <= b.begin || b.end <= a.begin);
  e.host.poison_output();
  other.poison_output();
  const DecodeCall c0 = e.host.call(), c1 = other.call();
  DecodeOutcome o0, o1;
  std::thread t0([&] { o0 = decode(e.router, c0, Site::dense, &md0); });
  std::thread t1([&] { o1 = decode(e.router, c1, Site::dense, &md1); });
  t0.join();
  t1.join();
  EXPECT_EQ(o0.route.plan, md0.plan());
  EXPECT_EQ(o1.route.plan, md1.plan());
  const auto r0 = against_reference(c0), r1 = against_reference(c1);
  EXPECT_TRUE(r0.passed()) << r0.verdict;
  EXPECT_TRUE(r1.passed()) << r1.verdict;
}

// ---- 4. A dummy run neither refreshes the live plan nor pays a planner launch -
TEST(Defect04_DummyRunLeavesPlan, LivePlanBitIdenticalAndNoPlannerLaunch) {
  Engine e(small_spec({700, 3, 260}));
  (void)e.capture();
  const ForwardMetadata live = e.builder.build(Phase::replay, e.batch());
  const std::vector<int32_t> work = live.slot()->plan().work_info(), reduce = live.slot()->plan().reduce_info();
  const uint64_t launches = e.builder.planner_launches(), refreshes = live.slot()->refreshes();
  std::vector<int32_t> synthetic(3, 1 << 20);  // past every block table
  ForwardMetadata d = e.builder.build_draft(Phase::dummy, e.batch(synthetic.data()));
  e.builder.begin_draft_step(d);
  (void)e.builder.build(Phase::dummy, e.batch(synthetic.data()));
  EXPECT_EQ(d.plan(), nullptr);
  EXPECT_EQ(e.builder.planner_launches(), launches);
  EXPECT_EQ(live.slot()->refreshes(), refreshes);
  EXPECT_EQ(live.slot()->plan().work_info(), work);
  EXPECT_EQ(live.slot()->plan().reduce_info(), reduce);
  e.host.poison_output();
  const DecodeCall call = e.host.call();
  EXPECT_EQ(decode(e.router, call, Site::dense, &live).route.kind, RouteKind::planned);
  const auto rep = against_reference(call);
  EXPECT_TRUE(rep.passed()) << rep.verdict;
}

// ---- 5. The gate mirrors every hard reject, int32 lengths on every path ------
TEST(Defect05_GateMirrorsEveryReject, EveryClauseRejectedByGateAndKernelAlike) {
  for (Clause c : clauses_with_generators())
    for (int v = 0; v < violation_variants(c); ++v)
      for (bool with_plan : {true, false}) {
        GateCase g = materialize(fixed_violation_spec(c, v, with_plan));
        const GateVerdict verdict = gate(g.call, g.plan(), &g.scratch);
        SCOPED_TRACE(std::string(clause_name(c)) + " variant " + std::to_string(v) +
                     (with_plan ? " with plan" : " without plan"));
        ASSERT_FALSE(verdict.accepted);  // an accepted violation would be launched below
        EXPECT_EQ(verdict.clause, c);
        try {
          (void)launch_planned(g.call, g.plan(), g.scratch);
          ADD_FAILURE() << "planned launch ran";
        } catch (const RejectError& e) {
          EXPECT_EQ(e.clause(), c);
        }
      }
}

TEST(Defect05_GateMirrorsEveryReject, Int32LengthsOnEveryPath) {
  for (bool with_plan : {true, false}) {
    GateCase g = materialize(fixed_violation_spec(Clause::context_lens_dtype, 0, with_plan));
    ASSERT_EQ(g.call.context_lens.dtype, DType::i64);
    const GateVerdict v = gate(g.call, g.plan(), &g.scratch);
    ASSERT_FALSE(v.accepted);
    EXPECT_EQ(v.clause, Clause::context_lens_dtype);
  }
  // Through the router: the call never reaches a kernel that would read int64
  // lengths as int32; the uniform kernel rejects it too.
  Engine e(small_spec({300, 17}));
  const ForwardMetadata md = e.capture();
  DecodeCall call = e.host.call();
  call.context_lens.dtype = DType::i64;
  for (Site site : {Site::dense, Site::sparse}) {
    try {
      (void)decode(e.router, call, site, &md);
      ADD_FAILURE() << "int64 lengths ran";
    } catch (const RejectError& ex) {
      EXPECT_EQ(ex.clause(), Clause::context_lens_dtype);
    }
  }
  EXPECT_EQ(e.router.counts().rejects_by_clause[size_t(Clause::context_lens_dtype)], 1u);  // the sparse call
}

// ---- 6. Drift measured at the ceiling the planner really reaches -------------
TEST(Defect06_DriftAtRealCeiling, PlannerReachesCeiling256AtBatchOneAndMatchesReference) {
  CaseSpec spec;
  spec.lens = {65537};  // 257 tiles: more than the ceiling
  spec.hkv = 1;
  spec.group = 4;
  spec.head_dim = 64;
  spec.block_size = 128;
  spec.opt.cu = 256;  // MI355X: max_partitions defaults to the CU count
  spec.opt.partial = DType::bf16;  // the round-trip the drift concern is about
  spec.scales = ScaleKind::per_tensor;
  spec.seed = 3;
  spec.sentinels = boundary_sentinels(spec.lens);
  Engine e(spec);
  const ForwardMetadata md = e.capture();
  ASSERT_NE(md.plan(), nullptr);
  EXPECT_EQ(md.plan()->max_partitions, 256);
  EXPECT_EQ(md.plan()->reduce_info[1], 256) << "batch 1 must run at the ceiling";
  EXPECT_FALSE(reduce_uses_bounded(md.plan()->max_partitions));
  e.host.poison_output();
  const DecodeCall call = e.host.call();
  const DecodeOutcome o = decode(e.router, call, Site::dense, &md);
  ASSERT_EQ(o.route.kind, RouteKind::planned);
  const auto rep = against_reference(call);
  EXPECT_TRUE(rep.passed()) << rep.verdict;
  RecordProperty("rel_l2_err_at_256", std::to_string(rep.rel_l2_err));
}

// ---- 7. Ceiling <= 64 selects the bounded reduce; reads past count are zero --
TEST(Defect07_BoundedReduceAtSmallCeiling, CeilingAtMost64SelectsBoundedReduce) {
  EXPECT_TRUE(reduce_uses_bounded(1));
  EXPECT_TRUE(reduce_uses_bounded(64));
  EXPECT_FALSE(reduce_uses_bounded(65));
  EXPECT_FALSE(reduce_uses_bounded(256));
  // Setting the ceiling is allowed and reaches the plan (a ceiling test must not
  // pin "left at the default").
  PlanCacheConfig cfg = cache_config(small_spec({300}));
  cfg.cu = 256;
  cfg.max_partitions = 64;
  PlanCache cache(cfg, nullptr);
  MetadataBuilder b(cache, Settings{true, true});
  std::vector<int32_t> lens{65537};
  BatchSpec bs;
  bs.num_seqs = 1;
  bs.context_lens = lens.data();
  const ForwardMetadata md = b.build_for_graph_capture(bs);
  EXPECT_EQ(md.plan()->max_partitions, 64);
  EXPECT_EQ(md.plan()->reduce_info[1], 64);
  EXPECT_TRUE(reduce_uses_bounded(md.plan()->max_partitions));
}

TEST(Defect07_BoundedReduceAtSmallCeiling, SlotsPastCountNeverReachTheOutput) {
  CaseSpec spec = small_spec({768});  // 3 tiles: count 3 of ceiling 8
  spec.opt.partial = DType::f32;
  HostCase host = build_case(spec);
  const DecodeCall call = host.call();
  PlanParams p = plan_params(spec);
  p.max_partitions = 8;
  WorkPlan plan(p);
  plan.refresh(host.lens.data());
  ASSERT_EQ(plan.reduce_info()[1], 3);
  ASSERT_EQ(plan.capacity(), 8);
  ASSERT_TRUE(reduce_uses_bounded(p.max_partitions));
  const PlanView view = plan.view();
  struct Poison {
    float m, l, partial;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // NaN everywhere; a huge max with a huge partial; a plausible max with a huge sum.
  for (const Poison poison : {Poison{nan, nan, nan}, Poison{1e30f, 1.0f, 1e30f}, Poison{0.0f, 1e30f, 1e30f}}) {
    HostScratch s = make_scratch(call, spec.hkv * plan.capacity(), spec.hkv);
    // Slots 3..7 of every head: never written by the attention, walked (and
    // masked) by the bounded reduce.
    std::fill(s.m.begin(), s.m.end(), poison.m);
    std::fill(s.l.begin(), s.l.end(), poison.l);
    float* partial = reinterpret_cast<float*>(s.partial.data());
    std::fill(partial, partial + s.partial.size() / 4, poison.partial);
    host.poison_output();
    const DecodeResult r = launch_planned(call, &view, s.view);
    EXPECT_EQ(r.status, DecodeStatus::ok);
    const auto rep = against_reference(call);
    EXPECT_TRUE(rep.passed()) << "poison m=" << poison.m << " l=" << poison.l << ": " << rep.verdict;
  }
}

// ---- 8. Bounded cache; nothing mints during serving --------------------------
TEST(Defect08_PlanCacheBoundedNoServingMint, RuntimeBatchesNeverMint) {
  Engine e(small_spec({700, 3, 260}));
  (void)e.capture();
  ASSERT_EQ(e.cache.minted(), 1u);
  CaseSpec other_spec = small_spec({100, 200});
  HostCase other = build_case(other_spec);
  for (Phase p : {Phase::warmup, Phase::replay, Phase::eager}) {
    BatchSpec b;
    b.num_seqs = 2;
    b.context_lens = other.lens.data();
    for (int variant = 0; variant < 3; ++variant) {
      const ForwardMetadata md = variant == 0   ? e.builder.build(p, b)
                                 : variant == 1 ? e.builder.build_draft(p, b)
                                                : e.builder.build_micro_batch(p, b);
      EXPECT_EQ(md.plan(), nullptr) << to_string(p);
      other.poison_output();
      const DecodeCall call = other.call();
      const DecodeOutcome o = decode(e.router, call, Site::dense, &md);
      EXPECT_EQ(o.route.reason, RouteReason::no_plan);
      const auto rep = against_reference(call);
      EXPECT_TRUE(rep.passed()) << rep.verdict;
    }
  }
  EXPECT_EQ(e.cache.minted(), 1u);
  EXPECT_EQ(e.cache.size(), 1u);
}

TEST(Defect08_PlanCacheBoundedNoServingMint, CacheStopsAtItsBound) {
  PlanCacheConfig cfg = cache_config(small_spec({1}));
  cfg.max_plans = 2;
  PlanCache cache(cfg, nullptr);
  MetadataBuilder b(cache, Settings{true, true});
  std::vector<int32_t> lens(8, 100);
  for (int n = 1; n <= 5; ++n) {
    BatchSpec bs;
    bs.num_seqs = n;
    bs.context_lens = lens.data();
    const ForwardMetadata md = b.build_for_graph_capture(bs);
    EXPECT_EQ(md.plan() != nullptr, n <= 2) << n;
  }
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.refused_full(), 3u);
}

// ---- 10. Every builder that captures graphs attaches the plan ---------------
TEST(Defect10_EveryBuilderAttachesPlan, EveryVariantAtCaptureAndReplay) {
  Engine e(small_spec({700, 3, 260}));
  const DecodeCall call = e.host.call();
  const ForwardMetadata graph = e.builder.build_for_graph_capture(e.batch());
  const ForwardMetadata plain = e.builder.build(Phase::capture, e.batch());
  const ForwardMetadata draft = e.builder.build_draft(Phase::capture, e.batch());
  const ForwardMetadata micro = e.builder.build_micro_batch(Phase::capture, e.batch(nullptr, 1));
  for (const ForwardMetadata* md : {&graph, &plain, &draft, &micro}) {
    ASSERT_NE(md->plan(), nullptr) << to_string(md->variant());
    EXPECT_EQ(e.router.route(call, Site::dense, md).kind, RouteKind::planned) << to_string(md->variant());
  }
  const ForwardMetadata replay = e.builder.build(Phase::replay, e.batch());
  const ForwardMetadata replay_draft = e.builder.build_draft(Phase::replay, e.batch());
  const ForwardMetadata replay_micro = e.builder.build_micro_batch(Phase::replay, e.batch(nullptr, 1));
  for (const ForwardMetadata* md : {&replay, &replay_draft, &replay_micro})
    EXPECT_EQ(e.router.route(call, Site::dense, md).kind, RouteKind::planned) << to_string(md->variant());
}

// ---- 11. Device visibility composes ROCR before HIP/CUDA --------------------
TEST(Defect11_RocrBeforeHip, RocrAloneAndComposed) {
  const VisibilityEnv rocr_only{"0,1,4,5", std::nullopt, std::nullopt};
  EXPECT_EQ(physical_device_index(2, rocr_only), 4);
  EXPECT_EQ(physical_device_index(3, rocr_only), 5);
  const VisibilityEnv composed{"0,1,4,5", "1,3", std::nullopt};
  EXPECT_EQ(physical_device_index(0, composed), 1);
  EXPECT_EQ(physical_device_index(1, composed), 5);
  const VisibilityEnv cuda{"2,3,6,7", std::nullopt, "3"};
  EXPECT_EQ(physical_device_index(0, cuda), 7);
}

// ---- 12. No test may assert that the gate accepts a call the kernel rejects --
TEST(Defect12_NoAcceptOfKernelReject, HeadDimAgainstCacheGroups) {
  // q says head_dim 256; the cache's num_hgroups (8) encodes 128.
  CaseSpec s = fixed_gate_spec(true).base;
  s.head_dim = 256;
  GateCase g256 = materialize(GateSpec{s, true, Clause::num_hgroups, 2});
  ASSERT_EQ(g256.call.q.shape[2], 256);
  ASSERT_EQ(g256.call.k_cache.shape[2], 8);
  const GateVerdict v = gate(g256.call, g256.plan(), &g256.scratch);
  ASSERT_FALSE(v.accepted) << "the gate accepts a call the kernel rejects";
  EXPECT_EQ(v.clause, Clause::num_hgroups);
  EXPECT_THROW((void)launch_planned(g256.call, g256.plan(), g256.scratch), RejectError);
  Router r(Settings{true, false}, nullptr);
  const Route route = r.route(g256.call, Site::sparse, nullptr);
  EXPECT_EQ(route.kind, RouteKind::uniform);
  EXPECT_EQ(route.clause, Clause::num_hgroups);
}

// ---- 13. Names match behaviour; settings documented; one source for constants
namespace {
std::string read_doc(const std::string& rel) {
  std::ifstream f(std::string(PAV_SOURCE_DIR) + "/" + rel);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
}  // namespace

TEST(Defect13_NamesAndSettings, EverySettingIsDocumentedWithItsDefault) {
  // Settings and route labels are documented in docs/lifecycle.md, clauses in docs/gate.md.
  const std::string doc = read_doc("docs/lifecycle.md");
  const std::string gate_doc = read_doc("docs/gate.md");
  ASSERT_FALSE(doc.empty()) << "docs/lifecycle.md missing";
  ASSERT_FALSE(gate_doc.empty()) << "docs/gate.md missing";
  for (const SettingInfo& s : setting_table()) {
    const size_t at = doc.find("| `" + std::string(s.env) + "` |");
    ASSERT_NE(at, std::string::npos) << s.env << " has no row in the settings table";
    const std::string row = doc.substr(at, doc.find('\n', at) - at);
    EXPECT_NE(row.find("`" + std::string(s.default_value) + "`"), std::string::npos)
        << s.env << " row does not give its default " << s.default_value << ": " << row;
  }
  for (const ClauseInfo& c : clause_table())
    EXPECT_NE(gate_doc.find("`" + std::string(c.name) + "`"), std::string::npos)
        << "clause " << c.name << " undocumented";
  for (const char* label : {"`uniform`", "`planned[N seqs]`", "`planned[N seqs, fixed splits]`", "plan minted:"})
    EXPECT_NE(doc.find(label), std::string::npos) << label;
}

TEST(Defect13_NamesAndSettings, RouteNamesSayWhatRan) {
  Route r;
  r.num_seqs = 4;
  r.kind = RouteKind::uniform;
  EXPECT_EQ(route_label(r), "uniform");
  r.kind = RouteKind::planned;
  EXPECT_EQ(route_label(r), "planned[4 seqs]");
  r.kind = RouteKind::planned_fixed_splits;
  EXPECT_EQ(route_label(r), "planned[4 seqs, fixed splits]");
  EXPECT_EQ(to_string(RouteKind::planned_fixed_splits), "planned_fixed_splits");
}

TEST(Defect13_NamesAndSettings, RuleTextsQuoteTheSharedConstants) {
  // The rules the CLI and docs print come from the same constants the walk uses.
  std::string sizes;
  for (size_t i = 0; i < kPlannedBlockSizes.size(); ++i)
    sizes += (i == 0 ? "" : i + 1 == kPlannedBlockSizes.size() ? " or " : ", ") + std::to_string(kPlannedBlockSizes[i]);
  EXPECT_NE(clause_info(Clause::block_size).planned_rule.find(sizes), std::string_view::npos);
  EXPECT_NE(clause_info(Clause::head_dim).planned_rule.find(std::to_string(kPlannedHeadDimMax)), std::string_view::npos);
  EXPECT_NE(clause_info(Clause::partition_count).planned_rule.find(std::to_string(kMaxUniformPartitions)),
            std::string_view::npos);
  EXPECT_NE(clause_info(Clause::num_seqs).planned_rule.find(std::to_string(kMaxPlanBatch)), std::string_view::npos);
  for (int64_t bs = 0; bs <= 256; ++bs)
    EXPECT_EQ(planned_block_size_ok(bs), bs == 16 || bs == 64 || bs == 128) << bs;
  for (int64_t d = 0; d <= 1152; d += 16)
    EXPECT_EQ(planned_head_dim_ok(d), d == 64 || (d >= 128 && d <= 1024 && d % 128 == 0)) << d;
}
