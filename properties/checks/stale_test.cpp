// SPDX-License-Identifier: Apache-2.0
// Stale plans are never attended silently. A captured forward is mutated the
// ways a serving engine mutates it (draft steps advancing lengths in place,
// shrunk or zeroed lengths, one length grown alone, a changed batch or KV-head
// count, micro-batches' plans swapped, a dummy run in between); after each, either the plan is
// refreshed and the output matches the reference, or the plan is refused (by
// plan_matches or the gate) or the launch flags it and leaves those rows NaN.
// Plus the lifecycle: no mint outside capture, a bounded cache, dummy runs
// leave the live plan bit-identical, sparse sites never get a plan.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>
#include <vector>

#include "kernels/codecs.hpp"
#include "kernels/dispatch/route.hpp"
#include "kernels/dispatch/tiny_call.hpp"
#include "properties/gen/gen.hpp"
#include "properties/gen/stale_gen.hpp"
#include "reference/compare.hpp"
#include "reference/decode.hpp"

using namespace pav::kernels;
using namespace pav::kernels::dispatch;
using namespace pav::props;

namespace {

// One captured model and a forward over the scenario's live lengths.
struct World {
  explicit World(const StaleScenario& s)
      : host(build_case(s.spec)),
        cache(cache_config(s.spec), nullptr),
        builder(cache, Settings{true, true}),
        router(Settings{true, true}, nullptr) {
    std::copy(s.live.begin(), s.live.end(), host.lens.begin());
    (void)builder.build_for_graph_capture(batch());
  }
  BatchSpec batch(int32_t* lens = nullptr, int micro_batch = 0) { return batch_of(host, lens, micro_batch); }
  HostCase host;
  PlanCache cache;
  MetadataBuilder builder;
  Router router;
};

float out_at(const DecodeCall& call, int64_t i) {
  const uint16_t h = call.out.as<const uint16_t>()[i];
  return call.out.dtype == DType::bf16 ? bf16_to_f32(h) : f16_to_f32(h);
}

// Which sequences a plan no longer describes: a task recording another length,
// or no task for a sequence that now has tokens.
std::vector<bool> stale_sequences(const PlanView& plan, const int32_t* lens, int64_t num_seqs) {
  std::vector<bool> stale(size_t(num_seqs), false);
  for (int64_t b = 0; b < num_seqs && b < plan.num_seqs; ++b) {
    const int32_t first = plan.reduce_info[2 * b], count = plan.reduce_info[2 * b + 1];
    if (count == 0) stale[size_t(b)] = lens[b] > 0;
    for (int32_t p = 0; p < count; ++p)
      if (plan.work_info[4 * (first + p) + 3] != lens[b]) stale[size_t(b)] = true;
  }
  return stale;
}

// Rows of sequences in `skip` must be NaN (not attended); all others must meet
// the reference standard.
void check_against_reference(const DecodeCall& call, const std::vector<bool>& skip = {}) {
  const pav::reference::ReferenceResult ref = pav::reference::decode(call);
  if (skip.empty()) {
    const auto rep = pav::reference::compare(call.out, ref);
    RC_ASSERT_FALSE(!rep.passed());
    return;
  }
  const int64_t per_seq = int64_t(call.q_len) * call.q.shape[1] * call.q.shape[2];
  for (int64_t b = 0; b < int64_t(skip.size()); ++b)
    for (int64_t i = b * per_seq; i < (b + 1) * per_seq; ++i) {
      const float o = out_at(call, i);
      if (skip[size_t(b)]) {
        RC_ASSERT(std::isnan(o));
      } else {
        RC_ASSERT(std::isfinite(o));
        const double allowed = pav::reference::allowed_error(ref, i, {});
        RC_ASSERT(std::fabs(double(o) - double(ref.out[size_t(i)])) <= allowed);
      }
    }
}

// The stale plan handed straight to the planned kernel: flagged, the stale
// sequences left NaN, the others computed.
void launch_stale_directly(HostCase& host, const DecodeCall& call, const ForwardMetadata& md) {
  const PlanView& plan = *md.plan();
  const std::vector<bool> stale = stale_sequences(plan, call.context_lens.as<const int32_t>(),
                                                  call.context_lens.shape[0]);
  const bool any = std::find(stale.begin(), stale.end(), true) != stale.end();
  host.poison_output();
  const Scratch scratch = md.plan_scratch(int64_t(call.q_len) * (call.q.shape[1] / call.k_cache.shape[1]),
                                          call.q.shape[2]);
  const DecodeResult r = launch_planned(call, &plan, scratch);
  RC_ASSERT((r.status == DecodeStatus::stale_plan) == any);
  check_against_reference(call, stale);
}

// Routes and runs the call with md; returns the route.
Route run(World& w, const DecodeCall& call, const ForwardMetadata* md) {
  w.host.poison_output();
  const DecodeOutcome o = decode(w.router, call, Site::dense, md);
  RC_ASSERT(o.result.status == DecodeStatus::ok);
  check_against_reference(call);
  return o.route;
}

void expect_refused(World& w, const DecodeCall& call, const ForwardMetadata& md) {
  RC_ASSERT_FALSE(plan_matches(*md.plan(), call));
  const Route r = run(w, call, &md);
  RC_ASSERT(r.kind == RouteKind::uniform);
  RC_ASSERT(r.reason == RouteReason::plan_refused);
}

}  // namespace

