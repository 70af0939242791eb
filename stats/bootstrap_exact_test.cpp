// SPDX-License-Identifier: Apache-2.0
// Exact small-sample oracles for the bootstrap: answers computed by enumerating
// every resample (seed-independent), and by redoing the documented draws (the
// standard-fixed mt19937_64 stream through multiply-shift with rejection) with
// this file's own few lines, never by the code under test.
#include "stats/bench.hpp"
#include "stats/bootstrap.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <numeric>
#include <random>
#include <vector>

namespace pav::stats {
namespace {

std::vector<double> mean_of(std::vector<double>& s) {
  return {std::accumulate(s.begin(), s.end(), 0.0) / double(s.size())};
}

// Type 7 percentile of an already sorted vector, written out here.
double type7(const std::vector<double>& sorted, double q) {
  const double h = (double(sorted.size()) - 1.0) * q;
  const auto lo = size_t(std::floor(h));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (h - std::floor(h)) * (sorted[hi] - sorted[lo]);
}

// The documented index draw: high 64 bits of draw * n, redrawn while the low
// 64 bits fall below 2^64 mod n.
uint64_t documented_index(std::mt19937_64& rng, uint64_t n) {
  const uint64_t threshold = (uint64_t(0) - n) % n;
  while (true) {
    const unsigned __int128 m = (unsigned __int128)rng() * n;
    if (uint64_t(m) >= threshold) return uint64_t(m >> 64);
  }
}

}  // namespace

// A = {1, 2}, B = {3}, mean. A resample's mean is 1, 1.5 or 2 with probability
// 1/4, 1/2, 1/4, so the sorted deltas 3/mean - 1 are 0.5 (first quarter), 1
// (middle half) and 2 (last quarter). The percentiles at 0.2 and 0.8
// (confidence 0.6) lie inside the outer blocks, at confidence 0.2 (0.4 and 0.6)
// inside the middle one: exactly [0.5, 2] and [1, 1] for every seed (with 4000
// resamples each percentile is over 7 standard deviations from a block edge).
TEST(StatsBootstrapExact, EnumeratedTwoPointSample) {
  const std::vector<double> a{1.0, 2.0}, b{3.0};
  for (std::uint64_t seed : {1u, 2u, 20240229u}) {
    std::cout << "bootstrap seed " << seed << "\n";
    const auto wide = bootstrap_relative_delta(a, b, mean_of, {.seed = seed, .resamples = 4000, .confidence = 0.6});
    ASSERT_EQ(wide.size(), 1u);
    EXPECT_EQ(wide[0].lo, 0.5);
    EXPECT_EQ(wide[0].hi, 2.0);
    const auto narrow = bootstrap_relative_delta(a, b, mean_of, {.seed = seed, .resamples = 4000, .confidence = 0.2});
    EXPECT_EQ(narrow[0].lo, 1.0);
    EXPECT_EQ(narrow[0].hi, 1.0);
  }
}

// The deltas are B over A: with the samples swapped they are mean/3 - 1, i.e.
// -2/3 (first quarter), -1/2 (middle half), -1/3 (last quarter): [-2/3, -1/3].
TEST(StatsBootstrapExact, EnumeratedSwappedSamples) {
  const std::vector<double> a{3.0}, b{1.0, 2.0};
  const auto r = bootstrap_relative_delta(a, b, mean_of, {.seed = 7, .resamples = 4000, .confidence = 0.6});
  EXPECT_DOUBLE_EQ(r[0].lo, 1.0 / 3.0 - 1.0);
  EXPECT_DOUBLE_EQ(r[0].hi, 2.0 / 3.0 - 1.0);
}

// Every statistic gets its own interval from the same resamples: max and min of
// A = {1, 2, 4}, B = {2}. A resample's max is 1, 2 or 4 with probability 1/27,
// 7/27, 19/27; its min is 1, 2 or 4 with probability 19/27, 7/27, 1/27.
// Sorted deltas 2/max - 1: -0.5 (first 70.4%), 0 (to 96.3%), 1. Sorted deltas
// 2/min - 1: -0.5 (first 3.7%), 0 (to 29.6%), 1. Confidence 0.5 takes the
// percentiles 0.25 and 0.75: [-0.5, 0] for max, [0, 1] for min.
TEST(StatsBootstrapExact, EnumeratedTwoStatistics) {
  const std::vector<double> a{1.0, 2.0, 4.0}, b{2.0};
  const SampleStats max_min = [](std::vector<double>& s) {
    return std::vector<double>{*std::max_element(s.begin(), s.end()), *std::min_element(s.begin(), s.end())};
  };
  const auto r = bootstrap_relative_delta(a, b, max_min, {.seed = 11, .resamples = 6000, .confidence = 0.5});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].lo, -0.5);
  EXPECT_EQ(r[0].hi, 0.0);
  EXPECT_EQ(r[1].lo, 0.0);
  EXPECT_EQ(r[1].hi, 1.0);
}

