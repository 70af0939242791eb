// SPDX-License-Identifier: Apache-2.0
#pragma once
// Latency benchmark summaries and their comparison (B against A).
//
// Input per run: per-token latency samples in milliseconds, optionally the
// number of completed requests and the wall-clock duration in seconds.
//   p50/p90/p99       percentiles of latency_ms (type 7 interpolation)
//   interactivity     1000 / p90, tokens per second of one stream at p90
//   throughput        samples / duration_s (tokens per second) when duration_s
//                     is given; otherwise 1000 / mean(latency_ms), the rate of one
//                     stream decoding back to back (source "mean_latency")
//   requests_per_s    completed / duration_s when both are given
#include "stats/bootstrap.hpp"
#include "stats/interval.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pav::stats {

inline constexpr double kDefaultMaxCountDiff = 0.02;

struct BenchRun {
  std::string source;
  std::vector<double> latency_ms;  // positive, finite
  std::optional<std::int64_t> completed;
  std::optional<double> duration_s;
};

struct BenchSummary {
  std::string source;
  std::size_t samples = 0;
  double p50_ms = 0.0;
  double p90_ms = 0.0;
  double p99_ms = 0.0;
  double interactivity_tok_s = 0.0;
  double throughput_tok_s = 0.0;
  std::string throughput_source;  // "duration_s" or "mean_latency"
  std::optional<std::int64_t> completed;
  std::optional<double> duration_s;
  std::optional<double> requests_per_s;
};

// Throws std::invalid_argument on an empty sample.
BenchSummary summarize_bench(const BenchRun& run);

// One metric's relative change B/A - 1 with its bootstrap interval; ci is
// absent when the metric cannot be resampled (throughput from duration_s).
struct BenchDelta {
  std::string metric;
  double delta = 0.0;
  std::optional<Interval> ci;
};

struct BenchComparison {
  BenchSummary a;
  BenchSummary b;
  BootstrapOptions options;
  double max_count_diff = kDefaultMaxCountDiff;
  std::vector<BenchDelta> deltas;  // p50_ms, p90_ms, p99_ms, interactivity_tok_s[, throughput_tok_s]
  std::vector<std::string> warnings;
};

// Fraction by which two completed-request counts differ: |a - b| / max(a, b), 0 when both are 0.
double count_difference(std::int64_t a, std::int64_t b);

// Warns when both completed counts are given and differ by more than
// max_count_diff (the runs then served different request mixes), when only one
// run gives completed, and when the two throughputs have different sources (no
// throughput delta is then reported).
BenchComparison compare_bench(const BenchRun& a, const BenchRun& b, const BootstrapOptions& options,
                              double max_count_diff = kDefaultMaxCountDiff);

}  // namespace pav::stats
