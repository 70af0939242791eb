// SPDX-License-Identifier: Apache-2.0
#include "properties/fuzz.hpp"

#include <fmt/core.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <mutex>
#include <new>
#include <system_error>
#include <thread>

#include <tbb/task_arena.h>

#include "common/durable_file.hpp"
#include "common/progress.hpp"
#include "kernels/codecs.hpp"
#include "kernels/dispatch/gate.hpp"
#include "kernels/validate.hpp"
#include "properties/case_format.hpp"
#include "properties/gate_gen.hpp"
#include "properties/gen.hpp"
#include "properties/runner.hpp"

namespace pav::props::fuzz {

using namespace pav::kernels;
using nlohmann::json;

uint64_t case_seed(uint64_t base, uint64_t k, int shard_index, int shard_count) {
  return base + k * uint64_t(shard_count) + uint64_t(shard_index);
}

uint64_t job_case_index(int job, int jobs, uint64_t m) { return uint64_t(job) + m * uint64_t(jobs); }

int case_size(uint64_t seed) { return int(seed % uint64_t(kMaxSize + 1)); }

uint64_t StreamPoint::fresh_case(uint64_t i) const {
  // Each index already run at or below the candidate pushes it one further.
  uint64_t k = next_case + i;
  for (uint64_t done : done_beyond) {
    if (done > k) break;
    ++k;
  }
  return k;
}

StreamPoint advance_stream(const StreamPoint& from, const std::vector<int64_t>& cases_per_job) {
  const uint64_t jobs = cases_per_job.size();
  // The first fresh index not run: each job ran a prefix of its own indices.
  uint64_t frontier = UINT64_MAX;
  for (uint64_t j = 0; j < jobs; ++j)
    frontier = std::min(frontier, j + uint64_t(cases_per_job[j]) * jobs);
  if (jobs == 0) frontier = 0;
  StreamPoint to;
  to.next_case = from.fresh_case(frontier);
  for (uint64_t done : from.done_beyond)
    if (done > to.next_case) to.done_beyond.push_back(done);
  for (uint64_t j = 0; j < jobs; ++j)
    for (uint64_t m = 0; m < uint64_t(cases_per_job[j]); ++m)
      if (const uint64_t i = j + m * jobs; i > frontier) to.done_beyond.push_back(from.fresh_case(i));
  std::sort(to.done_beyond.begin(), to.done_beyond.end());
  return to;
}

std::mutex& generation_mutex() {
  static std::mutex m;
  return m;
}

bool shrink_limit_reached(const ShrinkLimits& limits, int64_t tries, std::chrono::steady_clock::time_point t0) {
  return tries >= limits.max_tries ||
         std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > limits.max_seconds ||
         (limits.should_stop && limits.should_stop());
}

namespace {

std::string lens_text(const std::vector<int32_t>& lens, size_t max_shown = 12) {
  std::string s = "[";
  for (size_t i = 0; i < lens.size() && i < max_shown; ++i) s += (i ? "," : "") + std::to_string(lens[i]);
  if (lens.size() > max_shown) s += fmt::format(",... ({} total)", lens.size());
  return s + "]";
}

const char* path_name(Path p) { return p == Path::planned ? "planned" : "uniform"; }

std::string describe_spec(const CaseSpec& s) {
  return fmt::format("lens {} q_len {} hkv {} G {} D {} block {} {} path, {} partial, cu {}", lens_text(s.lens),
                     s.q_len, s.hkv, s.group, s.head_dim, s.block_size, path_name(s.path),
                     std::string(to_string(s.opt.partial)), s.opt.cu);
}

// Shorter lengths to try in place of len, most aggressive first: the tile
// boundaries, and len minus len/2, len/4, ..., 1, so a failure that starts at
// some length is walked down to it in about log2(len) accepted steps.
std::vector<int32_t> shorter_lengths(int32_t len) {
  if (len <= 0) return len < 0 ? std::vector<int32_t>{0} : std::vector<int32_t>{};
  std::vector<int32_t> v = {0, 1, 2, 3, 255, 256, 257, 511, 512, 513};
  for (int32_t cut = len / 2; cut >= 1; cut /= 2) v.push_back(len - cut);
  v.push_back(len - 1);
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  v.erase(std::remove_if(v.begin(), v.end(), [&](int32_t x) { return x >= len; }), v.end());
  return v;
}

// Simpler decode calls than s, each still a valid call of the generator's
// domain. keep_seq >= 0: that request is never removed (its new index is
// returned alongside).
std::vector<std::pair<CaseSpec, int64_t>> simpler_specs(const CaseSpec& s, int64_t keep_seq) {
  std::vector<std::pair<CaseSpec, int64_t>> out;
  auto add = [&](CaseSpec c, int64_t seq) {
    if (!c.sentinels.empty()) c.sentinels = boundary_sentinels(c.lens);
    fit_derived_fields(c);  // per-head values and a large cache's low blocks follow the smaller call
    out.emplace_back(std::move(c), seq);
  };
  const int64_t n = int64_t(s.lens.size());
  if (n > 1)
    for (int64_t i = 0; i < n; ++i) {
      if (i == keep_seq) continue;
      CaseSpec c = s;
      c.lens.erase(c.lens.begin() + i);
      add(std::move(c), keep_seq > i ? keep_seq - 1 : keep_seq);
    }
  for (int64_t i = 0; i < n; ++i)
    for (int32_t len : shorter_lengths(s.lens[size_t(i)])) {
      CaseSpec c = s;
      c.lens[size_t(i)] = len;
      add(std::move(c), keep_seq);
    }
  auto field = [&](auto edit) {
    CaseSpec c = s;
    edit(c);
    add(std::move(c), keep_seq);
  };
  if (!s.sentinels.empty()) field([](CaseSpec& c) { c.sentinels.clear(); });
  // The attention variant, one part at a time.
  if (s.window_left >= 0) field([](CaseSpec& c) { c.window_left = -1; });
  if (s.soft_cap != 0.0f) field([](CaseSpec& c) { c.soft_cap = 0.0f; });
  if (s.sinks) field([](CaseSpec& c) { c.sinks.reset(); });
  if (s.alibi_slopes) field([](CaseSpec& c) { c.alibi_slopes.reset(); });
  if (s.opt.softmax_scale != 0.0f && s.extreme_logits == 0) field([](CaseSpec& c) { c.opt.softmax_scale = 0.0f; });
  if (s.extreme_logits != 0)
    field([](CaseSpec& c) {
      c.extreme_logits = 0;
      c.opt.softmax_scale = 0.0f;
    });
  if (s.zero_q_head) field([](CaseSpec& c) { c.zero_q_head = false; });
  if (s.constant_q_head) field([](CaseSpec& c) { c.constant_q_head = false; });
  if (s.logit_ties != 0) field([](CaseSpec& c) { c.logit_ties = 0; });
  if (s.logit_ties == 2) field([](CaseSpec& c) { c.logit_ties = 1; });  // near ties made exact
  if (s.null_block) field([](CaseSpec& c) { c.null_block = false; });
  if (s.q_len > 1) field([](CaseSpec& c) { c.q_len = 1; });
  if (s.q_len > 2) field([](CaseSpec& c) { c.q_len -= 1; });
  if (s.hkv > 1) field([](CaseSpec& c) { c.hkv = 1; });
  if (s.hkv > 2) field([](CaseSpec& c) { c.hkv -= 1; });
  if (s.group > 1) field([](CaseSpec& c) { c.group = 1; });
  if (s.group > 2) field([](CaseSpec& c) { c.group /= 2; });
  if (s.group > 2) field([](CaseSpec& c) { c.group -= 1; });
  if (s.v_head_dim == 0) {
    if (s.head_dim > 64) field([](CaseSpec& c) { c.head_dim = 64; });
    if (s.head_dim > 128) field([](CaseSpec& c) { c.head_dim = 128; });
  } else if (s.head_dim > 192) {  // MLA: the narrow head 128 + 64
    field([](CaseSpec& c) {
      c.head_dim = 192;
      c.v_head_dim = 128;
    });
  }
  if (s.block_size > 16) field([](CaseSpec& c) { c.block_size = 16; });
  // The cache format, one part at a time (each kept only inside the kernel's description).
  if (s.block_size > 1 && s.layout != kernels::CacheLayout::packed) field([](CaseSpec& c) { c.block_size = 1; });
  if (s.page_pad != 0) field([](CaseSpec& c) { c.page_pad = 0; });
  if (s.row_pad != 0) field([](CaseSpec& c) { c.row_pad = 0; });
  if (s.kv_combined) field([](CaseSpec& c) { c.kv_combined = false; });
  if (s.page_table != kernels::PageTable::block_table) field([](CaseSpec& c) { c.page_table = kernels::PageTable::block_table; });
  if (s.v_scales) field([](CaseSpec& c) { c.v_scales.reset(); });
  if (s.q_row_pad != 0) field([](CaseSpec& c) { c.q_row_pad = 0; });
  if (s.spare_blocks > 1) field([](CaseSpec& c) { c.spare_blocks = 1; });
  if (s.scales != ScaleKind::none) field([](CaseSpec& c) { c.scales = ScaleKind::none; });
  if (s.scales == ScaleKind::per_token) field([](CaseSpec& c) { c.scales = ScaleKind::per_tensor; });
  if (s.max_partitions != 0) field([](CaseSpec& c) { c.max_partitions = 0; });
  if (s.opt.uniform_partitions > 1) field([](CaseSpec& c) { c.opt.uniform_partitions = 1; });
  if (s.opt.uniform_partitions > 2) field([](CaseSpec& c) { c.opt.uniform_partitions /= 2; });
  if (s.opt.cu > 8)
    field([](CaseSpec& c) {
      c.opt.cu = 8;
      c.max_partitions = std::min<int64_t>(c.max_partitions, 8);
    });
  return out;
}

}  // namespace

std::vector<CaseSpec> simpler_decode_specs(const CaseSpec& s) {
  std::vector<CaseSpec> out;
  for (auto& [c, seq] : simpler_specs(s, -1)) out.push_back(std::move(c));
  return out;
}

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

// ---- decode ------------------------------------------------------------------------

// "Small shapes" for the fuzz decode property: see docs/fuzzing.md, "Properties" and "Throughput", for the figures
// behind these limits (one case must stay well under 200 ms on one core).
DecodeGenLimits fuzz_decode_limits() {
  DecodeGenLimits lim;
  lim.max_batch = 5;
  lim.max_total_tokens = 20000;
  lim.allow_long = true;
  return lim;
}

Verdict check_decode(const CaseSpec& spec, const CheckContext& ctx) {
  HostCase c = build_case(spec);
  try {
    const CaseCheck k = check_case(c, ctx.backend);
    if (!k.passed) return Verdict::fail(k.verdict);
  } catch (const RejectError& e) {
    return Verdict::fail(std::string("the kernel rejected a valid call: ") + e.what());
  }
  return Verdict::pass();
}

// ---- batch invariance ----------------------------------------------------------------

struct BatchCase {
  CaseSpec spec;    // uniform path, fixed split count
  int64_t seq = 0;  // the request run alone
};

rc::Gen<BatchCase> gen_batch_case() {
  return rc::gen::exec([] {
    DecodeGenLimits lim = fuzz_decode_limits();
    lim.allow_long = false;
    BatchCase b;
    b.spec = *gen_decode_case(lim);
    b.spec.path = Path::uniform;
    b.spec.opt.uniform_partitions = *rc::gen::inRange(1, 9);
    b.seq = *rc::gen::inRange<int64_t>(0, int64_t(b.spec.lens.size()));
    b.seq = std::min<int64_t>(b.seq, int64_t(b.spec.lens.size()) - 1);  // shrinking may cut lens
    return b;
  });
}

Verdict check_batch(const BatchCase& b, const CheckContext& ctx) {
  if (b.seq < 0 || b.seq >= int64_t(b.spec.lens.size())) return Verdict::fail("seq outside the batch");
  HostCase batch = build_case(b.spec);
  run_case(batch, ctx.backend);
  HostCase alone = build_case(single_sequence_spec(batch, b.seq));
  run_case(alone, ctx.backend);
  const CaseSpec& s = b.spec;
  const int64_t row_elems = int64_t(s.hkv) * s.group * s.head_dim;
  const uint16_t* in_batch = &batch.out[size_t(b.seq * s.q_len * row_elems)];
  for (int64_t i = 0; i < s.q_len * row_elems; ++i)
    if (in_batch[i] != alone.out[size_t(i)])
      return Verdict::fail(fmt::format("request {} (len {}) differs in the batch of {} and alone: element {} "
                                       "(pos {}, head {}, d {}) 0x{:04x} vs 0x{:04x}; splits {}",
                                       b.seq, s.lens[size_t(b.seq)], s.lens.size(), i, i / row_elems,
                                       (i % row_elems) / s.head_dim, i % s.head_dim, in_batch[i],
                                       alone.out[size_t(i)], s.opt.uniform_partitions));
  return Verdict::pass();
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
  v.push_back(make_property<CaseSpec>({
      "decode",
      "gen_decode_case through check_case: planned and uniform decode vs the fp32 reference (NaN poison, "
      "sentinels, empty rows exactly 0, scratch past the plan untouched)",
      false,
      gen_decode_case(fuzz_decode_limits()),
      check_decode,
      [](const CaseSpec& s, json&) { return s; },
      [](const CaseSpec& s, const json&) {
        check_case_spec(s);
        return s;
      },
      describe_spec,
      simpler_decode_specs,
  }));
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
  v.push_back(make_property<BatchCase>({
      "batch-invariance",
      "with a fixed split count, a request's output is bit-identical in its batch and alone",
      false,
      gen_batch_case(),
      check_batch,
      [](const BatchCase& b, json& meta) {
        meta["seq"] = b.seq;
        return b.spec;
      },
      [](const CaseSpec& s, const json& meta) {
        check_case_spec(s);
        BatchCase b;
        b.spec = s;
        b.seq = meta.value("seq", int64_t(0));
        return b;
      },
      [](const BatchCase& b) { return fmt::format("request {} of {}", b.seq, describe_spec(b.spec)); },
      [](const BatchCase& b) {
        std::vector<BatchCase> out;
        for (auto& [c, seq] : simpler_specs(b.spec, b.seq)) out.push_back({std::move(c), seq});
        return out;
      },
  }));
  return v;
}

// CPU seconds the calling thread has used: cases per CPU-second is the
// per-core throughput however loaded the machine is.
double thread_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

std::string shard_text(const FuzzOptions& o) { return fmt::format("{}/{}", o.shard_index, o.shard_count); }

// " --kernel 'SPEC'" for the commands a report suggests, when a kernel is under test.
std::string kernel_words(const FuzzOptions& o) {
  return o.ctx.kernel ? " " + adapters::kernel_option_text(*o.ctx.kernel) : std::string();
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

const PropertyRun* FuzzReport::first_failure() const {
  for (const PropertyRun& r : runs)
    if (r.failure) return &r;
  return nullptr;
}

std::string save_found(const std::string& dir, const Found& f, const FuzzOptions& opt) {
  json meta = f.meta;
  meta["size"] = f.size;
  meta["shard"] = shard_text(opt);
  meta["base_seed"] = opt.seed;
  meta["backend"] = opt.ctx.backend == Backend::gpu ? "gpu" : "cpu";
  if (opt.ctx.kernel) {
    json kernel = adapters::identity_json(*opt.ctx.kernel);
    if (opt.kernel_run.is_object())
      for (const auto& [key, value] : opt.kernel_run.items()) kernel[key] = value;
    meta["kernel"] = std::move(kernel);
  }
  meta["message"] = f.message;
  meta["first_message"] = f.first_message;
  meta["shrink"] = {{"steps", f.shrink_steps},
                    {"simplify_steps", f.simplify_steps},
                    {"tries", f.shrink_tries},
                    {"hit_limit", f.shrink_hit_limit}};
  meta["reproduced"] = f.reproduced;
  meta["reproduce"] = fmt::format("pav fuzz --property {} --seed {} --cases 1{}", f.property, f.seed, kernel_words(opt));
  meta["description"] = f.description;
  return save_counterexample(dir, f.property, f.seed, f.spec, meta);
}

Verdict replay_case(const CaseSpec& spec, const json& meta, const CheckContext& ctx, std::string* property_out) {
  if (meta.is_object() && meta.contains("property") && !meta.at("property").is_string())
    throw CaseError(std::string("meta.property: expected a string, got ") + meta.at("property").type_name());
  const std::string named = meta.is_object() ? meta.value("property", std::string()) : std::string();
  // A case found through a kernel under test is evidence about that kernel:
  // run on pav's own kernels instead it would pass for the wrong reason.
  if (!ctx.kernel && meta.is_object() && meta.contains("kernel") && !meta.at("kernel").is_null()) {
    const json& k = meta.at("kernel");
    const std::string spec = k.is_object() && k.contains("spec") && k.at("spec").is_string()
                                 ? k.at("spec").get<std::string>()
                                 : std::string("(no meta.kernel.spec)");
    throw CaseError("meta.kernel.spec: the case was found with the kernel '" + spec.substr(0, 200) +
                    "'; it replays only through a kernel under test, not on pav's own kernels");
  }
  if (ctx.kernel) {
    // A kernel's case replays through that kernel's property of the same name.
    const std::vector<Property> props = kernel_properties(ctx.kernel->description());
    const Property* p = &props.front();
    for (const Property& q : props)
      if (q.name == named) p = &q;
    if (property_out) *property_out = p->name;
    return p->replay(spec, meta, ctx);
  }
  const Property* p = find_property(named);
  if (!p) p = find_property("decode");
  if (property_out) *property_out = p->name;
  return p->replay(spec, meta, ctx);
}

Verdict replay_case_file(const std::string& path, const CheckContext& ctx, std::string* property_out) {
  json meta;
  const CaseSpec spec = load_case_spec(path, &meta);  // CaseError names the file and field
  try {
    return replay_case(spec, meta, ctx, property_out);
  } catch (const CaseError& e) {
    throw CaseError(path + ": " + e.what());
  }
}

FuzzReport run_fuzz(const FuzzOptions& opt, const std::vector<const Property*>& props, std::FILE* out,
                    std::FILE* progress_out) {
  using Clock = std::chrono::steady_clock;
  if (opt.jobs < 1) throw std::invalid_argument("jobs must be >= 1");
  if (opt.shard_count < 1 || opt.shard_index < 0 || opt.shard_index >= opt.shard_count)
    throw std::invalid_argument("shard must be I/N with 0 <= I < N");
  if (opt.cases <= 0 && opt.minutes <= 0) throw std::invalid_argument("give a case budget or a time budget");
  if (!(opt.minutes >= 0) || !std::isfinite(opt.minutes)) throw std::invalid_argument("minutes must be finite");
  if (props.empty()) throw std::invalid_argument("no property selected");
  auto stop_asked = [&] { return opt.should_stop && opt.should_stop(); };

  FuzzReport report;
  const double seconds_each = opt.minutes > 0 ? opt.minutes * 60 / double(props.size()) : 0;
  const std::string backend = opt.ctx.kernel ? "kernel " + adapters::identity(*opt.ctx.kernel)
                                             : std::string("backend ") + (opt.ctx.backend == Backend::gpu ? "gpu" : "cpu");
  fmt::print(out, "{}: base seed {}, shard {}, {} job(s), {}, budget {}{}{}\n", opt.label, opt.seed,
             shard_text(opt), opt.jobs, backend, opt.cases > 0 ? fmt::format("{} cases per property", opt.cases) : "",
             opt.cases > 0 && opt.minutes > 0 ? " or " : "",
             opt.minutes > 0 ? fmt::format("{:g} min ({:.0f} s per property)", opt.minutes, seconds_each) : "");
  const uint64_t stride = uint64_t(opt.jobs) * uint64_t(opt.shard_count);
  for (int j = 0; j < opt.jobs; ++j)
    fmt::print(out, "  job {}: seeds {} + {}*m (m = 0, 1, ...): {}, {}, {}, ...\n", j,
               case_seed(opt.seed, job_case_index(j, opt.jobs, 0), opt.shard_index, opt.shard_count), stride,
               case_seed(opt.seed, job_case_index(j, opt.jobs, 0), opt.shard_index, opt.shard_count),
               case_seed(opt.seed, job_case_index(j, opt.jobs, 1), opt.shard_index, opt.shard_count),
               case_seed(opt.seed, job_case_index(j, opt.jobs, 2), opt.shard_index, opt.shard_count));
  std::fflush(out);

  pav::ProgressReporter progress(progress_out, opt.progress);
  std::mutex out_mu;
  for (const Property* prop : props) {
    if (stop_asked()) {
      report.interrupted = true;
      break;
    }
    if (prop->host_only && opt.ctx.backend == Backend::gpu)
      fmt::print(out, "{}: runs on the host (no device part)\n", prop->name);
    struct Hit {
      uint64_t k, seed;
      int size, job;
      std::string message;
    };
    // The lowest failing case index so far: a job stops once its next case is
    // past it, so every lower case still runs and the failure reported is the
    // first in case order whatever the number of jobs.
    std::atomic<uint64_t> first_failing_k{UINT64_MAX};
    std::atomic<int64_t> done{0};
    std::atomic<int> failures{0};
    std::atomic<int> running{opt.jobs};
    std::atomic<bool> stopped_early{false};
    std::optional<Hit> hit;
    std::mutex hit_mu;
    PropertyRun run;
    run.property = prop->name;
    run.cases_per_job.assign(size_t(opt.jobs), 0);
    if (auto it = opt.resume.find(prop->name); it != opt.resume.end()) run.from = it->second;
    if (run.from.next_case > 0 || !run.from.done_beyond.empty())
      fmt::print(out, "{}: continuing the seed stream at case {} ({} later case(s) already run)\n", prop->name,
                 run.from.next_case, run.from.done_beyond.size());
    const auto t0 = Clock::now();
    const auto deadline = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds_each));

    std::vector<double> cpu(size_t(opt.jobs), 0.0);
    // Set when a job could not start or could not go on (a thread or memory
    // refused): every job stops before its next case.
    std::atomic<bool> abandon{false};
    std::exception_ptr job_error;
    auto run_job = [&](int job) {
      for (uint64_t m = 0;; ++m) {
        if (abandon.load()) break;
        const uint64_t fresh = job_case_index(job, opt.jobs, m);
        if (opt.cases > 0 && fresh >= uint64_t(opt.cases)) break;
        const uint64_t k = run.from.fresh_case(fresh);
        if (k >= first_failing_k.load() || (seconds_each > 0 && Clock::now() >= deadline)) break;
        if (stop_asked()) {
          stopped_early = true;
          break;
        }
        const uint64_t seed = case_seed(opt.seed, k, opt.shard_index, opt.shard_count);
        const int size = case_size(seed);
        if (opt.verbose) {
          std::lock_guard<std::mutex> lock(out_mu);
          fmt::print(out, "{}: job {} case {} seed {} size {}\n", prop->name, job, k, seed, size);
        }
        const Verdict v = prop->check_seed(seed, size, opt.ctx);
        ++done;
        ++run.cases_per_job[size_t(job)];
        if (!v.passed) {
          ++failures;
          std::lock_guard<std::mutex> lock(hit_mu);
          if (!hit || k < hit->k) hit = Hit{k, seed, size, job, v.message};
          first_failing_k = hit->k;
          break;
        }
      }
    };
    auto worker = [&](int job) {
      const double cpu0 = thread_cpu_seconds();
      try {
        // One core per job: the CPU backend's parallel loops run on this thread
        // only, so --jobs N uses N cores and --jobs 1 measures one.
        tbb::task_arena one_core(1);
        one_core.execute([&] { run_job(job); });
      } catch (...) {
        // Nothing may leave a thread (std::terminate): the run is abandoned
        // and the error raised again on the caller's thread.
        std::lock_guard<std::mutex> lock(hit_mu);
        if (!job_error) job_error = std::current_exception();
        abandon = true;
      }
      cpu[size_t(job)] = thread_cpu_seconds() - cpu0;
      --running;
    };
    std::vector<std::thread> threads;
    std::string start_error;
    try {
      threads.reserve(size_t(opt.jobs));
      for (int j = 0; j < opt.jobs; ++j) threads.emplace_back(worker, j);
    } catch (const std::exception& e) {
      start_error = fmt::format("--jobs {}: could not start job {} of {} here: {}", opt.jobs, threads.size() + 1,
                                opt.jobs, e.what());
      abandon = true;
      running -= opt.jobs - int(threads.size());
    }
    if (!start_error.empty()) {
      for (auto& t : threads) t.join();
      progress.done();
      throw JobsUnavailable(start_error + " (a thread or its stack refused: a process, thread or address-space "
                                          "limit); run with fewer --jobs");
    }
    while (running.load() > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      const double el = std::chrono::duration<double>(Clock::now() - t0).count();
      progress.show(fmt::format("[{}] {}: {} cases, {:.1f} cases/s, {} failure(s), {:.0f} s{}", opt.label,
                                prop->name, done.load(), el > 0 ? double(done.load()) / el : 0.0, failures.load(), el,
                                seconds_each > 0 ? fmt::format(" of {:.0f} s", seconds_each) : ""));
    }
    for (auto& t : threads) t.join();
    progress.done();
    if (job_error) {
      try {
        std::rethrow_exception(job_error);
      } catch (const std::bad_alloc&) {
        throw JobsUnavailable(fmt::format("--jobs {}: a job ran out of memory (an address-space or memory limit); "
                                          "run with fewer --jobs",
                                          opt.jobs));
      } catch (const std::system_error& e) {
        throw JobsUnavailable(fmt::format("--jobs {}: a job could not go on here: {}; run with fewer --jobs",
                                          opt.jobs, e.what()));
      }
    }
    run.cases = done.load();
    run.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    for (double c : cpu) run.cpu_seconds += c;
    run.interrupted = stopped_early.load() && !hit;
    run.to = advance_stream(run.from, run.cases_per_job);
    fmt::print(out, "{}: {} cases in {:.1f} s: {:.1f} cases/s, {:.1f} cases per CPU-second (per core), {}\n",
               prop->name, run.cases, run.seconds, run.cases_per_second(), run.cases_per_cpu_second(),
               hit ? "FAILED" : run.interrupted ? "no failure before the stop" : "no failure");
    std::fflush(out);
    if (run.interrupted) report.interrupted = true;
    if (!hit) {
      report.runs.push_back(std::move(run));
      if (report.interrupted) break;
      continue;
    }

    fmt::print(out, "\nFAIL {}: seed {} (size {}), case {} of job {}, shard {}\n  failure: {}\n", prop->name,
               hit->seed, hit->size, hit->k, hit->job, shard_text(opt), hit->message);
    fmt::print(out, "  shrinking{}...\n", stop_asked() ? " skipped (stop asked): saving the case as found" : "");
    std::fflush(out);
    ShrinkLimits limits = opt.shrink;
    if (opt.should_stop) limits.should_stop = opt.should_stop;
    const auto s0 = Clock::now();
    std::optional<Found> found = prop->shrink_seed(hit->seed, hit->size, opt.ctx, limits);
    const double shrink_s = std::chrono::duration<double>(Clock::now() - s0).count();
    if (!found) {
      // Regenerated from its seed the case passed: a flaky failure (a race, an
      // uninitialised read). Report it; there is no case to save that would fail.
      Found f;
      f.property = prop->name;
      f.seed = hit->seed;
      f.size = hit->size;
      f.first_message = f.message = hit->message;
      f.reproduced = false;
      fmt::print(out, "  the failure did not recur when the case was regenerated from its seed (flaky)\n");
      run.failure = std::move(f);
    } else {
      fmt::print(out,
                 "  shrunk in {} steps of the shrink tree + {} simplifications ({} candidates, {:.1f} s){}\n"
                 "  shrunk case: {}\n  its failure: {}\n",
                 found->shrink_steps, found->simplify_steps, found->shrink_tries, shrink_s,
                 found->shrink_hit_limit ? " - stopped at a shrink limit, not a local minimum" : "",
                 found->description, found->message);
      try {
        run.saved_path = save_found(opt.save_dir, *found, opt);
        fmt::print(out, "  saved {}\n", run.saved_path);
      } catch (const std::exception& e) {
        run.save_error = e.what();
        fmt::print(out, "  NOT SAVED: {}\n", run.save_error);
      }
      run.failure = std::move(found);
    }
    fmt::print(out, "  reproduce: pav fuzz --property {} --seed {} --cases 1{}\n", prop->name, hit->seed, kernel_words(opt));
    if (!run.saved_path.empty())
      fmt::print(out, "  replay:    pav fuzz --replay {}{}{}\n", run.saved_path, kernel_words(opt),
                 prop->name == "decode" ? fmt::format("   (or pav replay {})", run.saved_path) : "");
    std::fflush(out);
    report.runs.push_back(std::move(run));
    if (!opt.keep_going || stop_asked()) {
      report.interrupted = report.interrupted || stop_asked();
      break;
    }
  }
  return report;
}

}  // namespace pav::props::fuzz
