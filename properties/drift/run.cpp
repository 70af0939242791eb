// SPDX-License-Identifier: Apache-2.0
#include "properties/drift/run.hpp"

#include <fmt/core.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>

#include "adapters/pav_kernel.hpp"
#include "kernels/codecs.hpp"
#include "kernels/split_rules.hpp"
#include "properties/checks/runner.hpp"
#include "properties/checks/runner_kernel.hpp"
#include "reference/compare.hpp"

namespace pav::props {

using kernels::DType;

// ---- the positive control ---------------------------------------------------------------------

void inject_partition_epsilon(const kernels::Scratch& scratch, const kernels::PlanView& plan, int64_t rows,
                              float epsilon) {
  int64_t active = 0;
  for (int64_t b = 0; b < plan.num_seqs; ++b) active += plan.reduce_info[2 * b + 1];
  float* l = scratch.l.as<float>();
  for (int64_t h = 0; h < plan.kv_heads; ++h)
    for (int64_t i = 0; i < active; ++i)
      for (int64_t r = 0; r < rows; ++r) {
        float& x = l[(h * plan.capacity + i) * rows + r];
        if (x > 0.0f) x += epsilon;
      }
}

void reduce_planned_scratch(const kernels::DecodeCall& call, const kernels::PlanView& plan,
                            const kernels::Scratch& scratch) {
  using namespace kernels;
  const CallDims d = dims_of(call);
  const int64_t D = d.head_dim, G = d.group, rows = d.rows, cap = plan.capacity;
  const float* m = scratch.m.as<const float>();
  const float* l = scratch.l.as<const float>();
  auto load = [&](int64_t i) -> float {
    switch (scratch.partial.dtype) {
      case DType::f32: return scratch.partial.as<const float>()[i];
      case DType::bf16: return bf16_to_f32(scratch.partial.as<const uint16_t>()[i]);
      default: return f16_to_f32(scratch.partial.as<const uint16_t>()[i]);
    }
  };
  auto store = [&](int64_t qrow, int64_t head, int64_t dd, float v) {
    const int64_t off = qrow * call.out.stride[0] + head * call.out.stride[1] + dd;
    call.out.as<uint16_t>()[off] = call.out.dtype == DType::bf16 ? f32_to_bf16(v) : f32_to_f16(v);
  };
  const float neg_inf = -std::numeric_limits<float>::infinity();
  tbb::parallel_for(int64_t(0), d.num_seqs * d.hkv, [&](int64_t sh) {
    const int64_t seq = sh / d.hkv, h = sh % d.hkv;
    const int64_t base = h * cap + plan.reduce_info[2 * seq], count = plan.reduce_info[2 * seq + 1];
    std::vector<float> w(count), o(D);
    for (int64_t r = 0; r < rows; ++r) {
      float M = neg_inf;
      for (int64_t p = 0; p < count; ++p) M = std::max(M, m[(base + p) * rows + r]);
      if (M == neg_inf) M = 0.0f;  // every partition empty: never (-inf) - (-inf)
      float L = 0.0f;
      for (int64_t p = 0; p < count; ++p) {
        const float lp = l[(base + p) * rows + r], mp = m[(base + p) * rows + r];
        w[p] = lp > 0.0f ? lp * std::exp(mp - M) : 0.0f;
        L += w[p];
      }
      std::fill(o.begin(), o.end(), 0.0f);
      if (L > 0.0f)
        for (int64_t p = 0; p < count; ++p) {
          if (w[p] == 0.0f) continue;
          const float wp = w[p] / L;
          for (int64_t dd = 0; dd < D; ++dd) o[dd] += wp * load(((base + p) * rows + r) * D + dd);
        }
      for (int64_t dd = 0; dd < D; ++dd) store(seq * d.q_len + r / G, h * G + r % G, dd, o[dd]);
    }
  });
}

// ---- figures -----------------------------------------------------------------------------------------

ErrorFigures error_figures(const kernels::TensorView& out, const reference::ReferenceResult& ref) {
  using namespace kernels;
  ErrorFigures f;
  const reference::CompareReport c = reference::compare(out, ref);
  f.rel_l2 = c.rel_l2_err;
  f.max_abs = c.max_abs_err;
  f.mismatches = c.mismatches;
  f.nonfinite = c.nonfinite;
  const int64_t D = ref.head_dim;
  for (int64_t qrow = 0; qrow < ref.num_seqs * ref.q_len; ++qrow)
    for (int64_t head = 0; head < ref.hq; ++head) {
      double dn = 0, rn = 0;
      for (int64_t d = 0; d < D; ++d) {
        const int64_t off = qrow * out.stride[0] + head * out.stride[1] + d * out.stride[2];
        const uint16_t bits = out.as<const uint16_t>()[off];
        const double o = out.dtype == DType::bf16 ? bf16_to_f32(bits) : f16_to_f32(bits);
        const double r = ref.out[ref.index(qrow, head, d)];
        dn += (o - r) * (o - r);
        rn += r * r;
      }
      if (rn > 0 && std::isfinite(dn)) f.max_row_rel = std::max(f.max_row_rel, std::sqrt(dn / rn));
    }
  return f;
}

SplitCounts split_counts(std::vector<int64_t> per_request) {
  SplitCounts s;
  s.per_request = per_request;
  if (per_request.empty()) return s;
  std::sort(per_request.begin(), per_request.end());
  s.min = per_request.front();
  s.max = per_request.back();
  const size_t n = per_request.size();
  s.median = n % 2 ? double(per_request[n / 2]) : 0.5 * double(per_request[n / 2 - 1] + per_request[n / 2]);
  return s;
}

// ---- the run ----------------------------------------------------------------------------------------------

namespace {

std::vector<int64_t> planned_counts(const kernels::WorkPlan& plan) {
  std::vector<int64_t> c;
  for (int64_t b = 0; b < plan.params().num_seqs; ++b) c.push_back(plan.reduce_info()[2 * b + 1]);
  return c;
}

std::vector<int64_t> uniform_counts(const std::vector<int32_t>& lens, int splits) {
  std::vector<int64_t> c;
  for (int32_t len : lens) {
    const int64_t tiles = kernels::plan_tiles(len);
    const int64_t per = kernels::ceil_div64(std::max<int64_t>(tiles, 1), splits);
    c.push_back(tiles > 0 ? kernels::ceil_div64(tiles, per) : 0);
  }
  return c;
}

std::vector<double> rel_l2_of(const std::vector<ErrorFigures>& f) {
  std::vector<double> v;
  for (const auto& x : f) v.push_back(x.rel_l2);
  return v;
}

const ArmResult* find_arm(const CellResult& c, ArmKind kind, int ceiling, DType partial) {
  for (const auto& a : c.arms)
    if (a.arm.kind == kind && a.arm.ceiling == ceiling && a.arm.partial == partial) return &a;
  return nullptr;
}

GrowthRow growth_row(const std::string& label, const ArmResult& low, const ArmResult& high, DriftReference ref,
                     const stats::GrowthOptions& g) {
  GrowthRow row;
  row.arms = label;
  row.partial = low.arm.partial;
  row.reference = ref;
  row.low_ceiling = low.arm.ceiling;
  row.high_ceiling = high.arm.ceiling;
  row.splits_differ = low.splits.per_request != high.splits.per_request;
  const auto& lf = ref == DriftReference::kernel ? low.kernel_ref : low.end_to_end;
  const auto& hf = ref == DriftReference::kernel ? high.kernel_ref : high.end_to_end;
  const auto lv = rel_l2_of(lf), hv = rel_l2_of(hf);
  row.test = stats::paired_growth(lv, hv, g);
  return row;
}

// An arm through a kernel under test: a foreign one (planned arms only), or
// pav's own (`own`: its settings for this arm, planned or uniform), with the
// case's path and split ceiling already set for the arm.
void run_kernel_arm(adapters::KernelUnderTest& k, const adapters::PavKernelOptions* own, HostCase& c, ArmResult& ar,
                    const reference::ReferenceResult& kref, const reference::ReferenceResult& eref) {
  const adapters::KernelDescription& d = k.description();
  KernelCall kc;
  prepare_kernel_call(kc, c, d);
  if (const std::string why = adapters::contract_violation(kc.request, d); !why.empty())
    throw std::invalid_argument("a call of this sweep is outside the kernel's description: " + why);
  const CheckedRun run = run_checked(k, kc.request);
  if (!run.ok()) {
    ++ar.status_failures;
    if (ar.first_error.empty()) ar.first_error = outcome_text(run.decoded ? run.decode : run.check);
  }
  // A plan kernel's split counts are its plan's; pav's uniform kernel runs the
  // count its call is given; a foreign self-splitting one does not say.
  ar.splits = kc.plan ? split_counts(planned_counts(*kc.plan))
              : own   ? split_counts(uniform_counts(c.lens, kernels::uniform_splits(adapters::pav_kernel_call(*own, kc.request))))
                      : SplitCounts{};
  ar.kernel_ref.push_back(error_figures(kc.request.call.out, kref));
  ar.end_to_end.push_back(error_figures(kc.request.call.out, eref));
}

}  // namespace

DriftSweep kernel_sweep(DriftSweep s, const adapters::KernelDescription& d) {
  if (d.split == adapters::Split::self && !d.split_ceiling)
    throw std::invalid_argument("the kernel takes no split ceiling, which pav drift sweeps");
  if (d.max_split_ceiling > 0 && s.ceilings.back() > d.max_split_ceiling)
    throw std::invalid_argument(fmt::format("the sweep's highest ceiling {} passes the kernel's max_split_ceiling {}",
                                            s.ceilings.back(), d.max_split_ceiling));
  s.partials = {d.profile.numerics().partial};
  s.uniform_baseline = false;
  s.control_epsilon = 0;
  return s;
}

DriftReport run_drift(const DriftSweep& s, const std::vector<DriftCell>& cells, const DriftRunOptions& o) {
  using Clock = std::chrono::steady_clock;
  const auto t_start = Clock::now();
  DriftReport rep;
  rep.sweep = s;
  rep.backend = o.kernel ? adapters::identity(*o.kernel) : o.backend == kernels::Backend::gpu ? "gpu" : "cpu";
  const std::vector<DriftArm> arms = drift_arms(s);
  // Work units: tokens x (two references + one launch per arm).
  const int64_t launches_per_seed = 2 + int64_t(arms.size());
  // pav's own kernels run as any kernel under test does, through their
  // adapter: for each kernel arm, pav:cpu or pav:gpu with its settings
  // (planned or uniform, partial dtype) and the sweep's arch and CU count.
  struct OwnArm {
    adapters::PavKernelOptions options;
    std::unique_ptr<adapters::KernelUnderTest> kernel;
  };
  std::vector<OwnArm> own(arms.size());
  for (size_t i = 0; i < arms.size() && !o.kernel; ++i) {
    if (arms[i].kind == ArmKind::control) continue;
    OwnArm& a = own[i];
    a.options.planned = arms[i].kind == ArmKind::planned;
    a.options.partial = arms[i].partial;
    a.options.arch = s.arch;
    a.options.cu = s.cu;
    a.options.backend = o.backend;
    a.kernel = adapters::make_pav_kernel(a.options, adapters::pav_kernel_spec(a.options));
  }
  DriftProgress prog;
  prog.total = 0;
  for (const auto& c : cells) prog.total += double(std::max<int64_t>(c.tokens, 1)) * s.seeds * double(launches_per_seed);
  auto step = [&](const std::string& what, double units) {
    if (o.progress) {
      prog.what = what;
      prog.elapsed_s = std::chrono::duration<double>(Clock::now() - t_start).count();
      o.progress(prog);
    }
    prog.done += units;
  };

  for (size_t ci = 0; ci < cells.size(); ++ci) {
    const DriftCell& cell = cells[ci];
    const auto t_cell = Clock::now();
    CellResult cr;
    cr.cell = cell;
    for (const auto& a : arms) cr.arms.push_back({a, {}, {}, {}, 0, {}});
    const double units = double(std::max<int64_t>(cell.tokens, 1));
    for (int r = 0; r < s.seeds; ++r) {
      const uint64_t data_seed = s.seed + uint64_t(r);
      const std::string where = fmt::format("cell {}/{} {} seed {}/{}", ci + 1, cells.size(), cell.name, r + 1, s.seeds);
      auto since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
      step(where + ": data", 0);
      auto t0 = Clock::now();
      DriftData data = build_drift_data(s, cell, data_seed);
      cr.seconds_data += since(t0);
      step(where + ": kernel reference", 0);
      t0 = Clock::now();
      reference::ReferenceOptions ro;
      ro.precision = s.reference_precision;
      const reference::ReferenceResult kref = o.kernel ? reference_for(data.c.call(), o.kernel->description().profile,
                                                                       s.reference_precision)
                                                       : reference::decode(data.c.call(), ro);
      cr.seconds_kernel_ref += since(t0);
      prog.done += units;
      step(where + ": end-to-end reference", 0);
      t0 = Clock::now();
      const reference::ReferenceResult eref = reference::source_decode(
          drift_source_geometry(s, cell), data.q_source.data(), drift_source_chunks(s, cell, data_seed));
      cr.seconds_end_to_end_ref += since(t0);
      prog.done += units;
      t0 = Clock::now();

      for (size_t ai = 0; ai < cr.arms.size(); ++ai) {
        ArmResult& ar = cr.arms[ai];
        const DriftArm& a = ar.arm;
        if (a.kind == ArmKind::control) continue;
        step(where + ": " + a.name, units);
        data.c.spec.opt.partial = a.partial;
        data.c.spec.path = a.kind == ArmKind::uniform ? Path::uniform : Path::planned;
        data.c.spec.max_partitions = a.kind == ArmKind::uniform ? 0 : a.ceiling;
        if (o.kernel) run_kernel_arm(*o.kernel, nullptr, data.c, ar, kref, eref);
        else run_kernel_arm(*own[ai].kernel, &own[ai].options, data.c, ar, kref, eref);
      }
      cr.seconds_arms += since(t0);
      t0 = Clock::now();
      // The positive control tests the growth test, not a kernel: it needs the
      // partials of a planned run, which no adapter shows, so it runs pav's CPU
      // planned kernel on the arm's call itself and merges its edited scratch.
      for (ArmResult& ar : cr.arms) {
        const DriftArm& a = ar.arm;
        if (a.kind != ArmKind::control) continue;
        data.c.spec.opt.partial = DType::bf16;
        data.c.spec.path = Path::planned;
        data.c.spec.max_partitions = a.ceiling;
        step(where + ": " + a.name + " (cpu)", units);
        RunResult run = run_case(data.c, kernels::Backend::cpu);
        ar.splits = split_counts(planned_counts(*run.plan));
        const kernels::DecodeCall call = data.c.call();
        const kernels::PlanView view = run.plan->view();
        inject_partition_epsilon(run.scratch.view, view, dims_of(call).rows, float(s.control_epsilon));
        reduce_planned_scratch(call, view, run.scratch.view);
        ar.kernel_ref.push_back(error_figures(call.out, kref));
        ar.end_to_end.push_back(error_figures(call.out, eref));
      }
      cr.seconds_control += since(t0);
    }

    // Growth tests: lowest vs highest ceiling, per partial dtype and reference.
    const int lo = s.ceilings.front(), hi = s.ceilings.back();
    for (DType p : s.partials) {
      const ArmResult* a = find_arm(cr, ArmKind::planned, lo, p);
      const ArmResult* b = find_arm(cr, ArmKind::planned, hi, p);
      for (DriftReference ref : {DriftReference::kernel, DriftReference::end_to_end})
        cr.growth.push_back(growth_row(fmt::format("planned {}", kernels::to_string(p)), *a, *b, ref, s.growth));
    }
    if (s.control_epsilon > 0) {
      const ArmResult* a = find_arm(cr, ArmKind::control, lo, DType::bf16);
      const ArmResult* b = find_arm(cr, ArmKind::control, hi, DType::bf16);
      cr.control = growth_row("control bf16", *a, *b, DriftReference::kernel, s.growth);
    }
    for (const auto& g : cr.growth) cr.growth_found = cr.growth_found || g.test.growth;
    if (cr.control && cr.control->splits_differ) {
      cr.control_ok = cr.control->test.growth;
      rep.control_run = true;
    }
    for (const auto& ar : cr.arms) {
      if (ar.arm.kind == ArmKind::control) continue;
      for (const auto& f : ar.kernel_ref) {
        cr.mismatches += f.mismatches;
        cr.nonfinite += f.nonfinite;
      }
      cr.status_failures += ar.status_failures;
    }
    cr.passed = !cr.growth_found && cr.control_ok && cr.mismatches == 0 && cr.nonfinite == 0 && cr.status_failures == 0;
    std::vector<std::string> why;
    if (cr.growth_found)
      for (const auto& g : cr.growth)
        if (g.test.growth)
          why.push_back(fmt::format("{} vs {} reference c{}->c{}: {}", g.arms,
                                    g.reference == DriftReference::kernel ? "kernel" : "end-to-end", g.low_ceiling,
                                    g.high_ceiling, g.test.verdict));
    if (!cr.control_ok) {
      std::string w = "positive control did not flip: " + cr.control->test.verdict;
      // 2^-R is the smallest one-sided sign-test p with R seeds.
      if (std::ldexp(1.0, -s.seeds) >= s.growth.alpha / 2)
        w += fmt::format(" (with {} seeds the sign test cannot reach p < {:g}; use more seeds)", s.seeds, s.growth.alpha / 2);
      why.push_back(w);
    }
    if (cr.mismatches) why.push_back(fmt::format("{} mismatches at the comparison standard", cr.mismatches));
    if (cr.nonfinite) why.push_back(fmt::format("{} non-finite outputs", cr.nonfinite));
    if (cr.status_failures) {
      std::string first;
      for (const auto& ar : cr.arms)
        if (first.empty() && !ar.first_error.empty()) first = ar.arm.name + ": " + ar.first_error;
      why.push_back(first.empty() ? fmt::format("{} runs reported a stale plan", cr.status_failures)
                                  : fmt::format("{} runs did not succeed; first {}", cr.status_failures, first));
    }
    if (why.empty()) {
      cr.verdict = "no growth";
      if (cr.control) cr.verdict += cr.control->splits_differ ? "; control flipped" : "; control n/a (identical splits)";
    } else {
      cr.verdict = why.front();
      for (size_t i = 1; i < why.size(); ++i) cr.verdict += "; " + why[i];
    }
    cr.seconds = std::chrono::duration<double>(Clock::now() - t_cell).count();
    rep.growth = rep.growth || cr.growth_found;
    rep.control_ok = rep.control_ok && cr.control_ok;
    rep.mismatches += cr.mismatches;
    if (!cr.passed && rep.first_failure.empty()) rep.first_failure = cell.name + ": " + cr.verdict;
    rep.cells.push_back(std::move(cr));
  }
  if (o.progress) {
    prog.done = prog.total;
    prog.what = "done";
    prog.elapsed_s = std::chrono::duration<double>(Clock::now() - t_start).count();
    o.progress(prog);
  }
  rep.seconds = std::chrono::duration<double>(Clock::now() - t_start).count();
  rep.passed = !rep.cells.empty();
  for (const auto& c : rep.cells) rep.passed = rep.passed && c.passed;
  if (s.control_epsilon > 0 && !rep.control_run) {
    rep.passed = false;
    if (rep.first_failure.empty())
      rep.first_failure = "positive control not exercised: no cell's lowest and highest ceilings split differently";
  }
  rep.verdict = fmt::format("{}: {} ({} cells{})", rep.passed ? "PASS" : "FAIL", rep.growth ? "growth" : "no growth",
                            rep.cells.size(),
                            s.control_epsilon > 0 ? (rep.control_run && rep.control_ok ? ", positive control flipped"
                                                                                         : ", positive control FAILED")
                                                  : "");
  return rep;
}

}  // namespace pav::props
