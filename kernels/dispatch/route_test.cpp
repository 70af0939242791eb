// SPDX-License-Identifier: Apache-2.0
// Routing: the two opt-ins, dense and sparse sites, fallbacks, counters, the
// route log, and decode() running whichever kernel the route names.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "kernels/codecs.hpp"
#include "kernels/dispatch/route.hpp"
#include "kernels/dispatch/tiny_call.hpp"

using namespace pav::kernels;
using namespace pav::kernels::dispatch;
using pav::kernels::testing::TinyCall;
using pav::kernels::testing::TinySpec;

namespace {

struct Lines {
  std::vector<std::string> lines;
  LogSink sink() {
    return [this](std::string_view l) { lines.emplace_back(l); };
  }
  int count(const std::string& s) const {
    int n = 0;
    for (const auto& l : lines) n += l == s;
    return n;
  }
  int count_containing(const std::string& s) const {
    int n = 0;
    for (const auto& l : lines) n += l.find(s) != std::string::npos;
    return n;
  }
};

// A captured forward for a TinyCall: cache + builder + replay metadata.
struct Forward {
  explicit Forward(TinyCall& t, Settings s = {true, true}) : cache(config(t), nullptr), builder(cache, s) {
    BatchSpec b;
    b.num_seqs = int64_t(t.lens.size());
    b.context_lens = t.lens.data();
    b.q_len = t.spec.q_len;
    (void)builder.build_for_graph_capture(b);
    md.emplace(builder.build(Phase::replay, b));
  }
  static PlanCacheConfig config(const TinyCall& t) {
    PlanCacheConfig c;
    c.cu = t.spec.cu;
    c.kv_heads = t.spec.hkv;
    c.head_dim = t.spec.head_dim;
    c.group = t.spec.group;
    c.max_q_len = t.spec.q_len;
    c.partial = t.spec.partial;
    return c;
  }
  PlanCache cache;
  MetadataBuilder builder;
  std::optional<ForwardMetadata> md;
};

}  // namespace

TEST(Route, FeatureOffRoutesUniformWithoutAGateCheck) {
  TinyCall t;
  Forward f(t, Settings{false, true});
  Lines log;
  Router r(Settings{false, true}, log.sink());
  for (int i = 0; i < 5; ++i) {
    const Route route = r.route(t.call, Site::dense, &*f.md);
    EXPECT_EQ(route.kind, RouteKind::uniform);
    EXPECT_EQ(route.reason, RouteReason::feature_off);
  }
  EXPECT_EQ(r.counts().gate_checks, 0u);
  EXPECT_EQ(r.counts().uniform, 5u);
  EXPECT_EQ(log.lines, (std::vector<std::string>{"route: uniform"}));
}

TEST(Route, DenseSiteWithAFreshPlanIsPlanned) {
  TinyCall t;
  Forward f(t);
  Lines log;
  Router r(Settings{true, true}, log.sink());
  const Route route = r.route(t.call, Site::dense, &*f.md);
  EXPECT_EQ(route.kind, RouteKind::planned);
  EXPECT_EQ(route.reason, RouteReason::accepted);
  EXPECT_EQ(route.plan, f.md->plan());
  EXPECT_EQ(route_label(route), "planned[2 seqs]");
  (void)r.route(t.call, Site::dense, &*f.md);
  EXPECT_EQ(log.count("route: planned[2 seqs]"), 1);
  EXPECT_EQ(r.counts().planned, 2u);
  EXPECT_EQ(r.counts().gate_checks, 2u);
}

TEST(Route, SparseSitesNeverGetAPlan) {
  TinyCall t;
  Forward f(t);
  Router r(Settings{true, true}, nullptr);
  const Route route = r.route(t.call, Site::sparse, &*f.md);
  EXPECT_EQ(route.kind, RouteKind::planned_fixed_splits);
  EXPECT_EQ(route.plan, nullptr);
  EXPECT_EQ(route_label(route), "planned[2 seqs, fixed splits]");
}

