// SPDX-License-Identifier: Apache-2.0
#include "stats/bench.hpp"

#include "stats/input_error.hpp"
#include "stats/percentile.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <stdexcept>

namespace pav::stats {

namespace {

constexpr double kMsPerSecond = 1000.0;

double mean(std::span<const double> v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

// The resampled statistics, in the order of the first entries of deltas.
std::vector<double> latency_stats(std::vector<double>& sample) {
  const double p90 = percentile_select(sample, 0.90);
  const double p50 = percentile_select(sample, 0.50);
  const double p99 = percentile_select(sample, 0.99);
  return {p50, p90, p99, kMsPerSecond / p90, kMsPerSecond / mean(sample)};
}

}  // namespace

BenchSummary summarize_bench(const BenchRun& run) {
  if (run.latency_ms.empty()) throw std::invalid_argument(run.source + ": no latency samples");
  BenchSummary s;
  s.source = run.source;
  s.samples = run.latency_ms.size();
  std::vector<double> sorted = run.latency_ms;
  std::sort(sorted.begin(), sorted.end());
  s.p50_ms = percentile_sorted(sorted, 0.50);
  s.p90_ms = percentile_sorted(sorted, 0.90);
  s.p99_ms = percentile_sorted(sorted, 0.99);
  s.interactivity_tok_s = kMsPerSecond / s.p90_ms;
  if (run.duration_s) {
    s.throughput_tok_s = static_cast<double>(s.samples) / *run.duration_s;
    s.throughput_source = "duration_s";
  } else {
    s.throughput_tok_s = kMsPerSecond / mean(run.latency_ms);
    s.throughput_source = "mean_latency";
  }
  s.completed = run.completed;
  s.duration_s = run.duration_s;
  if (run.completed && run.duration_s) s.requests_per_s = static_cast<double>(*run.completed) / *run.duration_s;
  return s;
}

double count_difference(std::int64_t a, std::int64_t b) {
  const auto hi = std::max(a, b);
  if (hi == 0) return 0.0;
  return static_cast<double>(std::llabs(a - b)) / static_cast<double>(hi);
}

BenchComparison compare_bench(const BenchRun& a, const BenchRun& b, const BootstrapOptions& options,
                              double max_count_diff) {
  // The bootstrap's work grows with resamples x samples: refuse a comparison
  // past the limit before any of it, naming both files and what would fit.
  const std::size_t na = a.latency_ms.size(), nb = b.latency_ms.size();
  if (const std::int64_t draws = bootstrap_draws(na, nb, options.resamples); draws > kMaxBootstrapDraws) {
    const std::int64_t fits = kMaxBootstrapDraws / static_cast<std::int64_t>(na + nb);
    throw InputError(fmt::format(
        "{}, {}: latency_ms: {} + {} samples x {} resamples is {} bootstrap draws, more than the limit of {}: {}",
        a.source, b.source, na, nb, options.resamples, draws, kMaxBootstrapDraws,
        fits >= 1 ? fmt::format("pass --resamples {} or fewer, or compare fewer samples", fits)
                  : std::string("compare fewer samples")));
  }
  BenchComparison r;
  r.a = summarize_bench(a);
  r.b = summarize_bench(b);
  r.options = options;
  r.max_count_diff = max_count_diff;

  const auto ci = bootstrap_relative_delta(a.latency_ms, b.latency_ms, latency_stats, options);
  const auto rel = [](double x, double y) { return y / x - 1.0; };
  r.deltas.push_back({"p50_ms", rel(r.a.p50_ms, r.b.p50_ms), ci[0]});
  r.deltas.push_back({"p90_ms", rel(r.a.p90_ms, r.b.p90_ms), ci[1]});
  r.deltas.push_back({"p99_ms", rel(r.a.p99_ms, r.b.p99_ms), ci[2]});
  r.deltas.push_back({"interactivity_tok_s", rel(r.a.interactivity_tok_s, r.b.interactivity_tok_s), ci[3]});
  if (r.a.throughput_source != r.b.throughput_source) {
    r.warnings.push_back(fmt::format(
        "duration_s is given for {} only: throughput is measured differently in A and B, so no throughput delta",
        a.duration_s ? a.source : b.source));
  } else if (r.a.throughput_source == "mean_latency") {
    r.deltas.push_back({"throughput_tok_s", rel(r.a.throughput_tok_s, r.b.throughput_tok_s), ci[4]});
  } else {
    // One wall-clock duration per run: nothing to resample.
    r.deltas.push_back({"throughput_tok_s", rel(r.a.throughput_tok_s, r.b.throughput_tok_s), std::nullopt});
  }

  if (a.completed && b.completed) {
    const double diff = count_difference(*a.completed, *b.completed);
    if (diff > max_count_diff) {
      r.warnings.push_back(fmt::format(
          "completed requests differ by {:.1f}% ({} vs {}), more than {:.1f}%: the runs served different request "
          "mixes, so the deltas compare unlike workloads",
          100.0 * diff, *a.completed, *b.completed, 100.0 * max_count_diff));
    }
  } else if (a.completed || b.completed) {
    r.warnings.push_back(fmt::format("completed is given for {} only: the request mix is not checked",
                                     a.completed ? a.source : b.source));
  }
  return r;
}

}  // namespace pav::stats
