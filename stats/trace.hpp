// SPDX-License-Identifier: Apache-2.0
#pragma once
// Unevenness of decode batches in a trace, and the room a length-proportional
// work planner has over the uniform split.
//
// Per step with lengths len_1..len_B (B = batch size, every entry counts):
//   ratio    = max(len) / min(len > 0). Lengths <= 0 are empty requests: they are
//              left out of the minimum; a step with no positive length has no ratio.
//   headroom = c / u, the model of how much shorter the longest request's
//              critical path gets under proportional splitting:
//                u = min(P, max(1, floor(W / B)))                    uniform: every request alike
//                c = min(P, max(1, floor(W * len_max / sum)))        proportional share of the longest
//              critical paths len_max/u and len_max/c tokens per workgroup, so their
//              ratio is c/u. sum = sum of max(len, 0); a step with sum 0 has no headroom.
//   W = workgroup budget (default 512), P = max partitions per request (default 256).
// Trace percentiles are type 7 over the steps that have the value.
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <vector>

namespace pav::stats {

inline constexpr double kUnevenRatio = 4.0;

struct PlannerModel {
  std::int64_t budget = 512;         // W
  std::int64_t max_partitions = 256; // P
};

struct TraceStep {
  std::vector<std::int64_t> context_lens;
  long line = 0;
};

struct StepStats {
  std::size_t batch = 0;
  std::int64_t max_len = 0;  // max of max(len, 0)
  std::int64_t kv_sum = 0;   // sum of max(len, 0)
  std::optional<std::int64_t> min_positive;
  std::optional<double> ratio;
  std::int64_t uniform_parts = 0;   // u
  std::int64_t planned_parts = 0;   // c (0 when kv_sum == 0)
  std::optional<double> headroom;   // c / u
};

// Throws std::invalid_argument on an empty step or a model with W or P < 1.
StepStats step_stats(std::span<const std::int64_t> lens, const PlannerModel& model);

struct Spread {
  std::size_t steps = 0;  // steps that have the value
  double p50 = 0.0;
  double p90 = 0.0;
  double max = 0.0;
};

struct TraceSummary {
  PlannerModel model;
  std::size_t steps = 0;
  Spread ratio;
  std::size_t ratio_above_4 = 0;   // steps with ratio > kUnevenRatio
  double frac_ratio_above_4 = 0.0; // of the steps that have a ratio
  Spread headroom;
  std::size_t headroom_above_1 = 0;
  std::map<std::size_t, std::size_t> batch_histogram;  // batch size -> steps
};

TraceSummary summarize_trace(const std::vector<TraceStep>& steps, const PlannerModel& model);

}  // namespace pav::stats