TEST(Route, WorkPlanOffRunsFixedSplitsAtDenseSites) {
  TinyCall t;
  Forward f(t, Settings{true, false});
  Router r(Settings{true, false}, nullptr);
  EXPECT_EQ(f.md->plan(), nullptr);
  const Route route = r.route(t.call, Site::dense, &*f.md);
  EXPECT_EQ(route.kind, RouteKind::planned_fixed_splits);
}

TEST(Route, NoPlanForTheBatchFallsBackToUniform) {
  TinyCall t;
  Router r(Settings{true, true}, nullptr);
  const Route route = r.route(t.call, Site::dense, nullptr);
  EXPECT_EQ(route.kind, RouteKind::uniform);
  EXPECT_EQ(route.reason, RouteReason::no_plan);
  EXPECT_EQ(r.counts().no_plan, 1u);
}

TEST(Route, StalePlanIsRefusedNotAccepted) {
  TinyCall t;  // lens {300, 20}
  Forward f(t);
  Router r(Settings{true, true}, nullptr);
  t.lens[1] += 1;  // same shapes, one more token: stale
  EXPECT_FALSE(plan_matches(*f.md->plan(), t.call));
  const Route route = r.route(t.call, Site::dense, &*f.md);
  EXPECT_EQ(route.kind, RouteKind::uniform);
  EXPECT_EQ(route.reason, RouteReason::plan_refused);
  EXPECT_EQ(r.counts().plans_refused, 1u);
  EXPECT_EQ(r.counts().gate_checks, 0u);
}

TEST(Route, GateRejectFallsBackToUniformNamingTheClause) {
  TinyCall t;
  Forward f(t);
  Lines log;
  Router r(Settings{true, true}, log.sink());
  t.call.opt.compute = DType::bf16;
  const Route route = r.route(t.call, Site::dense, &*f.md);
  EXPECT_EQ(route.kind, RouteKind::uniform);
  EXPECT_EQ(route.reason, RouteReason::gate_reject);
  EXPECT_EQ(route.clause, Clause::compute_dtype);
  EXPECT_EQ(r.counts().rejects_by_clause[size_t(Clause::compute_dtype)], 1u);
  EXPECT_EQ(log.count("route: gate rejects (compute_dtype): uniform"), 1);
}

// The route log names each batch size once, for every size the planned kernel
// takes: both sides of each 64-size word of the log's bitmap, and the largest
// batch. Each size is routed twice, interleaved with the others, so a size
// logged twice, or one that masks another, shows.
TEST(Route, LogsEachBatchSizeOnceUpToTheLargestBatch) {
  const std::vector<int32_t> sizes = {1, 2, 63, 64, 65, 127, 128, kMaxPlanBatch - 1, kMaxPlanBatch};
  Lines log;
  Router r(Settings{true, true}, log.sink());
  // Views into each call's buffers: neither calls nor forwards may move.
  std::vector<std::unique_ptr<TinyCall>> calls;
  std::vector<std::unique_ptr<Forward>> forwards;
  for (int32_t n : sizes) {
    calls.push_back(std::make_unique<TinyCall>(TinySpec{.lens = std::vector<int32_t>(size_t(n), 1)}));
    forwards.push_back(std::make_unique<Forward>(*calls.back()));
  }
  std::vector<std::string> want;
  for (int round = 0; round < 2; ++round)
    for (size_t i = 0; i < sizes.size(); ++i) {
      SCOPED_TRACE(std::to_string(sizes[i]) + " seqs, round " + std::to_string(round));
      const Route planned = r.route(calls[i]->call, Site::dense, &*forwards[i]->md);
      ASSERT_EQ(planned.kind, RouteKind::planned);
      const Route fixed = r.route(calls[i]->call, Site::sparse, &*forwards[i]->md);
      ASSERT_EQ(fixed.kind, RouteKind::planned_fixed_splits);
      if (round == 0) {
        want.push_back("route: planned[" + std::to_string(sizes[i]) + " seqs]");
        want.push_back("route: planned[" + std::to_string(sizes[i]) + " seqs, fixed splits]");
      }
    }
  EXPECT_EQ(log.lines, want);
  EXPECT_EQ(r.counts().planned, 2 * sizes.size());
  EXPECT_EQ(r.counts().planned_fixed_splits, 2 * sizes.size());
}

