// SPDX-License-Identifier: Apache-2.0
#include "stats/trace.hpp"

#include "stats/percentile.hpp"

#include <algorithm>
#include <stdexcept>

namespace pav::stats {

StepStats step_stats(std::span<const std::int64_t> lens, const PlannerModel& model) {
  if (lens.empty()) throw std::invalid_argument("step_stats: empty step");
  if (model.budget < 1 || model.max_partitions < 1)
    throw std::invalid_argument("step_stats: budget and max_partitions must be >= 1");
  StepStats s;
  s.batch = lens.size();
  for (const auto len : lens) {
    const auto ctx = std::max<std::int64_t>(len, 0);
    s.max_len = std::max(s.max_len, ctx);
    s.kv_sum += ctx;
    if (len > 0) s.min_positive = s.min_positive ? std::min(*s.min_positive, len) : len;
  }
  if (s.min_positive) s.ratio = static_cast<double>(s.max_len) / static_cast<double>(*s.min_positive);

  const auto batch = static_cast<std::int64_t>(s.batch);
  s.uniform_parts = std::min(model.max_partitions, std::max<std::int64_t>(1, model.budget / batch));
  if (s.kv_sum > 0) {
    // 128-bit product: W * len_max may pass 2^63 for long contexts and a large budget.
    const auto share = static_cast<std::int64_t>(static_cast<__int128>(model.budget) * s.max_len / s.kv_sum);
    s.planned_parts = std::min(model.max_partitions, std::max<std::int64_t>(1, share));
    s.headroom = static_cast<double>(s.planned_parts) / static_cast<double>(s.uniform_parts);
  }
  return s;
}

namespace {

Spread spread(std::vector<double> v) {
  Spread s;
  s.steps = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.p50 = percentile_sorted(v, 0.50);
  s.p90 = percentile_sorted(v, 0.90);
  s.max = v.back();
  return s;
}

}  // namespace

TraceSummary summarize_trace(const std::vector<TraceStep>& steps, const PlannerModel& model) {
  TraceSummary t;
  t.model = model;
  t.steps = steps.size();
  std::vector<double> ratios;
  std::vector<double> headrooms;
  for (const auto& step : steps) {
    const auto s = step_stats(step.context_lens, model);
    ++t.batch_histogram[s.batch];
    if (s.ratio) {
      ratios.push_back(*s.ratio);
      if (*s.ratio > kUnevenRatio) ++t.ratio_above_4;
    }
    if (s.headroom) {
      headrooms.push_back(*s.headroom);
      if (*s.headroom > 1.0) ++t.headroom_above_1;
    }
  }
  t.frac_ratio_above_4 =
      ratios.empty() ? 0.0 : static_cast<double>(t.ratio_above_4) / static_cast<double>(ratios.size());
  t.ratio = spread(std::move(ratios));
  t.headroom = spread(std::move(headrooms));
  return t;
}

}  // namespace pav::stats
