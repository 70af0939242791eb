// SPDX-License-Identifier: Apache-2.0
// The gate mirrors the planned kernel: for every call, gate() accepts exactly
// when launch_planned() with the same arguments runs, and on reject names the
// clause launch_planned throws with. Calls come from one generator per clause
// (near-boundary values breaking exactly that clause) and a generator of valid
// calls; accepted calls are really launched on the CPU backend.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <set>

#include "kernels/codecs.hpp"
#include "kernels/dispatch/gate.hpp"
#include "kernels/dispatch/route.hpp"
#include "kernels/launch.hpp"
#include "properties/gen/gate_gen.hpp"

using namespace pav::kernels;
using namespace pav::props;
using pav::kernels::dispatch::gate;
using pav::kernels::dispatch::GateVerdict;

namespace {

struct LaunchOutcome {
  bool threw = false;
  Clause clause = Clause::none;
  DecodeResult result;
};

LaunchOutcome launch(GateCase& g) {
  LaunchOutcome o;
  try {
    o.result = launch_planned(g.call, g.plan(), g.scratch);
  } catch (const RejectError& e) {
    o.threw = true;
    o.clause = e.clause();
  }
  return o;
}

float out_at(const GateCase& g, int64_t i) {
  const uint16_t h = g.host.out[size_t(i)];
  return g.call.out.dtype == DType::bf16 ? bf16_to_f32(h) : f16_to_f32(h);
}

// After a run of a valid call: every element finite, rows that see no token 0.
void check_output(const GateCase& g) {
  const CaseSpec& s = g.host.spec;
  const int64_t hq = int64_t(s.hkv) * s.group, D = s.head_dim;
  for (int64_t seq = 0; seq < int64_t(s.lens.size()); ++seq)
    for (int64_t p = 0; p < s.q_len; ++p) {
      const bool visible = row_has_visible_token(s, seq, p);
      for (int64_t i = 0; i < hq * D; ++i) {
        const float v = out_at(g, (seq * s.q_len + p) * hq * D + i);
        RC_ASSERT(std::isfinite(v));
        if (!visible) RC_ASSERT(v == 0.0f);
      }
    }
}

std::set<Clause> distinct_clauses(const std::vector<Finding>& fs) {
  std::set<Clause> out;
  for (const Finding& f : fs) out.insert(f.clause);
  return out;
}

}  // namespace

TEST(GateMirror, EveryClauseHasAGenerator) {
  std::vector<std::string> missing;
  for (const ClauseInfo& ci : clause_table())
    if (violation_variants(ci.id) < 1) missing.emplace_back(ci.name);
  EXPECT_TRUE(missing.empty()) << "clauses without a violation generator: " << ::testing::PrintToString(missing);
  EXPECT_EQ(int(clauses_with_generators().size()), kClauseCount);
}

// Every variant of every clause, on a fixed base with and without a plan: the
// call breaks that clause and no other.
TEST(GateMirror, EveryVariantBreaksExactlyItsClauseOnTheFixedBase) {
  for (Clause c : clauses_with_generators())
    for (int v = 0; v < violation_variants(c); ++v)
      for (bool with_plan : {true, false}) {
        const GateSpec spec = fixed_violation_spec(c, v, with_plan);
        GateCase g = materialize(spec);
        const auto found = distinct_clauses(all_violations(g.call, KernelKind::planned, g.plan(), &g.scratch));
        EXPECT_EQ(found, std::set<Clause>{c}) << to_string(spec);
      }
}

RC_GTEST_PROP(GateMirror, EachGeneratorBreaksExactlyItsClause, ()) {
  const Clause c = *rc::gen::resize(100, rc::gen::elementOf(clauses_with_generators()));
  const GateSpec spec = *gen_violating_gate_spec(c);
  GateCase g = materialize(spec);
  const auto found = distinct_clauses(all_violations(g.call, KernelKind::planned, g.plan(), &g.scratch));
  RC_ASSERT(found == std::set<Clause>{c});
}

RC_GTEST_PROP(GateMirror, ValidCallsPassAndRun, ()) {
  const GateSpec spec = *gen_valid_gate_spec();
  GateCase g = materialize(spec);
  RC_ASSERT(all_violations(g.call, KernelKind::planned, g.plan(), &g.scratch).empty());
  RC_ASSERT(all_violations(g.call, KernelKind::uniform, nullptr, nullptr).empty());
  g.host.poison_output();
  const DecodeResult r = launch_planned(g.call, g.plan(), g.scratch);
  RC_ASSERT(r.status == DecodeStatus::ok);
  check_output(g);
}

// The property the routing depends on: accept <=> the planned launch runs, with
// the same clause on reject. 10,000 cases under the fuzz label.
RC_GTEST_PROP(GateMirror, GateAcceptsIffPlannedLaunchRuns, ()) {
  const GateSpec spec = *gen_gate_spec();
  GateCase g = materialize(spec);
  const GateVerdict v = gate(g.call, g.plan(), &g.scratch);
  if (v.accepted) g.host.poison_output();
  const LaunchOutcome o = launch(g);
  RC_TAG(spec.violate == Clause::none ? "valid" : "violation");
  RC_ASSERT(v.accepted == !o.threw);
  if (o.threw) RC_ASSERT(v.clause == o.clause);
  if (spec.violate != Clause::none) {
    RC_ASSERT(!v.accepted);
    RC_ASSERT(v.clause == spec.violate);
  } else {
    RC_ASSERT(v.accepted);
    RC_ASSERT(o.result.status == DecodeStatus::ok);
    check_output(g);
  }
}

// Without a plan the router passes no scratch to the gate and sizes it itself:
// whatever the gate accepts then runs through decode() without a reject.
RC_GTEST_PROP(GateMirror, FixedSplitsRouteRunsWhatTheGateAccepts, ()) {
  GateSpec spec = *gen_gate_spec();
  // Scratch and plan clauses concern what the caller hands over; here the
  // router sizes scratch and there is no plan.
  switch (spec.violate) {
    case Clause::scratch_dtype: case Clause::scratch_shape: case Clause::plan_ceiling:
    case Clause::plan_shape: case Clause::plan_invalid: spec.violate = Clause::none; break;
    default: break;
  }
  spec.with_plan = false;
  GateCase g = materialize(spec);
  using namespace pav::kernels::dispatch;
  Router router(Settings{true, false}, nullptr);
  const Route r = router.route(g.call, Site::sparse, nullptr);
  if (spec.violate == Clause::none) {
    RC_ASSERT(r.kind == RouteKind::planned_fixed_splits);
    g.host.poison_output();
    const DecodeOutcome o = decode(router, g.call, Site::sparse, nullptr);
    RC_ASSERT(o.route.kind == RouteKind::planned_fixed_splits);
    check_output(g);
  } else {
    RC_ASSERT(r.kind == RouteKind::uniform);
    RC_ASSERT(r.clause == spec.violate);
  }
}