TEST(PlanMatches, RefusesShapeMismatches) {
  TinyCall t;
  const PlanView plan = t.make_plan();
  EXPECT_TRUE(plan_matches(plan, t.call));
  PlanView p = plan;
  p.kv_heads = 2;
  EXPECT_FALSE(plan_matches(p, t.call));
  p = plan;
  p.num_seqs = 1;
  EXPECT_FALSE(plan_matches(p, t.call));
  p = plan;
  p.max_partitions = t.call.opt.cu + 1;
  EXPECT_FALSE(plan_matches(p, t.call));
  TinyCall u;
  u.call.context_lens.dtype = DType::i64;
  EXPECT_FALSE(plan_matches(plan, u.call));
}

// Every limit plan_matches checks, on both sides: the value at the limit is
// accepted, one past it is refused. Each case starts from a fresh plan of a
// batch with an empty row beside long ones.
// A fresh plan of a batch with an empty row beside long ones.
struct UnevenPlan {
  TinySpec spec = [] {
    TinySpec s;
    s.lens = {0, 5000, 37, 1};
    return s;
  }();
  TinyCall t{spec};
  PlanView plan = t.make_plan();
};

TEST(PlanMatches, EveryLimitOnBothSides) {
  UnevenPlan u;
  const TinySpec& spec = u.spec;
  TinyCall& t = u.t;
  const PlanView& plan = u.plan;
  ASSERT_TRUE(plan_matches(plan, t.call));
  const int64_t B = int64_t(spec.lens.size());
  // Tasks the plan uses: first + count of the last row that has any.
  int64_t used = 0;
  for (int64_t b = 0; b < B; ++b)
    if (plan.reduce_info[2 * b + 1] > 0) used = std::max<int64_t>(used, plan.reduce_info[2 * b] + plan.reduce_info[2 * b + 1]);
  ASSERT_GT(used, B) << "the long row must be split for the capacity limits to differ";
  auto with = [&](auto edit) {
    PlanView p = plan;
    edit(p);
    return plan_matches(p, t.call);
  };
  // max_partitions: 1..cu (the plan's tasks stay inside the capacity either way).
  EXPECT_TRUE(with([&](PlanView& p) { p.max_partitions = t.call.opt.cu; }));
  EXPECT_FALSE(with([&](PlanView& p) { p.max_partitions = t.call.opt.cu + 1; }));
  EXPECT_FALSE(with([&](PlanView& p) { p.max_partitions = 0; }));
  // capacity: at least one task per row, at most max_partitions per row, and
  // every row's tasks inside it.
  EXPECT_TRUE(with([&](PlanView& p) { p.capacity = B * p.max_partitions; }));
  EXPECT_FALSE(with([&](PlanView& p) { p.capacity = B * p.max_partitions + 1; }));
  EXPECT_TRUE(with([&](PlanView& p) { p.capacity = used; }));
  EXPECT_FALSE(with([&](PlanView& p) { p.capacity = used - 1; }));
  EXPECT_FALSE(with([&](PlanView& p) {
    p.max_partitions = t.call.opt.cu;
    p.capacity = B - 1;
  }));
  // Shapes.
  EXPECT_FALSE(with([&](PlanView& p) { p.num_seqs = B - 1; }));
  EXPECT_FALSE(with([&](PlanView& p) { p.num_seqs = B + 1; }));
  EXPECT_FALSE(with([&](PlanView& p) { p.kv_heads = spec.hkv + 1; }));
  EXPECT_FALSE(with([&](PlanView& p) { p.work_info = nullptr; }));
  EXPECT_FALSE(with([&](PlanView& p) { p.reduce_info = nullptr; }));
}

