// SPDX-License-Identifier: Apache-2.0
#include "stats/drift.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <stdexcept>
#include <vector>

namespace pav::stats {
namespace {

std::vector<double> plus(const std::vector<double>& a, const std::vector<double>& d) {
  std::vector<double> r(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) r[i] = a[i] + d[i];
  return r;
}

const std::vector<double> kLow8 = {1.00, 1.01, 0.99, 1.02, 0.98, 1.00, 1.01, 0.99};  // mean 1.0

// Differences mean m with deviations alternating +s, -s (n = 8): sd = s*sqrt(8/7),
// so t = m*sqrt(8)/(s*sqrt(8/7)) = m*sqrt(7)/s.
std::vector<double> alternating(double m, double s) {
  std::vector<double> d(8);
  for (int i = 0; i < 8; ++i) d[i] = m + (i % 2 ? -s : s);
  return d;
}

TEST(DriftStats, StudentTailMatchesClosedForms) {
  // df 1 (Cauchy): P(T >= t) = 1/2 - atan(t)/pi; df 2: 1/2 - t/(2 sqrt(2 + t^2)).
  for (double t : {-3.0, -0.5, 0.0, 0.7, 2.0, 12.0}) {
    EXPECT_NEAR(student_t_upper_tail(t, 1), 0.5 - std::atan(t) / std::numbers::pi, 1e-12) << t;
    EXPECT_NEAR(student_t_upper_tail(t, 2), 0.5 - t / (2.0 * std::sqrt(2.0 + t * t)), 1e-12) << t;
  }
}

TEST(DriftStats, StudentTailMatchesTableCriticalValues) {
  // One-sided critical values of Student's t (standard tables): df 7 at 0.01
  // is 2.997952, at 0.05 is 1.894579; df 5 at 0.01 is 3.364930.
  EXPECT_NEAR(student_t_upper_tail(2.997952, 7), 0.01, 1e-7);
  EXPECT_NEAR(student_t_upper_tail(1.894579, 7), 0.05, 1e-7);
  EXPECT_NEAR(student_t_upper_tail(3.364930, 5), 0.01, 1e-7);
  // Small tails keep their precision (complement, not 1 - cdf).
  EXPECT_GT(student_t_upper_tail(60.0, 7), 0.0);
  EXPECT_LT(student_t_upper_tail(60.0, 7), 1e-9);
  EXPECT_EQ(student_t_upper_tail(INFINITY, 7), 0.0);
  EXPECT_THROW(student_t_upper_tail(1.0, 0.5), std::invalid_argument);
}

TEST(DriftStats, SignTailIsTheExactBinomial) {
  EXPECT_DOUBLE_EQ(binomial_half_upper_tail(8, 8), 1.0 / 256.0);
  EXPECT_DOUBLE_EQ(binomial_half_upper_tail(7, 8), 9.0 / 256.0);
  EXPECT_NEAR(binomial_half_upper_tail(5, 10), 638.0 / 1024.0, 1e-15);
  EXPECT_EQ(binomial_half_upper_tail(0, 8), 1.0);
  EXPECT_EQ(binomial_half_upper_tail(0, 0), 1.0);
  EXPECT_EQ(binomial_half_upper_tail(9, 8), 0.0);
}

TEST(DriftStats, ConsistentLargeGrowthIsGrowth) {
  const std::vector<double> d = {0.20, 0.21, 0.19, 0.22, 0.18, 0.20, 0.21, 0.19};
  const GrowthTest g = paired_growth(kLow8, plus(kLow8, d));
  EXPECT_EQ(g.pairs, 8);
  EXPECT_NEAR(g.mean_low, 1.0, 1e-12);
  EXPECT_NEAR(g.mean_diff, 0.2, 1e-12);
  // Deviations 0, .01, -.01, .02, -.02, 0, .01, -.01: sum of squares 0.0012.
  EXPECT_NEAR(g.sd_diff, std::sqrt(0.0012 / 7.0), 1e-12);
  EXPECT_NEAR(g.t, 0.2 / (std::sqrt(0.0012 / 7.0) / std::sqrt(8.0)), 1e-9);
  EXPECT_NEAR(g.relative_growth, 0.2, 1e-12);
  EXPECT_EQ(g.positive, 8);
  EXPECT_DOUBLE_EQ(g.sign_p, 1.0 / 256.0);
  EXPECT_TRUE(g.significant);
  EXPECT_TRUE(g.growth) << g.verdict;
  EXPECT_EQ(g.verdict.rfind("growth:", 0), 0u) << g.verdict;
}

TEST(DriftStats, HigherMeanWithInconsistentDifferencesIsNoGrowth) {
  // The high arm's mean is 20% above the low arm's, but the paired differences
  // swing +0.5 / -0.3 from seed to seed: t = 0.1*sqrt(7)/0.4 = 0.66, p ~ 0.27.
  const std::vector<double> low(8, 0.5);
  const GrowthTest g = paired_growth(low, plus(low, alternating(0.1, 0.4)));
  EXPECT_NEAR(g.relative_growth, 0.2, 1e-12);
  EXPECT_NEAR(g.t, 0.1 * std::sqrt(7.0) / 0.4, 1e-9);
  EXPECT_GT(g.t_p, 0.2);
  EXPECT_FALSE(g.significant);
  EXPECT_FALSE(g.growth) << g.verdict;
  EXPECT_NE(g.verdict.find("not significant"), std::string::npos) << g.verdict;
}

// Seven differences x and one y < 0: mean (7x + y)/8, sd (x - y)/sqrt(8), so
// t = (7x + y)/(x - y); the sign test sees 7 of 8 positive (p = 9/256 = 0.035).
std::vector<double> seven_and_one(double x, double y) {
  std::vector<double> d(8, x);
  d[7] = y;
  return d;
}

TEST(DriftStats, VerdictFollowsTheTCriticalValueAtHalfAlpha) {
  // alpha 0.01 gives each test 0.005; for df 7 the one-sided 0.005 critical
  // value of t is 3.499483. x = 0.2, y = -0.7391x gives t = 3.6; y = -0.8182x gives 3.4.
  const GrowthTest above = paired_growth(kLow8, plus(kLow8, seven_and_one(0.2, -0.2 * 3.4 / 4.6)));
  EXPECT_NEAR(above.t, 3.6, 1e-9);
  EXPECT_DOUBLE_EQ(above.sign_p, 9.0 / 256.0);
  EXPECT_LT(above.t_p, 0.005);
  EXPECT_GT(above.t_p, 0.0025);  // t_{0.0025, 7} = 4.029
  EXPECT_TRUE(above.significant);
  EXPECT_TRUE(above.growth) << above.verdict;
  const GrowthTest below = paired_growth(kLow8, plus(kLow8, seven_and_one(0.2, -0.2 * 3.6 / 4.4)));
  EXPECT_NEAR(below.t, 3.4, 1e-9);
  EXPECT_GT(below.t_p, 0.005);
  EXPECT_LT(below.t_p, 0.01);  // t_{0.01, 7} = 2.998
  EXPECT_FALSE(below.significant);
  EXPECT_FALSE(below.growth) << below.verdict;
  // At alpha 0.02 (0.01 per test) the same data is growth.
  EXPECT_TRUE(paired_growth(kLow8, plus(kLow8, seven_and_one(0.2, -0.2 * 3.6 / 4.4)), {.alpha = 0.02}).growth);
}

TEST(DriftStats, ConsistentSignWithOneLargeDifferenceIsGrowthThroughTheSignTest) {
  // All eight differences positive, one of them huge: sd(d) hides the sign from
  // t (t = 1.04, p ~ 0.17) but the sign test gives 1/256 < 0.005.
  const std::vector<double> d = {0.01, 0.01, 0.01, 0.01, 0.01, 0.01, 0.01, 2.0};
  const GrowthTest g = paired_growth(kLow8, plus(kLow8, d));
  EXPECT_GT(g.t_p, 0.1);
  EXPECT_DOUBLE_EQ(g.sign_p, 1.0 / 256.0);
  EXPECT_TRUE(g.significant);
  EXPECT_TRUE(g.growth) << g.verdict;
  // Seven of eight positive is not enough for the sign test (9/256 > 0.005).
  std::vector<double> d7 = d;
  d7[0] = -0.01;
  EXPECT_FALSE(paired_growth(kLow8, plus(kLow8, d7)).growth);
}

TEST(DriftStats, SignificantButSmallGrowthIsBelowThePracticalThreshold) {
  const std::vector<double> d = {0.010, 0.011, 0.009, 0.010, 0.011, 0.009, 0.010, 0.010};
  const GrowthTest g = paired_growth(kLow8, plus(kLow8, d));
  EXPECT_TRUE(g.significant);
  EXPECT_NEAR(g.relative_growth, 0.01, 1e-12);
  EXPECT_FALSE(g.growth) << g.verdict;
  EXPECT_NE(g.verdict.find("practical threshold"), std::string::npos) << g.verdict;
  // With a 0.5% threshold the same differences are growth.
  EXPECT_TRUE(paired_growth(kLow8, plus(kLow8, d), {.min_relative_growth = 0.005}).growth);
}

TEST(DriftStats, DecreaseAndIdenticalAreNoGrowth) {
  const std::vector<double> d = {-0.20, -0.21, -0.19, -0.22, -0.18, -0.20, -0.21, -0.19};
  const GrowthTest dec = paired_growth(kLow8, plus(kLow8, d));
  EXPECT_LT(dec.mean_diff, 0.0);
  EXPECT_GT(dec.t_p, 0.99);
  EXPECT_FALSE(dec.growth);
  EXPECT_EQ(dec.negative, 8);
  EXPECT_EQ(dec.sign_p, 1.0);

  const GrowthTest same = paired_growth(kLow8, kLow8);
  EXPECT_EQ(same.ties, 8);
  EXPECT_EQ(same.t_p, 1.0);
  EXPECT_FALSE(same.growth);
  EXPECT_NE(same.verdict.find("identical"), std::string::npos) << same.verdict;
}

TEST(DriftStats, ConstantPositiveDifferenceIsGrowthWithZeroSpread) {
  const std::vector<double> low = {1, 2, 3};
  const std::vector<double> high = {1.5, 2.5, 3.5};
  const GrowthTest g = paired_growth(low, high);
  EXPECT_EQ(g.sd_diff, 0.0);
  EXPECT_EQ(g.t_p, 0.0);
  EXPECT_TRUE(g.growth);
}

TEST(DriftStats, OnePairIsNoEvidence) {
  const GrowthTest g = paired_growth(std::vector<double>{1.0}, std::vector<double>{2.0});
  EXPECT_EQ(g.t_p, 1.0);
  EXPECT_FALSE(g.growth);
}

TEST(DriftStats, BadInputThrows) {
  const std::vector<double> a = {1, 2}, b = {1};
  EXPECT_THROW(paired_growth(a, b), std::invalid_argument);
  EXPECT_THROW(paired_growth(std::vector<double>{}, std::vector<double>{}), std::invalid_argument);
  EXPECT_THROW(paired_growth(std::vector<double>{1, NAN}, std::vector<double>{1, 2}), std::invalid_argument);
  EXPECT_THROW(paired_growth(a, a, {.alpha = 0.0}), std::invalid_argument);
  EXPECT_THROW(paired_growth(a, a, {.min_relative_growth = -1}), std::invalid_argument);
}

}  // namespace
}  // namespace pav::stats
