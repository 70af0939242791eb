// SPDX-License-Identifier: Apache-2.0
// The built-in properties: pav's planner and routing gate, checked through
// pav's own planner and launch entry, and pav's kernels as kernels under test.
#include "properties/checks/builtin_properties.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "input/json_input.hpp"
#include "kernels/codecs.hpp"
#include "kernels/dispatch/gate.hpp"
#include "kernels/launch.hpp"
#include "kernels/validate.hpp"
#include "properties/gen/gate_gen.hpp"
#include "properties/gen/gen.hpp"
#include "properties/checks/kernel_properties.hpp"
#include "properties/gen/shrink_cases.hpp"

namespace pav::props::fuzz {

using namespace pav::kernels;
using nlohmann::json;

namespace {

// ---- planner ---------------------------------------------------------------------

// A batch of raw lengths and the plan parameters; `prior` are the lengths the
// live plan held before this refresh (refresh must not depend on them).
struct PlannerCase {
  std::vector<int32_t> lens, prior;
  int64_t hkv = 1, cu = 1, max_partitions = 0, budget = 0;
};

rc::Gen<PlannerCase> gen_planner_case() {
  return rc::gen::exec([] {
    PlannerCase c;
    c.lens = *gen_plan_lengths();
    c.prior = *rc::gen::container<std::vector<int32_t>>(c.lens.size(), gen_plan_length());
    // Shrinking replays recorded picks, so prior may come back sized for an
    // older lens: pad or cut it to match.
    c.prior.resize(c.lens.size(), 0);
    c.hkv = *rc::gen::element<int64_t>(1, 2, 3, 4, 8);
    c.cu = *rc::gen::element<int64_t>(1, 8, 80, 132, 256, 304);
    c.max_partitions =
        *rc::gen::weightedOneOf<int64_t>({{2, rc::gen::just<int64_t>(0)}, {1, rc::gen::inRange<int64_t>(1, c.cu + 1)}});
    c.max_partitions = std::min(c.max_partitions, c.cu);
    c.budget = *rc::gen::weightedOneOf<int64_t>({{2, rc::gen::just<int64_t>(0)}, {1, rc::gen::inRange<int64_t>(1, 5000)}});
    return c;
  });
}

Verdict check_planner(const PlannerCase& c) {
  const int64_t n = int64_t(c.lens.size());
  if (c.prior.size() != c.lens.size()) return Verdict::fail("prior_lens and lens differ in size");
  const PlanParams params{n, c.hkv, c.cu, c.max_partitions, c.budget};
  WorkPlan live(params);
  live.refresh(c.prior.data());
  live.refresh(c.lens.data());
  WorkPlan fresh(params);
  fresh.refresh(c.lens.data());
  if (live.work_info() != fresh.work_info() || live.reduce_info() != fresh.reduce_info())
    return Verdict::fail("a refresh over a plan of other lengths differs from a fresh build");

  // Capacity, from the planner's formula (docs/numerics.md) without the planner's helpers.
  const int64_t maxp = c.max_partitions ? c.max_partitions : c.cu;
  const int64_t budget = c.budget ? c.budget : 2 * c.cu;
  const int64_t per_head = budget / c.hkv + (budget % c.hkv != 0);
  const int64_t want_capacity = std::min(n * maxp, std::max(n, per_head));
  if (live.capacity() != want_capacity)
    return Verdict::fail(fmt::format("capacity {} != min(num_seqs*max_partitions, max(num_seqs, "
                                     "ceil(budget/hkv))) = {}",
                                     live.capacity(), want_capacity));

  const std::string why = check_plan_structure(live.view());
  if (!why.empty()) return Verdict::fail("check_plan_structure: " + why);

  // Coverage, checked here too so a lenient check_plan_structure cannot hide it.
  const auto& w = live.work_info();
  const auto& r = live.reduce_info();
  int64_t next = 0;
  for (int64_t b = 0; b < n; ++b) {
    const int64_t first = r[2 * b], count = r[2 * b + 1];
    const int64_t tiles = c.lens[b] > 0 ? (int64_t(c.lens[b]) + kTileTokens - 1) / kTileTokens : 0;
    if (first != next) return Verdict::fail(fmt::format("seq {}: first task {} != {}", b, first, next));
    if ((count == 0) != (tiles == 0) || count > std::min(tiles, maxp) || count < 0)
      return Verdict::fail(fmt::format("seq {} (len {}, {} tiles): {} partitions, max_partitions {}", b, c.lens[b],
                                       tiles, count, maxp));
    int64_t covered = 0;
    for (int64_t k = 0; k < count; ++k) {
      const int32_t* t = &w[size_t(4 * (first + k))];
      if (t[0] != b || t[1] != covered || t[2] <= t[1] || t[3] != c.lens[b])
        return Verdict::fail(fmt::format("seq {} task {}: [{}, {}, {}, {}] after {} tiles covered", b, k, t[0], t[1],
                                         t[2], t[3], covered));
      covered = t[2];
    }
    if (covered != tiles)
      return Verdict::fail(fmt::format("seq {}: tasks cover {} of {} tiles", b, covered, tiles));
    next += count;
  }
  if (next > live.capacity())
    return Verdict::fail(fmt::format("{} active tasks > capacity {}", next, live.capacity()));
  for (int64_t i = 4 * next; i < 4 * live.capacity(); ++i)
    if (w[size_t(i)] != 0) return Verdict::fail(fmt::format("padding slot {} not zero", i / 4));
  if (!plan_is_fresh(live.view(), c.lens.data(), n))
    return Verdict::fail("plan_is_fresh reports a just-refreshed plan stale");
  return Verdict::pass();
}

std::vector<PlannerCase> simpler_planner_cases(const PlannerCase& p) {
  std::vector<PlannerCase> out;
  const size_t n = p.lens.size();
  if (n > 1)
    for (size_t i = 0; i < n; ++i) {
      PlannerCase c = p;
      c.lens.erase(c.lens.begin() + long(i));
      c.prior.erase(c.prior.begin() + long(i));
      out.push_back(std::move(c));
    }
  for (size_t i = 0; i < n; ++i)
    for (int32_t len : shorter_lengths(p.lens[i])) {
      PlannerCase c = p;
      c.lens[i] = len;
      out.push_back(std::move(c));
    }
  if (std::any_of(p.prior.begin(), p.prior.end(), [](int32_t x) { return x != 0; })) {
    PlannerCase c = p;
    std::fill(c.prior.begin(), c.prior.end(), 0);
    out.push_back(std::move(c));
  }
  if (p.hkv > 1) {
    PlannerCase c = p;
    c.hkv = 1;
    out.push_back(std::move(c));
  }
  if (p.max_partitions != 0) {
    PlannerCase c = p;
    c.max_partitions = 0;
    out.push_back(std::move(c));
  }
  if (p.budget != 0) {
    PlannerCase c = p;
    c.budget = 0;
    out.push_back(std::move(c));
  }
  for (int64_t cu : {1, 8, 80, 132, 256})
    if (cu < p.cu) {
      PlannerCase c = p;
      c.cu = cu;
      c.max_partitions = std::min(c.max_partitions, cu);
      out.push_back(std::move(c));
    }
  return out;
}

CaseSpec planner_to_case(const PlannerCase& c, json& meta) {
  CaseSpec s;
  s.lens = c.lens;
  s.hkv = int(c.hkv);
  s.opt.cu = int(c.cu);
  s.max_partitions = c.max_partitions;
  s.workgroup_budget = c.budget;
  meta["prior_lens"] = c.prior;
  return s;
}

PlannerCase planner_from_case(const CaseSpec& s, const json& meta) {
  PlannerCase c;
  c.lens = s.lens;
  c.hkv = s.hkv;
  c.cu = s.opt.cu;
  c.max_partitions = s.max_partitions;
  c.budget = s.workgroup_budget;
  if (meta.contains("prior_lens")) c.prior = meta.at("prior_lens").get<std::vector<int32_t>>();
  else c.prior.assign(c.lens.rbegin(), c.lens.rend());
  return c;
}

// ---- gate mirror ---------------------------------------------------------------------

float out_value(const GateCase& g, int64_t i) {
  const uint16_t h = g.host.out[size_t(i)];
  return g.call.out.dtype == DType::bf16 ? bf16_to_f32(h) : f16_to_f32(h);
}

Verdict check_gate(const GateSpec& spec, const CheckContext& ctx) {
  GateCase g = materialize(spec);
  const dispatch::GateVerdict v = dispatch::gate(g.call, g.plan(), &g.scratch);
  if (v.accepted) g.host.poison_output();
  bool threw = false;
  Clause thrown = Clause::none;
  std::string thrown_what;
  DecodeResult r;
  try {
    r = launch_planned(g.call, g.plan(), g.scratch, ctx.backend);
  } catch (const RejectError& e) {
    threw = true;
    thrown = e.clause();
    thrown_what = e.what();
  }
  const std::string gate_clause(clause_name(v.clause));
  if (v.accepted && threw) return Verdict::fail("the gate accepts but launch_planned throws: " + thrown_what);
  if (!v.accepted && !threw)
    return Verdict::fail("the gate rejects (" + gate_clause + ") but launch_planned runs the call");
  if (threw && v.clause != thrown)
    return Verdict::fail("the gate names " + gate_clause + ", launch_planned throws " +
                         std::string(clause_name(thrown)));
  if (spec.violate != Clause::none) {
    if (v.accepted)
      return Verdict::fail("the gate accepts a call breaking " + std::string(clause_name(spec.violate)));
    if (v.clause != spec.violate)
      return Verdict::fail("the call breaks " + std::string(clause_name(spec.violate)) + ", the gate names " +
                           gate_clause);
    return Verdict::pass();
  }
  if (!v.accepted) return Verdict::fail("the gate rejects a valid call (" + gate_clause + ")");
  if (r.status != DecodeStatus::ok) return Verdict::fail("launch_planned reports a stale plan for a fresh one");
  const CaseSpec& s = g.host.spec;
  const int64_t row = int64_t(s.hkv) * s.group * s.head_dim;
  for (int64_t seq = 0; seq < int64_t(s.lens.size()); ++seq)
    for (int64_t p = 0; p < s.q_len; ++p) {
      const bool visible = row_has_visible_token(s, seq, p);
      for (int64_t i = 0; i < row; ++i) {
        const float x = out_value(g, (seq * s.q_len + p) * row + i);
        if (!std::isfinite(x) || (!visible && x != 0.0f))
          return Verdict::fail(fmt::format("output seq {} pos {} element {} = {} after an accepted launch{}", seq,
                                           p, i, x, visible ? "" : " (a row with no visible token)"));
      }
    }
  return Verdict::pass();
}

CaseSpec gate_to_case(const GateSpec& g, json& meta) {
  meta["with_plan"] = g.with_plan;
  meta["violate"] = std::string(clause_name(g.violate));
  meta["variant"] = g.variant;
  return g.base;
}

GateSpec gate_from_case(const CaseSpec& s, const json& meta) {
  GateSpec g;
  g.base = s;
  g.with_plan = meta.value("with_plan", true);
  const std::string c = meta.value("violate", std::string("none"));
  if (c == "none") g.violate = Clause::none;
  else if (!parse_clause(c, g.violate)) throw std::invalid_argument("meta.violate: unknown clause '" + input::excerpt(c) + "'");
  g.variant = meta.value("variant", 0);
  if (g.violate != Clause::none && (g.variant < 0 || g.variant >= violation_variants(g.violate)))
    throw std::invalid_argument("meta.variant: " + std::to_string(g.variant) + " is not a variant of clause " +
                                c + " (0.." + std::to_string(violation_variants(g.violate) - 1) + ")");
  check_case_spec(s);  // the base call is built: refuse one past the memory limit first
  return g;
}

std::vector<Property> build_properties() {
  std::vector<Property> v;
  v.push_back(make_property<PlannerCase>({
      "planner",
      "plans of generated uneven batches: refresh == fresh build, capacity formula, every tile once in order, "
      "padding zero, fresh",
      true,
      gen_planner_case(),
      [](const PlannerCase& c, const CheckContext&) { return check_planner(c); },
      planner_to_case,
      planner_from_case,
      [](const PlannerCase& c) {
        return fmt::format("lens {} hkv {} cu {} max_partitions {} budget {}", lens_text(c.lens), c.hkv, c.cu,
                           c.max_partitions, c.budget);
      },
      simpler_planner_cases,
  }));
  // pav's own kernels: the same properties as any kernel under test's
  // (decode, batch-invariance, reject, stale), gate-mirror after decode.
  std::vector<Property> own = pav_kernel_properties();
  v.push_back(std::move(own.front()));
  v.push_back(make_property<GateSpec>({
      "gate-mirror",
      "the gate accepts <=> launch_planned does not throw, naming the same clause; generated calls breaking "
      "each clause, and valid calls whose output is checked",
      false,
      gen_gate_spec(),
      check_gate,
      gate_to_case,
      gate_from_case,
      [](const GateSpec& g) { return to_string(g); },
  }));
  for (size_t i = 1; i < own.size(); ++i) v.push_back(std::move(own[i]));
  return v;
}

}  // namespace

const std::vector<Property>& properties() {
  static const std::vector<Property> v = build_properties();
  return v;
}

const Property* find_property(const std::string& name) {
  for (const Property& p : properties())
    if (p.name == name) return &p;
  return nullptr;
}

bool is_host_property(const std::string& name) { return name == "planner" || name == "gate-mirror"; }

}  // namespace pav::props::fuzz
