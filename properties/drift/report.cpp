// SPDX-License-Identifier: Apache-2.0
#include "properties/drift/report.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <sstream>

namespace pav::props {

using kernels::DType;
using nlohmann::json;

double mean_of(const std::vector<ErrorFigures>& f, double ErrorFigures::*m) {
  double s = 0;
  for (const auto& x : f) s += x.*m;
  return f.empty() ? 0 : s / double(f.size());
}
double max_of(const std::vector<ErrorFigures>& f, double ErrorFigures::*m) {
  double s = 0;
  for (const auto& x : f) s = std::max(s, x.*m);
  return s;
}
double min_of(const std::vector<ErrorFigures>& f, double ErrorFigures::*m) {
  double s = f.empty() ? 0 : f.front().*m;
  for (const auto& x : f) s = std::min(s, x.*m);
  return s;
}

namespace {

json stat_json(const std::vector<double>& v) {
  double lo = v.empty() ? 0 : v.front(), hi = lo, sum = 0;
  for (double x : v) {
    lo = std::min(lo, x);
    hi = std::max(hi, x);
    sum += x;
  }
  return {{"mean", v.empty() ? 0.0 : sum / double(v.size())}, {"min", lo}, {"max", hi}, {"per_seed", v}};
}

json figures_json(const std::vector<ErrorFigures>& f) {
  std::vector<double> rel, row, mabs;
  int64_t mm = 0, nf = 0;
  for (const auto& x : f) {
    rel.push_back(x.rel_l2);
    row.push_back(x.max_row_rel);
    mabs.push_back(x.max_abs);
    mm += x.mismatches;
    nf += x.nonfinite;
  }
  return {{"rel_l2", stat_json(rel)}, {"max_row_rel", stat_json(row)}, {"max_abs", stat_json(mabs)},
          {"mismatches", mm}, {"nonfinite", nf}};
}

json growth_json(const GrowthRow& g) {
  const auto& t = g.test;
  return {{"arms", g.arms},
          {"partial", std::string(kernels::to_string(g.partial))},
          {"reference", g.reference == DriftReference::kernel ? "kernel" : "end_to_end"},
          {"low_ceiling", g.low_ceiling},
          {"high_ceiling", g.high_ceiling},
          {"splits_differ", g.splits_differ},
          {"pairs", t.pairs},
          {"mean_low", t.mean_low},
          {"mean_high", t.mean_high},
          {"mean_diff", t.mean_diff},
          {"sd_diff", t.sd_diff},
          {"relative_growth", std::isfinite(t.relative_growth) ? json(t.relative_growth) : json("inf")},
          {"t", std::isfinite(t.t) ? json(t.t) : json(t.t > 0 ? "inf" : "-inf")},
          {"t_p", t.t_p},
          {"positive", t.positive},
          {"negative", t.negative},
          {"ties", t.ties},
          {"sign_p", t.sign_p},
          {"growth", t.growth},
          {"verdict", t.verdict}};
}

int64_t sum_mismatches(const std::vector<ErrorFigures>& f) {
  int64_t s = 0;
  for (const auto& x : f) s += x.mismatches + x.nonfinite;
  return s;
}

std::string pct(double x, int prec = 3) { return fmt::format("{:.{}f}%", 100.0 * x, prec); }

std::string lens_summary(const std::vector<int32_t>& lens) {
  if (lens.size() <= 8) {
    std::string s;
    for (size_t i = 0; i < lens.size(); ++i) s += (i ? ", " : "") + std::to_string(lens[i]);
    return s;
  }
  std::vector<int32_t> v = lens;
  std::sort(v.begin(), v.end());
  return fmt::format("{} requests: max {}, median {}, min {}", v.size(), v.back(), v[v.size() / 2], v.front());
}

std::string splits_text(const SplitCounts& s) {
  return fmt::format("{}/{:g}/{}", s.min, s.median, s.max);
}

}  // namespace

json report_json(const DriftReport& r) {
  json j;
  j["format"] = kDriftReportFormat;
  j["sweep"] = sweep_to_json(r.sweep);
  j["backend"] = r.backend;
  j["seconds"] = r.seconds;
  j["growth"] = r.growth;
  j["control_run"] = r.control_run;
  j["control_ok"] = r.control_ok;
  j["mismatches"] = r.mismatches;
  j["passed"] = r.passed;
  j["verdict"] = r.verdict;
  j["first_failure"] = r.first_failure;
  j["cells"] = json::array();
  for (const auto& c : r.cells) {
    json cj;
    cj["index"] = c.cell.index;
    cj["name"] = c.cell.name;
    cj["context"] = c.cell.context;
    cj["batch"] = c.cell.batch;
    cj["hkv"] = c.cell.heads.hkv;
    cj["group"] = c.cell.heads.group;
    cj["head_dim"] = r.sweep.head_dim;
    cj["lens"] = c.cell.lens;
    cj["tokens"] = c.cell.tokens;
    cj["seconds"] = c.seconds;
    cj["seconds_by_phase"] = {{"data", c.seconds_data}, {"kernel_reference", c.seconds_kernel_ref},
                              {"end_to_end_reference", c.seconds_end_to_end_ref}, {"arms", c.seconds_arms},
                              {"control", c.seconds_control}};
    cj["arms"] = json::array();
    for (const auto& a : c.arms) {
      const char* kind = a.arm.kind == ArmKind::planned ? "planned" : a.arm.kind == ArmKind::uniform ? "uniform" : "control";
      cj["arms"].push_back({{"name", a.arm.name},
                            {"kind", kind},
                            {"ceiling", a.arm.ceiling},
                            {"partial", std::string(kernels::to_string(a.arm.partial))},
                            {"splits", {{"min", a.splits.min}, {"median", a.splits.median}, {"max", a.splits.max},
                                        {"per_request", a.splits.per_request}}},
                            {"kernel_reference", figures_json(a.kernel_ref)},
                            {"end_to_end", figures_json(a.end_to_end)},
                            {"status_failures", a.status_failures}});
    }
    cj["growth"] = json::array();
    for (const auto& g : c.growth) cj["growth"].push_back(growth_json(g));
    if (c.control) cj["control"] = growth_json(*c.control);
    cj["growth_found"] = c.growth_found;
    cj["control_ok"] = c.control_ok;
    cj["mismatches"] = c.mismatches;
    cj["nonfinite"] = c.nonfinite;
    cj["passed"] = c.passed;
    cj["verdict"] = c.verdict;
    j["cells"].push_back(cj);
  }
  return j;
}

std::string report_markdown(const DriftReport& r) {
  const DriftSweep& s = r.sweep;
  std::ostringstream m;
  m << fmt::format("## pav drift: sweep `{}` on {} ({} data seeds, {:.1f} s)\n\n", s.name, r.backend, s.seeds, r.seconds);
  m << fmt::format("Planner cu {}, budget {}, D {}, block {}, q_len {}, arch {}, reference {}. "
                   "Figures are the mean over seeds (min-max in brackets for ||delta||/||ref||). "
                   "Kernel reference: over the dequantized cache; end to end: over the unquantized source values. "
                   "Splits: non-empty partitions per request, min/median/max.\n\n",
                   s.cu, s.workgroup_budget ? s.workgroup_budget : 2 * int64_t(s.cu), s.head_dim, s.block_size, s.q_len,
                   kernels::to_string(s.arch), s.reference_precision == reference::Precision::fp64 ? "fp64" : "fp32");
  for (const auto& c : r.cells) {
    m << fmt::format("### cell `{}`: Hkv {}, G {}, {} tokens ({})\n\n", c.cell.name, c.cell.heads.hkv,
                     c.cell.heads.group, c.cell.tokens, lens_summary(c.cell.lens));
    m << fmt::format("{:.1f} s: data {:.1f}, kernel reference {:.1f}, end-to-end reference {:.1f}, arms {:.1f}, "
                     "control {:.1f}.\n\n",
                     c.seconds, c.seconds_data, c.seconds_kernel_ref, c.seconds_end_to_end_ref, c.seconds_arms,
                     c.seconds_control);
    m << "| arm | splits | kernel ‖Δ‖/‖ref‖ | kernel max row rel | kernel max abs | mismatches | "
         "e2e ‖Δ‖/‖ref‖ | e2e max row rel | e2e max abs |\n";
    m << "|---|---|---|---|---|---|---|---|---|\n";
    for (const auto& a : c.arms) {
      m << fmt::format("| {} | {} | {} [{}, {}] | {} | {:.3g} | {} | {} [{}, {}] | {} | {:.3g} |\n", a.arm.name,
                       splits_text(a.splits), pct(mean_of(a.kernel_ref, &ErrorFigures::rel_l2)),
                       pct(min_of(a.kernel_ref, &ErrorFigures::rel_l2)), pct(max_of(a.kernel_ref, &ErrorFigures::rel_l2)),
                       pct(mean_of(a.kernel_ref, &ErrorFigures::max_row_rel), 2),
                       mean_of(a.kernel_ref, &ErrorFigures::max_abs), sum_mismatches(a.kernel_ref),
                       pct(mean_of(a.end_to_end, &ErrorFigures::rel_l2)), pct(min_of(a.end_to_end, &ErrorFigures::rel_l2)),
                       pct(max_of(a.end_to_end, &ErrorFigures::rel_l2)),
                       pct(mean_of(a.end_to_end, &ErrorFigures::max_row_rel), 2),
                       mean_of(a.end_to_end, &ErrorFigures::max_abs));
    }
    m << "\n";
  }
  m << fmt::format("### growth tests (ceiling {} vs {}, paired over seeds; growth = mean d > 0, one-sided paired t or "
                   "sign p < {:g} (alpha {:g}, Bonferroni over the two), relative growth > {:.0f}%)\n\n",
                   s.ceilings.front(), s.ceilings.back(), s.growth.alpha / 2, s.growth.alpha,
                   100.0 * s.growth.min_relative_growth);
  m << "| cell | arms | reference | splits differ | mean low | mean high | relative growth | t p | sign p | verdict |\n";
  m << "|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& c : r.cells) {
    std::vector<const GrowthRow*> rows;
    for (const auto& g : c.growth) rows.push_back(&g);
    if (c.control) rows.push_back(&*c.control);
    for (const GrowthRow* g : rows) {
      const auto& t = g->test;
      const std::string verdict = g->arms.rfind("control", 0) == 0
                                      ? (t.growth ? "growth (control flipped)" : g->splits_differ ? "NO FLIP" : "n/a")
                                      : (t.growth ? "**GROWTH**" : "no growth");
      m << fmt::format("| {} | {} | {} | {} | {} | {} | {:+.1f}% | {:.2g} | {:.2g} | {} |\n", c.cell.name, g->arms,
                       g->reference == DriftReference::kernel ? "kernel" : "end to end", g->splits_differ ? "yes" : "no",
                       pct(t.mean_low), pct(t.mean_high), 100.0 * t.relative_growth, t.t_p, t.sign_p, verdict);
    }
  }
  m << "\n| cell | verdict |\n|---|---|\n";
  for (const auto& c : r.cells) m << fmt::format("| {} | {} |\n", c.cell.name, c.verdict);
  m << fmt::format("\n**Overall: {}**\n", r.verdict);
  if (!r.first_failure.empty()) m << fmt::format("\nFirst failure: {}\n", r.first_failure);
  return m.str();
}

}  // namespace pav::props
