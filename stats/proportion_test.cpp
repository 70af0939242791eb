// SPDX-License-Identifier: Apache-2.0
#include "stats/proportion.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>

namespace pav::stats {
namespace {

TEST(StatsWilson, TwoSidedZMatchesNormalTable) {
  EXPECT_NEAR(two_sided_z(0.95), 1.959963984540054, 1e-12);
  EXPECT_NEAR(two_sided_z(0.99), 2.5758293035489004, 1e-12);
  EXPECT_NEAR(two_sided_z(0.90), 1.6448536269514722, 1e-12);
  EXPECT_THROW(two_sided_z(1.0), std::invalid_argument);
  EXPECT_THROW(two_sided_z(0.0), std::invalid_argument);
}

TEST(StatsWilson, ZeroSuccessesHasClosedFormUpperEnd) {
  // With k = 0 the score equation p^2 = z^2 p (1 - p) / n gives p = z^2 / (n + z^2):
  // 1.959964^2 = 3.841459, 3.841459 / 13.841459 = 0.277533.
  const auto ci = wilson_interval(0, 10);
  EXPECT_EQ(ci.lo, 0.0);
  EXPECT_NEAR(ci.hi, 0.277533, 2e-6);
  const auto all = wilson_interval(10, 10);
  EXPECT_NEAR(all.lo, 1.0 - 0.277533, 2e-6);
  EXPECT_EQ(all.hi, 1.0);
}

TEST(StatsWilson, HalfSuccessesByHand) {
  // k = 5, n = 10: centre 0.5; half width z / (1 + z^2/n) * sqrt(p(1-p)/n + z^2/(4n^2))
  // = 1.959964 / 1.3841459 * sqrt(0.025 + 0.0096036) = 1.416010 * 0.186020 = 0.263406.
  const auto ci = wilson_interval(5, 10);
  EXPECT_NEAR(ci.lo, 0.5 - 0.263406, 5e-6);
  EXPECT_NEAR(ci.hi, 0.5 + 0.263406, 5e-6);
}

TEST(StatsWilson, EndsSolveTheScoreEquation) {
  // Defining property: each end p satisfies (k/n - p)^2 = z^2 p (1 - p) / n.
  for (const double conf : {0.9, 0.95, 0.99}) {
    const double z = two_sided_z(conf);
    for (std::int64_t n : {1, 2, 7, 40, 1319, 1000000}) {
      for (std::int64_t k : {std::int64_t{0}, n / 3, n / 2, n - 1, n}) {
        if (k < 0) continue;
        const auto ci = wilson_interval(k, n, conf);
        const double ph = static_cast<double>(k) / static_cast<double>(n);
        for (const double p : {ci.lo, ci.hi}) {
          const double lhs = (ph - p) * (ph - p);
          const double rhs = z * z * p * (1 - p) / static_cast<double>(n);
          EXPECT_NEAR(lhs, rhs, 1e-12) << "k=" << k << " n=" << n << " conf=" << conf;
        }
        EXPECT_LE(ci.lo, ph);
        EXPECT_GE(ci.hi, ph);
      }
    }
  }
}

TEST(StatsWilson, EmptyAndInvalid) {
  const auto ci = wilson_interval(0, 0);
  EXPECT_EQ(ci.lo, 0.0);
  EXPECT_EQ(ci.hi, 1.0);
  EXPECT_THROW(wilson_interval(3, 2), std::invalid_argument);
  EXPECT_THROW(wilson_interval(-1, 2), std::invalid_argument);
}

RC_GTEST_PROP(StatsWilson, MirrorsUnderSwappingSuccessAndFailure, ()) {
  const auto n = *rc::gen::inRange<std::int64_t>(1, 100000);
  const auto k = *rc::gen::inRange<std::int64_t>(0, n + 1);
  const auto x = wilson_interval(k, n);
  const auto y = wilson_interval(n - k, n);
  RC_ASSERT(std::abs(x.lo - (1.0 - y.hi)) < 1e-12);
  RC_ASSERT(std::abs(x.hi - (1.0 - y.lo)) < 1e-12);
  RC_ASSERT(x.lo >= 0.0 && x.hi <= 1.0 && x.lo <= x.hi);
}

RC_GTEST_PROP(StatsWilson, NarrowsWithMoreTrialsAtSameProportion, ()) {
  const auto n = *rc::gen::inRange<std::int64_t>(1, 5000);
  const auto k = *rc::gen::inRange<std::int64_t>(0, n + 1);
  const auto x = wilson_interval(k, n);
  const auto y = wilson_interval(4 * k, 4 * n);
  RC_ASSERT(y.hi - y.lo < x.hi - x.lo);
}

}  // namespace
}  // namespace pav::stats