namespace {

// One scenario: the captured forward, the mutation, and what must follow it.
void check_scenario(const StaleScenario& s) {
  World w(s);
  DecodeCall call = w.host.call();
  switch (s.mutation) {
    case Mutation::draft_steps: {
      ForwardMetadata md = w.builder.build_draft(Phase::replay, w.batch());
      RC_ASSERT(run(w, call, &md).kind == RouteKind::planned);
      for (int step = 0; step < s.steps; ++step) {
        for (int32_t& l : w.host.lens) ++l;  // the draft step advances lengths in place
        expect_refused(w, call, md);
        launch_stale_directly(w.host, call, md);
        w.builder.begin_draft_step(md);
        RC_ASSERT(run(w, call, &md).kind == RouteKind::planned);
      }
      return;
    }
    case Mutation::shrink:
    case Mutation::zero:
    case Mutation::grow_one: {
      const ForwardMetadata md = w.builder.build(Phase::replay, w.batch());
      std::copy(s.other.begin(), s.other.end(), w.host.lens.begin());
      expect_refused(w, call, md);
      launch_stale_directly(w.host, call, md);
      const ForwardMetadata next = w.builder.build(Phase::replay, w.batch());
      RC_ASSERT(run(w, call, &next).kind == RouteKind::planned);
      return;
    }
    case Mutation::batch_changed: {
      const ForwardMetadata md = w.builder.build(Phase::replay, w.batch());
      DecodeCall fewer = call;
      const int64_t b = call.context_lens.shape[0] - 1;
      fewer.context_lens.shape[0] = b;
      fewer.q.shape[0] = fewer.out.shape[0] = b * call.q_len;
      RC_ASSERT_FALSE(plan_matches(*md.plan(), fewer));
      const Scratch scratch = md.plan_scratch(int64_t(call.q_len) * s.spec.group, s.spec.head_dim);
      RC_ASSERT(gate(fewer, md.plan(), &scratch).clause == Clause::plan_shape);
      try {
        (void)launch_planned(fewer, md.plan(), scratch);
        RC_FAIL("planned launch accepted a plan for another batch");
      } catch (const RejectError& e) {
        RC_ASSERT(e.clause() == Clause::plan_shape);
      }
      expect_refused(w, fewer, md);
      // The next forward has that batch size: no capture minted it, so no plan.
      BatchSpec bs = w.batch();
      bs.num_seqs = b;
      const ForwardMetadata next = w.builder.build(Phase::replay, bs);
      RC_ASSERT(next.plan() == nullptr);
      RC_ASSERT(run(w, fewer, &next).reason == RouteReason::no_plan);
      return;
    }
    case Mutation::hkv_changed: {
      PlanParams p = plan_params(s.spec);
      p.kv_heads = s.spec.hkv + 1;
      WorkPlan other(p);
      other.refresh(w.host.lens.data());
      const PlanView view = other.view();
      RC_ASSERT_FALSE(plan_matches(view, call));
      HostScratch scratch = make_scratch(call, s.spec.hkv * other.capacity(), s.spec.hkv);
      RC_ASSERT(gate(call, &view, &scratch.view).clause == Clause::plan_shape);
      try {
        (void)launch_planned(call, &view, scratch.view);
        RC_FAIL("planned launch accepted a plan for another KV-head count");
      } catch (const RejectError& e) {
        RC_ASSERT(e.clause() == Clause::plan_shape);
      }
      return;
    }
    case Mutation::swapped_micro_batches: {
      std::vector<int32_t> other = s.other;
      const ForwardMetadata md0 = w.builder.build_micro_batch(Phase::capture, w.batch(nullptr, 0));
      const ForwardMetadata md1 = w.builder.build_micro_batch(Phase::capture, w.batch(other.data(), 1));
      for (const auto& a : md0.slot()->scratch_ranges())
        for (const auto& b : md1.slot()->scratch_ranges()) {
          const bool disjoint = a.end <= b.begin || b.end <= a.begin;
          RC_ASSERT(disjoint);
        }
      const bool own_plans = md0.plan()->work_info != md1.plan()->work_info;
      RC_ASSERT(own_plans);
      RC_ASSERT(run(w, call, &md0).kind == RouteKind::planned);
      if (other == s.live) {
        RC_ASSERT(run(w, call, &md1).kind == RouteKind::planned);  // the same plan content: harmless
      } else {
        expect_refused(w, call, md1);
        launch_stale_directly(w.host, call, md1);
      }
      return;
    }
    case Mutation::dummy_run: {
      const ForwardMetadata live = w.builder.build(Phase::replay, w.batch());
      const std::vector<int32_t> work = live.slot()->plan().work_info();
      const std::vector<int32_t> reduce = live.slot()->plan().reduce_info();
      const uint64_t launches = w.builder.planner_launches();
      std::vector<int32_t> synthetic = s.other;
      ForwardMetadata d1 = w.builder.build(Phase::dummy, w.batch(synthetic.data()));
      ForwardMetadata d2 = w.builder.build_draft(Phase::dummy, w.batch(synthetic.data()));
      ForwardMetadata d3 = w.builder.build_micro_batch(Phase::dummy, w.batch(synthetic.data()));
      w.builder.begin_draft_step(d2);
      RC_ASSERT(d1.plan() == nullptr && d2.plan() == nullptr && d3.plan() == nullptr);
      RC_ASSERT(w.builder.planner_launches() == launches);
      RC_ASSERT(live.slot()->plan().work_info() == work);
      RC_ASSERT(live.slot()->plan().reduce_info() == reduce);
      RC_ASSERT(run(w, call, &live).kind == RouteKind::planned);
      return;
    }
  }
}

}  // namespace

