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
// deltas. Throws std::invalid_argument on an empty sample or resamples < 1.
std::vector<Interval> bootstrap_relative_delta(std::span<const double> a, std::span<const double> b,
                                               const SampleStats& stats, const BootstrapOptions& options);

}  // namespace pav::stats
