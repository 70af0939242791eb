// SPDX-License-Identifier: Apache-2.0
#pragma once
// Seeded percentile bootstrap. Draws come from std::mt19937_64 (whose output the
// standard fixes) through our own index mapping, so a seed gives the same
// intervals with every compiler and standard library.
#include "stats/interval.hpp"

#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <vector>

namespace pav::stats {

inline constexpr std::uint64_t kDefaultSeed = 20240229;
inline constexpr int kDefaultResamples = 2000;
// The work of one bootstrap: resamples x (|A| + |B|) index draws, each followed
// by its share of the statistics (three selections and a mean of every
// resample). Measured on the shared 2-core machine (pav -O2, 2026-12-07): 33 ns
// a draw with 200,000 samples a run (8e8 draws: 26 s) and 55 ns with 2,000,000
// (the resamples leave the cache; 2^30 draws: 59 s). Past the limit a run is
// refused before the first draw: two runs of 2,000,000 samples at the default
// 2000 resamples took 455 s, --resamples 10^6 over the largest file the
// reader takes would take weeks. 2^29 would keep every accepted run under
// 30 s, at the price of refusing 2 x 150,000 samples at the default resamples.
inline constexpr std::int64_t kMaxBootstrapDraws = std::int64_t(1) << 30;

// resamples x (na + nb), the draws a bootstrap of two samples makes.
std::int64_t bootstrap_draws(std::size_t na, std::size_t nb, int resamples);

struct BootstrapOptions {
  std::uint64_t seed = kDefaultSeed;
  int resamples = kDefaultResamples;
  double confidence = 0.95;
};

// Uniform index in [0, n), n >= 1 (Lemire's multiply-shift with rejection: unbiased).
std::uint64_t draw_index(std::mt19937_64& rng, std::uint64_t n);

// Computes several statistics of one sample; may reorder the sample.
using SampleStats = std::function<std::vector<double>(std::vector<double>& sample)>;

// For each statistic s returned by stats: the percentile bootstrap interval of
// the relative delta s(B)/s(A) - 1, resampling A and B independently with
// replacement (their samples are not paired). The interval's ends are the
// (1-confidence)/2 and (1+confidence)/2 percentiles (type 7) of the resampled
// deltas. Throws std::invalid_argument on an empty sample, resamples < 1, or
// more than kMaxBootstrapDraws draws (a caller that reads files checks it
// first, naming them).
std::vector<Interval> bootstrap_relative_delta(std::span<const double> a, std::span<const double> b,
                                               const SampleStats& stats, const BootstrapOptions& options);

}  // namespace pav::stats
