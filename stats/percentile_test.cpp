// SPDX-License-Identifier: Apache-2.0
#include "stats/percentile.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <limits>
#include <span>
#include <vector>

namespace pav::stats {
namespace {

TEST(StatsPercentile, LinearInterpolationByHand) {
  // n = 5: h = 4q. q = .5 -> x[2]; q = .9 -> h 3.6 -> 40 + .6 * 10; q = .99 -> 40 + .96 * 10.
  const std::vector<double> v{50, 10, 40, 20, 30};
  EXPECT_DOUBLE_EQ(percentile(v, 0.5), 30.0);
  EXPECT_DOUBLE_EQ(percentile(v, 0.9), 46.0);
  EXPECT_DOUBLE_EQ(percentile(v, 0.99), 49.6);
  EXPECT_DOUBLE_EQ(percentile(v, 0.0), 10.0);
  EXPECT_DOUBLE_EQ(percentile(v, 1.0), 50.0);
  // n = 6: q = .5 -> h 2.5 -> (3 + 4) / 2.
  EXPECT_DOUBLE_EQ(percentile({1, 1, 3, 4, 6, 40}, 0.5), 3.5);
  EXPECT_DOUBLE_EQ(percentile({7}, 0.9), 7.0);
}

TEST(StatsPercentile, EmptyIsNanAndBadQThrows) {
  EXPECT_TRUE(std::isnan(percentile({}, 0.5)));
  EXPECT_THROW(percentile({1.0}, 1.5), std::invalid_argument);
  EXPECT_THROW(percentile({1.0}, -0.1), std::invalid_argument);
}

// Both percentile forms read only the values they are given: a NaN right past
// the span's end must never reach the result, at q = 1 (the last value, where
// there is no next one to interpolate towards) or with a single value.
TEST(StatsPercentile, NothingPastTheSpanIsRead) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (double q : {0.0, 0.5, 0.999, 1.0}) {
    std::vector<double> buf{30, 10, 20, nan};
    const double want = q == 1.0 ? 30.0 : q == 0.0 ? 10.0 : 10.0 + 2 * q * 10.0;
    EXPECT_DOUBLE_EQ(percentile_select(std::span<double>(buf.data(), 3), q), want) << "q " << q;
    std::vector<double> sorted{10, 20, 30, nan};
    EXPECT_DOUBLE_EQ(percentile_sorted(std::span<const double>(sorted.data(), 3), q), want) << "q " << q;
    std::vector<double> one{7, nan};
    EXPECT_DOUBLE_EQ(percentile_select(std::span<double>(one.data(), 1), q), 7.0) << "q " << q;
    EXPECT_DOUBLE_EQ(percentile_sorted(std::span<const double>(one.data(), 1), q), 7.0) << "q " << q;
  }
}

RC_GTEST_PROP(StatsPercentile, SelectionAgreesWithSorting, (std::vector<int> ints)) {
  RC_PRE(!ints.empty());
  const double q = *rc::gen::inRange(0, 1001) / 1000.0;
  std::vector<double> v(ints.begin(), ints.end());
  const double sorted = percentile(v, q);
  RC_ASSERT(percentile_select(v, q) == sorted);
}

}  // namespace
}  // namespace pav::stats