RC_GTEST_PROP(StalePlan, NoMutationIsAttendedSilently, ()) {
  const StaleScenario s = *gen_stale_scenario();
  RC_TAG(std::string(to_string(s.mutation)));
  check_scenario(s);
}

// Fixed cases, so the rarest mutations are exercised on every run and not only
// when the generator draws them: a row that was empty at refresh (no partitions)
// gets one token, and a row that had tasks grows by one tile.
TEST(StalePlan, GrowingOneRowAloneIsRefused) {
  for (const auto& [live, row, by] : {std::tuple{std::vector<int32_t>{0, 300}, 0, 1},
                                      std::tuple{std::vector<int32_t>{257, 0, 40}, 1, 256},
                                      std::tuple{std::vector<int32_t>{300, 20}, 1, 256}}) {
    StaleScenario s;
    s.mutation = Mutation::grow_one;
    s.live = live;
    s.other = live;
    s.other[size_t(row)] += by;
    CaseSpec& c = s.spec;
    c.lens = s.other;
    c.hkv = 2;
    c.group = 3;
    c.head_dim = 64;
    c.opt.cu = 8;
    c.opt.partial = DType::f32;
    c.seed = 7;
    c.sentinels = boundary_sentinels(s.live);
    for (int32_t t = live[size_t(row)]; t < c.lens[size_t(row)]; ++t) c.sentinels.push_back({row, t});
    // The checks are RapidCheck assertions; outside a property they throw.
    try {
      check_scenario(s);
    } catch (const rc::detail::CaseResult& r) {
      ADD_FAILURE() << to_string(s) << ": " << r.description;
    }
  }
}

namespace {

// A random forward in a serving engine's life.
struct ForwardStep {
  Phase phase;
  BuilderVariant variant;
  int num_seqs;
  int micro_batch;
  int32_t len;
};

ForwardMetadata build_step(MetadataBuilder& b, const ForwardStep& f, BatchSpec spec) {
  spec.micro_batch = f.micro_batch;
  switch (f.variant) {
    case BuilderVariant::plain: return b.build(f.phase, spec);
    case BuilderVariant::draft: return b.build_draft(f.phase, spec);
    case BuilderVariant::micro_batch: return b.build_micro_batch(f.phase, spec);
    case BuilderVariant::graph_capture: return b.build_for_graph_capture(spec);
  }
  return b.build(f.phase, spec);
}

}  // namespace

