// SPDX-License-Identifier: Apache-2.0
#include "kernels/dispatch/route.hpp"

#include <vector>

namespace pav::kernels::dispatch {
namespace {

constexpr uint64_t kSeenUniform = 1, kSeenRefused = 2, kSeenNoPlan = 4, kSeenStale = 8;

// Scratch the uniform and fixed-splits routes need, owned by the dispatcher for
// the duration of one call (the uniform path never had persistent scratch).
struct OwnedScratch {
  std::vector<std::byte> partial;
  std::vector<float> m, l;
  Scratch view;
};
TensorView contiguous_view(void* data, DType dtype, int rank, const std::array<int64_t, 4>& dims) {
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.rank = rank;
  int64_t stride = 1;
  for (int i = rank - 1; i >= 0; --i) {
    v.shape[i] = dims[i];
    v.stride[i] = stride;
    stride *= dims[i];
  }
  return v;
}
void size_scratch(OwnedScratch& s, const ScratchGeometry& g) {
  if (!g.needed) return;
  const size_t rows = size_t(g.slots) * size_t(g.rows);
  s.partial.resize(rows * size_t(g.head_dim) * size_t(dtype_size(g.partial)));
  s.m.resize(rows);
  s.l.resize(rows);
  s.view.partial = contiguous_view(s.partial.data(), g.partial, g.rank, g.partial_shape);
  s.view.m = contiguous_view(s.m.data(), DType::f32, g.rank - 1, g.partial_shape);
  s.view.l = contiguous_view(s.l.data(), DType::f32, g.rank - 1, g.partial_shape);
}

}  // namespace

std::string_view to_string(RouteKind k) {
  switch (k) {
    case RouteKind::uniform: return "uniform";
    case RouteKind::planned: return "planned";
    case RouteKind::planned_fixed_splits: return "planned_fixed_splits";
  }
  return "?";
}

std::string_view to_string(RouteReason r) {
  switch (r) {
    case RouteReason::feature_off: return "feature_off";
    case RouteReason::accepted: return "accepted";
    case RouteReason::gate_reject: return "gate_reject";
    case RouteReason::no_plan: return "no_plan";
    case RouteReason::plan_refused: return "plan_refused";
  }
  return "?";
}

std::string route_label(const Route& r) {
  switch (r.kind) {
    case RouteKind::uniform: return "uniform";
    case RouteKind::planned: return "planned[" + std::to_string(r.num_seqs) + " seqs]";
    case RouteKind::planned_fixed_splits:
      return "planned[" + std::to_string(r.num_seqs) + " seqs, fixed splits]";
  }
  return "?";
}

bool plan_matches(const PlanView& plan, const DecodeCall& call) noexcept {
  const TensorView& lens = call.context_lens;
  if (lens.dtype != DType::i32 || lens.rank != 1 || !lens.contiguous() || lens.data == nullptr) return false;
  if (plan.work_info == nullptr || plan.reduce_info == nullptr) return false;
  const int64_t num_seqs = lens.shape[0];
  if (plan.num_seqs != num_seqs || num_seqs < 1) return false;
  if (call.k_cache.rank != 5 || plan.kv_heads != call.k_cache.shape[1]) return false;
  if (plan.max_partitions < 1 || plan.max_partitions > call.opt.cu) return false;
  if (plan.capacity < num_seqs || plan.capacity > num_seqs * plan.max_partitions) return false;
  // A refresh rewrites every task of a sequence together, so the first and last
  // task of each sequence stand for all of them: O(num_seqs) per call. The
  // planned kernel still checks every task (DecodeResult::stale_tasks).
  const int32_t* live = lens.as<const int32_t>();
  for (int64_t b = 0; b < num_seqs; ++b) {
    const int64_t first = plan.reduce_info[2 * b], count = plan.reduce_info[2 * b + 1];
    if (count == 0) {
      if (live[b] > 0) return false;
      continue;
    }
    if (first < 0 || count < 0 || first + count > plan.capacity) return false;
    if (plan.work_info[4 * first + 3] != live[b] || plan.work_info[4 * (first + count - 1) + 3] != live[b])
      return false;
  }
  return true;
}

Router::Router(Settings settings, LogSink log) : settings_(settings), log_(std::move(log)) {}


Route Router::finish(Route r) noexcept {
  switch (r.kind) {
    case RouteKind::uniform:
      uniform_.fetch_add(1, std::memory_order_relaxed);
      log_once(seen_misc_, kSeenUniform, [] { return std::string("uniform"); });
      break;
    case RouteKind::planned:
    case RouteKind::planned_fixed_splits: {
      const bool planned = r.kind == RouteKind::planned;
      (planned ? planned_ : fixed_).fetch_add(1, std::memory_order_relaxed);
      auto& seen = planned ? seen_planned_ : seen_fixed_;
      const size_t n = size_t(r.num_seqs);
      if (n < kSeqWords * 64) log_once(seen[n / 64], uint64_t(1) << (n % 64), [&] { return route_label(r); });
      break;
    }
  }
  return r;
}

Route Router::route(const DecodeCall& call, Site site, const ForwardMetadata* md) noexcept {
  Route r;
  // Opt-in first: with the feature off no gate check runs.
  if (!settings_.planned_decode) return finish(r);
  r.num_seqs = call.context_lens.rank == 1 ? call.context_lens.shape[0] : 0;
  const PlanView* plan = nullptr;
  const Scratch* scratch = nullptr;
  if (site == Site::dense && settings_.work_plan) {
    plan = md ? md->plan() : nullptr;
    if (!plan) {
      r.reason = RouteReason::no_plan;
      no_plan_.fetch_add(1, std::memory_order_relaxed);
      log_once(seen_misc_, kSeenNoPlan, [&] {
        return "no plan for " + std::to_string(r.num_seqs) + " seqs: uniform (plans are minted only at capture)";
      });
      return finish(r);
    }
    if (!plan_matches(*plan, call)) {
      r.reason = RouteReason::plan_refused;
      refused_.fetch_add(1, std::memory_order_relaxed);
      log_once(seen_misc_, kSeenRefused,
               [] { return std::string("plan refused (stale lengths or shape): uniform"); });
      return finish(r);
    }
    scratch = &md->forward_scratch();
  }
  gate_checks_.fetch_add(1, std::memory_order_relaxed);
  const GateVerdict v = gate(call, plan, scratch);
  if (!v.accepted) {
    r.reason = RouteReason::gate_reject;
    r.clause = v.clause;
    gate_rejects_.fetch_add(1, std::memory_order_relaxed);
    by_clause_[size_t(v.clause)].fetch_add(1, std::memory_order_relaxed);
    const uint64_t bit = uint64_t(1) << (size_t(v.clause) % 64);
    log_once(seen_clause_, bit,
             [&] { return "gate rejects (" + std::string(clause_name(v.clause)) + "): uniform"; });
    return finish(r);
  }
  r.reason = RouteReason::accepted;
  r.kind = plan ? RouteKind::planned : RouteKind::planned_fixed_splits;
  r.plan = plan;
  r.md = plan ? md : nullptr;
  return finish(r);
}

RouteCounts Router::counts() const {
  RouteCounts c;
  c.uniform = uniform_.load();
  c.planned = planned_.load();
  c.planned_fixed_splits = fixed_.load();
  c.gate_checks = gate_checks_.load();
  c.gate_rejects = gate_rejects_.load();
  c.plans_refused = refused_.load();
  c.no_plan = no_plan_.load();
  c.stale_results = stale_.load();
  for (size_t i = 0; i < c.rejects_by_clause.size(); ++i) c.rejects_by_clause[i] = by_clause_[i].load();
  return c;
}

void Router::note_stale(const Route& r, const DecodeResult& res) {
  if (res.status != DecodeStatus::stale_plan) return;
  stale_.fetch_add(1, std::memory_order_relaxed);
  log_once(seen_misc_, kSeenStale, [&] {
    return route_label(r) + ": stale plan flagged (" + std::to_string(res.stale_tasks) + " tasks, " +
           std::to_string(res.stale_rows) + " rows); outputs of those sequences are NaN";
  });
}

DecodeOutcome decode(Router& router, const DecodeCall& call, Site site, const ForwardMetadata* md,
                     Backend backend) {
  DecodeOutcome o;
  o.route = router.route(call, site, md);
  switch (o.route.kind) {
    case RouteKind::planned:
      o.result = launch_planned(call, o.route.plan, o.route.md->forward_scratch(), backend);
      router.note_stale(o.route, o.result);
      return o;
    case RouteKind::planned_fixed_splits: {
      OwnedScratch s;
      size_scratch(s, scratch_geometry(call, nullptr));
      o.result = launch_planned(call, nullptr, s.view, backend);
      return o;
    }
    case RouteKind::uniform: {
      // Size nothing from a call the uniform kernel rejects.
      const Finding f = first_violation(call, KernelKind::uniform, nullptr, nullptr);
      if (f) throw RejectError(f, KernelKind::uniform);
      OwnedScratch s;
      size_scratch(s, scratch_geometry(call, nullptr));
      launch_uniform(call, s.view, backend);
      return o;
    }
  }
  return o;
}

}  // namespace pav::kernels::dispatch