// The documented draw sequence, redone here: per resample, A's n draws then B's
// m draws from one mt19937_64 seeded with the seed; ends are type 7 percentiles
// of the deltas at (1 - c)/2 and (1 + c)/2.
TEST(StatsBootstrapExact, RedoneDrawsGiveTheSameInterval) {
  const std::vector<double> a{10.0, 11.0, 13.0, 17.0, 19.0}, b{12.0, 15.0, 16.0};
  for (const BootstrapOptions opt : {BootstrapOptions{.seed = 3, .resamples = 9, .confidence = 0.9},
                                     BootstrapOptions{.seed = 99, .resamples = 40, .confidence = 0.5},
                                     BootstrapOptions{.seed = 5, .resamples = 1, .confidence = 0.95}}) {
    std::cout << "bootstrap seed " << opt.seed << ", " << opt.resamples << " resamples\n";
    std::mt19937_64 rng(opt.seed);
    std::vector<double> deltas;
    for (int r = 0; r < opt.resamples; ++r) {
      double sa = 0, sb = 0;
      for (size_t i = 0; i < a.size(); ++i) sa += a[documented_index(rng, a.size())];
      for (size_t i = 0; i < b.size(); ++i) sb += b[documented_index(rng, b.size())];
      deltas.push_back((sb / double(b.size())) / (sa / double(a.size())) - 1.0);
    }
    std::sort(deltas.begin(), deltas.end());
    const double tail = (1.0 - opt.confidence) / 2.0;
    const auto got = bootstrap_relative_delta(a, b, mean_of, opt);
    EXPECT_DOUBLE_EQ(got[0].lo, type7(deltas, tail));
    EXPECT_DOUBLE_EQ(got[0].hi, type7(deltas, 1.0 - tail));
  }
}

// The index draw itself, including the rejection path: for n = 2^63 + 1 about
// half of all draws are redrawn, so a few hundred draws take it many times.
TEST(StatsBootstrapExact, DrawIndexIsTheDocumentedMultiplyShift) {
  for (uint64_t n : {uint64_t(1), uint64_t(2), uint64_t(3), uint64_t(10), uint64_t(1000003),
                     (uint64_t(1) << 63) + 1, ~uint64_t(0)}) {
    std::mt19937_64 mine(17), theirs(17);
    for (int i = 0; i < 300; ++i) ASSERT_EQ(draw_index(theirs, n), documented_index(mine, n)) << "n " << n << " draw " << i;
    EXPECT_EQ(theirs(), mine()) << "n " << n << ": the two consumed different numbers of draws";
  }
}

// The bench comparison's metrics each get their own interval, by name: A = {10}
// (every resample is 10), B = {20, 40}. B's resamples are {20, 20}, {20, 40}
// (either order) and {40, 40} with probability 1/4, 1/2, 1/4. The middle one
// has p50 30, p90 38, p99 39.8, interactivity 1000/38 and throughput 1000/30
// (mean 30), so at confidence 0.2 every interval is exactly that metric's
// delta: 2, 2.8, 2.98, (1000/38)/100 - 1 and (1000/30)/100 - 1 (the point
// deltas, from B's sample itself, are the same). At confidence 0.6 the ends
// fall in the outer blocks: latencies 20/10 - 1 = 1 to 40/10 - 1 = 3, rates
// (1000/40)/100 - 1 = -0.75 to (1000/20)/100 - 1 = -0.5.
TEST(StatsBootstrapExact, BenchMetricsGetTheirOwnIntervals) {
  const BenchRun a{"a", {10.0}, std::nullopt, std::nullopt}, b{"b", {20.0, 40.0}, std::nullopt, std::nullopt};
  struct Want {
    const char* metric;
    double middle, lo, hi;
  };
  const Want want[] = {{"p50_ms", 2.0, 1.0, 3.0},
                       {"p90_ms", 2.8, 1.0, 3.0},
                       {"p99_ms", 2.98, 1.0, 3.0},
                       {"interactivity_tok_s", 10.0 / 38.0 - 1.0, -0.75, -0.5},
                       {"throughput_tok_s", 1.0 / 3.0 - 1.0, -0.75, -0.5}};
  for (std::uint64_t seed : {4u, 31u}) {
    std::cout << "bootstrap seed " << seed << "\n";
    const auto narrow = compare_bench(a, b, {.seed = seed, .resamples = 4000, .confidence = 0.2});
    const auto wide = compare_bench(a, b, {.seed = seed, .resamples = 4000, .confidence = 0.6});
    ASSERT_EQ(narrow.deltas.size(), 5u);
    ASSERT_EQ(wide.deltas.size(), 5u);
    for (size_t k = 0; k < 5; ++k) {
      const Want& w = want[k];
      ASSERT_EQ(narrow.deltas[k].metric, w.metric);
      EXPECT_NEAR(narrow.deltas[k].delta, w.middle, 1e-12) << w.metric;
      ASSERT_TRUE(narrow.deltas[k].ci) << w.metric;
      EXPECT_NEAR(narrow.deltas[k].ci->lo, w.middle, 1e-12) << w.metric;
      EXPECT_NEAR(narrow.deltas[k].ci->hi, w.middle, 1e-12) << w.metric;
      ASSERT_TRUE(wide.deltas[k].ci) << w.metric;
      EXPECT_NEAR(wide.deltas[k].ci->lo, w.lo, 1e-12) << w.metric;
      EXPECT_NEAR(wide.deltas[k].ci->hi, w.hi, 1e-12) << w.metric;
    }
  }
}

}  // namespace pav::stats