// A random life of captures, warm-ups, replays, eager and dummy forwards: plans
// are minted only by capture builds, never past the bound, never replaced; a
// runtime forward gets a plan exactly when its key was minted; dummy runs never
// get one; dense sites use a fresh plan, sparse sites never do.
RC_GTEST_PROP(Lifecycle, PlansFollowTheCaptureRules, ()) {
  const size_t max_plans = *rc::gen::inRange<size_t>(1, 5);
  const auto steps = *rc::gen::container<std::vector<ForwardStep>>(rc::gen::exec([] {
    ForwardStep f;
    f.phase = *rc::gen::element(Phase::capture, Phase::warmup, Phase::replay, Phase::eager, Phase::dummy);
    f.variant = *rc::gen::element(BuilderVariant::plain, BuilderVariant::draft, BuilderVariant::micro_batch,
                                  BuilderVariant::graph_capture);
    f.num_seqs = *rc::gen::inRange(1, 5);
    f.micro_batch = *rc::gen::inRange(0, 2);
    f.len = *rc::gen::inRange<int32_t>(0, 700);
    return f;
  }));
  PlanCacheConfig cfg;
  cfg.cu = 8;
  cfg.kv_heads = 1;
  cfg.head_dim = 64;
  cfg.group = 2;
  cfg.partial = DType::f32;
  cfg.max_plans = max_plans;
  PlanCache cache(cfg, nullptr);
  MetadataBuilder builder(cache, Settings{true, true});
  Router router(Settings{true, true}, nullptr);
  std::set<std::tuple<int, int>> minted;  // (num_seqs, micro_batch) on device 0
  std::vector<std::pair<const PlanSlot*, std::vector<int32_t>>> seen_slots;
  for (const ForwardStep& f : steps) {
    pav::kernels::testing::TinySpec ts;
    ts.lens.assign(size_t(f.num_seqs), f.len);
    for (size_t i = 0; i < ts.lens.size(); ++i) ts.lens[i] = int32_t((f.len + 97 * i) % 700);
    ts.cu = 8;
    ts.hkv = 1;
    ts.group = 2;
    ts.head_dim = 64;
    pav::kernels::testing::TinyCall t(ts);
    BatchSpec spec;
    spec.num_seqs = f.num_seqs;
    spec.context_lens = t.lens.data();
    const uint64_t minted_before = cache.minted();
    const ForwardMetadata md = build_step(builder, f, spec);
    const Phase phase = md.phase();
    const bool capture = phase == Phase::capture;
    const auto key = std::make_tuple(f.num_seqs, f.micro_batch);
    if (!capture) RC_ASSERT(cache.minted() == minted_before);
    if (capture && !minted.count(key) && minted.size() < max_plans) minted.insert(key);
    RC_ASSERT(cache.size() == minted.size());
    RC_ASSERT(cache.size() <= max_plans);
    const bool expect_plan = phase != Phase::dummy && minted.count(key) > 0;
    RC_ASSERT((md.plan() != nullptr) == expect_plan);
    if (md.plan()) {
      RC_ASSERT(plan_matches(*md.plan(), t.call));
      RC_ASSERT(check_plan_structure(*md.plan()).empty());
      // Never replaced: a key always maps to the slot it first got.
      for (const auto& [slot, _] : seen_slots)
        if (slot->key() == md.slot()->key()) RC_ASSERT(slot == md.slot());
      seen_slots.emplace_back(md.slot(), std::vector<int32_t>{});
    }
    const Route dense = router.route(t.call, Site::dense, &md);
    RC_ASSERT((dense.kind == RouteKind::planned) == (md.plan() != nullptr));
    const Route sparse = router.route(t.call, Site::sparse, &md);
    RC_ASSERT(sparse.plan == nullptr);
    RC_ASSERT(sparse.kind != RouteKind::planned);
  }
}

// With the kernel off nothing in the lifecycle runs: no gate check, no plan.
RC_GTEST_PROP(Lifecycle, FeatureOffRunsNoGateAndBuildsNoPlan, ()) {
  const Settings off{false, *rc::gen::arbitrary<bool>()};
  PlanCacheConfig cfg;
  cfg.cu = 8;
  cfg.head_dim = 64;
  cfg.group = 2;
  PlanCache cache(cfg, nullptr);
  MetadataBuilder builder(cache, off);
  Router router(off, nullptr);
  const int forwards = *rc::gen::inRange(1, 6);
  for (int i = 0; i < forwards; ++i) {
    pav::kernels::testing::TinyCall t;
    BatchSpec spec;
    spec.num_seqs = int64_t(t.lens.size());
    spec.context_lens = t.lens.data();
    const ForwardMetadata md = builder.build_for_graph_capture(spec);
    RC_ASSERT(md.plan() == nullptr);
    RC_ASSERT(router.route(t.call, *rc::gen::element(Site::dense, Site::sparse), &md).kind == RouteKind::uniform);
  }
  RC_ASSERT(router.counts().gate_checks == 0u);
  RC_ASSERT(cache.size() == 0u);
  RC_ASSERT(builder.planner_launches() == 0u);
}