// A row's first and last task both carry its live length: growing, shrinking
// or emptying any one row (the empty one included) makes the plan stale.
TEST(PlanMatches, AnyOneRowChangedIsStale) {
  UnevenPlan u;
  TinyCall& t = u.t;
  ASSERT_TRUE(plan_matches(u.plan, t.call));
  for (size_t b = 0; b < t.lens.size(); ++b)
    for (int32_t delta : {-1, 1}) {
      const int32_t was = t.lens[b];
      if (was + delta < 0) continue;
      t.lens[b] = was + delta;
      EXPECT_FALSE(plan_matches(u.plan, t.call)) << "row " << b << " from " << was << " to " << was + delta;
      t.lens[b] = was;
    }
  EXPECT_TRUE(plan_matches(u.plan, t.call));
}

// decode() runs the kernel the route names, end to end, on real buffers.
TEST(Decode, RunsEachRoute) {
  for (int mode = 0; mode < 3; ++mode) {
    TinyCall t;
    Forward f(t);
    Router r(mode == 0 ? Settings{false, true} : Settings{true, true}, nullptr);
    std::fill(t.out.begin(), t.out.end(), uint16_t(0x7fc0));
    const Site site = mode == 2 ? Site::sparse : Site::dense;
    const DecodeOutcome o = decode(r, t.call, site, &*f.md);
    const RouteKind want[] = {RouteKind::uniform, RouteKind::planned, RouteKind::planned_fixed_splits};
    EXPECT_EQ(o.route.kind, want[mode]);
    EXPECT_EQ(o.result.status, DecodeStatus::ok);
    EXPECT_EQ(r.counts().stale_results, 0u) << "a fresh plan counted as stale, mode " << mode;
    for (uint16_t h : t.out) ASSERT_EQ(bf16_to_f32(h), 0.0f) << "mode " << mode;
  }
}

TEST(Decode, UniformRejectOfABadCallThrows) {
  TinyCall t;
  Router r(Settings{true, true}, nullptr);
  t.call.context_lens.dtype = DType::i64;
  try {
    (void)decode(r, t.call, Site::sparse, nullptr);
    FAIL() << "int64 lengths ran";
  } catch (const RejectError& e) {
    EXPECT_EQ(e.clause(), Clause::context_lens_dtype);
  }
  EXPECT_EQ(r.counts().rejects_by_clause[size_t(Clause::context_lens_dtype)], 1u);
}

// Each of the router's one-time lines (a uniform route, no plan for the batch,
// a refused plan, a stale result) is logged exactly once, whichever comes first:
// one event's mark in the log's bitmap must not stand for another's.
TEST(Route, LogsEachFallbackOnceWhateverTheOrder) {
  const std::string uniform = "route: uniform", refused = "route: plan refused (stale lengths or shape): uniform";
  const std::string no_plan = "route: no plan for 2 seqs: uniform (plans are minted only at capture)";
  enum class Event { no_plan, refused, stale };
  const std::vector<std::vector<Event>> orders = {
      {Event::refused, Event::no_plan, Event::stale}, {Event::no_plan, Event::refused, Event::stale},
      {Event::stale, Event::refused, Event::no_plan}, {Event::stale, Event::no_plan, Event::refused}};
  for (const auto& order : orders) {
    Lines log;
    Router r(Settings{true, true}, log.sink());
    TinyCall t;  // lens {300, 20}
    Forward f(t);
    TinyCall grown;
    grown.lens[1] += 1;  // one more token than the plan of t holds: refused
    DecodeResult stale;
    stale.status = DecodeStatus::stale_plan;
    for (int twice = 0; twice < 2; ++twice)
      for (Event e : order) {
        if (e == Event::no_plan) (void)r.route(t.call, Site::dense, nullptr);
        if (e == Event::refused) (void)r.route(grown.call, Site::dense, &*f.md);
        if (e == Event::stale) r.note_stale(r.route(t.call, Site::dense, &*f.md), stale);
      }
    std::string shown;
    for (const auto& l : log.lines) shown += l + "\n";
    EXPECT_EQ(log.count(uniform), 1) << shown;
    EXPECT_EQ(log.count(refused), 1) << shown;
    EXPECT_EQ(log.count(no_plan), 1) << shown;
    EXPECT_EQ(log.count_containing("stale plan flagged"), 1) << shown;
  }
}
