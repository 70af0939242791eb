// SPDX-License-Identifier: Apache-2.0
#include "stats/mcnemar.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <limits>
#include <cstdint>
#include <vector>

namespace pav::stats {
namespace {

void expect_rel(double got, double want, double rel) {
  EXPECT_NEAR(got, want, rel * std::abs(want)) << "want " << want;
}

// Exact binomial tails for small n by integer enumeration (Pascal's triangle),
// independent of Boost: returns {P(X <= k), P(X = k)} for X ~ Bin(n, 1/2).
struct Tail {
  long double cdf;
  long double pmf;
};
Tail enumerate_tail(int n, int k) {
  std::vector<std::uint64_t> row{1};
  for (int i = 1; i <= n; ++i) {
    std::vector<std::uint64_t> next(i + 1, 1);
    for (int j = 1; j < i; ++j) next[j] = row[j - 1] + row[j];
    row = std::move(next);
  }
  std::uint64_t sum = 0;
  for (int i = 0; i <= k; ++i) sum += row[i];
  const long double total = std::ldexp(1.0L, n);
  return {sum / total, row[k] / total};
}

// P(X <= k) for X ~ Bin(n, 1/2) summed in log space with lgammal, from k down
// until the terms stop mattering. Independent of Boost; good to ~1e-10 at n = 1e7.
long double log_space_cdf(std::int64_t n, std::int64_t k) {
  const long double log_norm = lgammal(n + 1.0L) - n * std::log(2.0L);
  long double sum = 0;
  for (std::int64_t i = k; i >= 0; --i) {
    const long double term = std::exp(log_norm - lgammal(i + 1.0L) - lgammal(n - i + 1.0L));
    sum += term;
    if (term < sum * 1e-19L) break;
  }
  return sum;
}

TEST(StatsMcnemar, ReferenceCrossCheckStrongEffect) {
  const auto r = mcnemar(121, 59);
  EXPECT_EQ(r.n, 180);
  expect_rel(r.exact_p, 4.434449e-06, 1e-6);
  expect_rel(r.mid_p, 3.266647e-06, 1e-6);
  expect_rel(r.chi2_cc_p, 5.450095e-06, 1e-6);
  expect_rel(r.chi2_p, 3.815136e-06, 1e-6);
  // (|121 - 59| - 1)^2 / 180 = 61^2 / 180 = 3721 / 180; 62^2 / 180 = 3844 / 180.
  expect_rel(r.chi2_cc, 3721.0 / 180.0, 1e-14);
  expect_rel(r.chi2, 3844.0 / 180.0, 1e-14);
}

TEST(StatsMcnemar, ReferenceCrossCheckNoEffect) {
  const auto r = mcnemar(15, 19);
  expect_rel(r.exact_p, 0.6075914, 1e-6);
  expect_rel(r.mid_p, 0.4995598, 1e-6);
  expect_rel(r.chi2_cc_p, 0.6069054, 1e-6);
  expect_rel(r.chi2_p, 0.4927167, 1e-6);
  // (4 - 1)^2 / 34 and 4^2 / 34.
  expect_rel(r.chi2_cc, 9.0 / 34.0, 1e-14);
  expect_rel(r.chi2, 16.0 / 34.0, 1e-14);
}

TEST(StatsMcnemar, HandComputedSmallTable) {
  // b = 6, c = 2: C(8,0) + C(8,1) + C(8,2) = 37, so exact p = 2 * 37 / 256 and
  // mid-p = (74 - 28) / 256.
  const auto r = mcnemar(6, 2);
  EXPECT_DOUBLE_EQ(r.exact_p, 74.0 / 256.0);
  EXPECT_DOUBLE_EQ(r.mid_p, 46.0 / 256.0);
  EXPECT_DOUBLE_EQ(r.chi2_cc, 9.0 / 8.0);
  EXPECT_DOUBLE_EQ(r.chi2, 2.0);
}

TEST(StatsMcnemar, MatchesIntegerEnumerationForSmallN) {
  for (int n = 1; n <= 60; ++n) {
    for (int b = 0; b <= n; ++b) {
      const int c = n - b;
      const auto tail = enumerate_tail(n, std::min(b, c));
      const auto r = mcnemar(b, c);
      const double exact = static_cast<double>(std::min(1.0L, 2 * tail.cdf));
      const double mid = static_cast<double>(std::min(1.0L, 2 * tail.cdf - tail.pmf));
      ASSERT_NEAR(r.exact_p, exact, 1e-12 * exact) << "b=" << b << " c=" << c;
      ASSERT_NEAR(r.mid_p, mid, 1e-12 * mid) << "b=" << b << " c=" << c;
    }
  }
}

TEST(StatsMcnemar, ChiSquareTailMatchesErfcIncludingTinyTails) {
  // Upper tail of chi2(1) at x is erfc(sqrt(x / 2)); the big-x cases have
  // p far below 1e-16, where 1 - cdf would give 0.
  const std::vector<std::pair<std::int64_t, std::int64_t>> cases{
      {1, 0}, {3, 1}, {10, 2}, {121, 59}, {400, 0}, {700, 3}, {0, 1200}};
  for (const auto& [b, c] : cases) {
    const auto r = mcnemar(b, c);
    const double d = static_cast<double>(std::llabs(b - c));
    const double n = static_cast<double>(b + c);
    const double want = std::erfc(std::sqrt(d * d / n / 2.0));
    const double want_cc = std::erfc(std::sqrt((d - 1) * (d - 1) / n / 2.0));
    ASSERT_GT(want, 0.0);
    EXPECT_NEAR(r.chi2_p, want, 1e-10 * want) << "b=" << b << " c=" << c;
    EXPECT_NEAR(r.chi2_cc_p, want_cc, 1e-10 * want_cc) << "b=" << b << " c=" << c;
  }
  EXPECT_DOUBLE_EQ(chi2_1_upper_tail(0.0), 1.0);
  EXPECT_DOUBLE_EQ(chi2_1_upper_tail(-1.0), 1.0);
}

TEST(StatsMcnemar, NoDiscordantPairsGivesPOne) {
  const auto r = mcnemar(0, 0);
  EXPECT_EQ(r.n, 0);
  EXPECT_EQ(r.exact_p, 1.0);
  EXPECT_EQ(r.mid_p, 1.0);
  EXPECT_EQ(r.chi2_cc_p, 1.0);
  EXPECT_EQ(r.chi2_p, 1.0);
  EXPECT_EQ(r.chi2_cc, 0.0);
  EXPECT_EQ(r.chi2, 0.0);
}

TEST(StatsMcnemar, EqualCountsDropTheContinuityCorrection) {
  // Convention (R): b == c gives chi2_cc = 0 and p = 1; statsmodels would give 1/n.
  for (const std::int64_t k : {1, 5, 37, 1000000}) {
    const auto r = mcnemar(k, k);
    EXPECT_EQ(r.chi2_cc, 0.0) << k;
    EXPECT_EQ(r.chi2_cc_p, 1.0) << k;
    EXPECT_EQ(r.chi2, 0.0) << k;
    EXPECT_EQ(r.exact_p, 1.0) << k;
    EXPECT_NEAR(r.mid_p, 1.0, 1e-12) << k;
  }
  // |b - c| = 1: the corrected statistic is (1 - 1)^2 / n = 0 either way.
  EXPECT_EQ(mcnemar(4, 5).chi2_cc, 0.0);
  EXPECT_EQ(mcnemar(4, 5).chi2_cc_p, 1.0);
}

TEST(StatsMcnemar, RejectsNegativeCounts) {
  EXPECT_THROW(mcnemar(-1, 3), std::invalid_argument);
  EXPECT_THROW(mcnemar(3, -1), std::invalid_argument);
}

// b + c must be a count: at the 64-bit limit it is taken, one past it refused
// (never wrapped into a negative n).
TEST(StatsMcnemar, RefusesCountsWhoseSumOverflows) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  EXPECT_EQ(mcnemar(kMax - 1, 1).n, kMax);
  EXPECT_EQ(mcnemar(0, kMax).n, kMax);
  EXPECT_THROW(mcnemar(kMax, 1), std::invalid_argument);
  EXPECT_THROW(mcnemar(1, kMax), std::invalid_argument);
  EXPECT_THROW(mcnemar(kMax, kMax), std::invalid_argument);
}

TEST(StatsMcnemar, TenMillionDiscordantMatchesLogSpaceSum) {
  for (const std::int64_t n : {10000000LL, 9999999LL}) {
    for (const std::int64_t d : {1LL, 2LL, 3000LL, 6000LL, 12000LL, 18000LL}) {
      const std::int64_t diff = (d % 2 == n % 2) ? d : d + 1;  // b - c has n's parity
      const std::int64_t c = (n - diff) / 2;
      const std::int64_t b = n - c;
      const auto r = mcnemar(b, c);
      const long double cdf = log_space_cdf(n, c);
      const long double pmf = std::exp(lgammal(n + 1.0L) - lgammal(c + 1.0L) - lgammal(n - c + 1.0L) -
                                       n * std::log(2.0L));
      const double exact = static_cast<double>(std::min(1.0L, 2 * cdf));
      const double mid = static_cast<double>(2 * cdf - pmf);
      EXPECT_NEAR(r.exact_p, exact, 1e-8 * exact) << "n=" << n << " b=" << b;
      EXPECT_NEAR(r.mid_p, mid, 1e-8 * mid) << "n=" << n << " b=" << b;
      // Normal approximation of the symmetric binomial: error O(1/n).
      const double normal = std::erfc((diff - 1.0) / std::sqrt(2.0 * static_cast<double>(n)));
      EXPECT_NEAR(r.exact_p, std::min(1.0, normal), 1e-4 * normal) << "n=" << n << " b=" << b;
      const double normal_mid = std::erfc(diff / std::sqrt(2.0 * static_cast<double>(n)));
      EXPECT_NEAR(r.mid_p, normal_mid, 1e-4 * normal_mid) << "n=" << n << " b=" << b;
      EXPECT_NEAR(r.chi2, static_cast<double>(diff) * diff / n, 1e-12 * r.chi2 + 1e-300);
    }
  }
}

TEST(StatsMcnemar, TenMillionOneSidedUnderflowsCleanly) {
  const auto r = mcnemar(10000000, 0);
  EXPECT_EQ(r.exact_p, 0.0);  // 2^-9999999 is below the smallest double
  EXPECT_EQ(r.mid_p, 0.0);
  EXPECT_EQ(r.chi2_p, 0.0);
  EXPECT_FALSE(std::isnan(r.chi2_cc_p));
  EXPECT_DOUBLE_EQ(r.chi2, 1e7);
  const auto balanced = mcnemar(5000000, 5000000);
  EXPECT_EQ(balanced.exact_p, 1.0);
  EXPECT_NEAR(balanced.mid_p, 1.0, 1e-12);
}

RC_GTEST_PROP(StatsMcnemar, SwappingBAndCGivesEqualP, ()) {
  const auto b = *rc::gen::inRange<std::int64_t>(0, 50000);
  const auto c = *rc::gen::inRange<std::int64_t>(0, 50000);
  const auto x = mcnemar(b, c);
  const auto y = mcnemar(c, b);
  RC_ASSERT(x.exact_p == y.exact_p);
  RC_ASSERT(x.mid_p == y.mid_p);
  RC_ASSERT(x.chi2_cc_p == y.chi2_cc_p);
  RC_ASSERT(x.chi2_p == y.chi2_p);
}

RC_GTEST_PROP(StatsMcnemar, PValuesAreOrderedAndInUnitInterval, ()) {
  const auto b = *rc::gen::inRange<std::int64_t>(0, 50000);
  const auto c = *rc::gen::inRange<std::int64_t>(0, 50000);
  const auto r = mcnemar(b, c);
  for (const double p : {r.exact_p, r.mid_p, r.chi2_cc_p, r.chi2_p}) RC_ASSERT(p >= 0.0 && p <= 1.0);
  RC_ASSERT(r.mid_p <= r.exact_p);
  RC_ASSERT(r.chi2_p <= r.chi2_cc_p);
  RC_ASSERT(r.chi2_cc <= r.chi2);
}

RC_GTEST_PROP(StatsMcnemar, PNonIncreasingAsImbalanceGrowsAtFixedN, ()) {
  const auto n = *rc::gen::inRange<std::int64_t>(1, 20000);
  const auto c1 = *rc::gen::inRange<std::int64_t>(0, n / 2 + 1);
  const auto c2 = *rc::gen::inRange<std::int64_t>(0, c1 + 1);  // c2 <= c1 <= n/2: |b - c| grows
  const auto near = mcnemar(n - c1, c1);
  const auto far = mcnemar(n - c2, c2);
  RC_ASSERT(far.exact_p <= near.exact_p);
  RC_ASSERT(far.mid_p <= near.mid_p);
  RC_ASSERT(far.chi2_cc_p <= near.chi2_cc_p);
  RC_ASSERT(far.chi2_p <= near.chi2_p);
}

RC_GTEST_PROP(StatsMcnemar, MoreAgreementOnOneSideLowersP, ()) {
  // Adding a discordant pair on the side that already leads cannot raise p.
  const auto c = *rc::gen::inRange<std::int64_t>(0, 3000);
  const auto b = c + *rc::gen::inRange<std::int64_t>(0, 3000);
  RC_ASSERT(mcnemar(b + 1, c).exact_p <= mcnemar(b, c).exact_p);
  RC_ASSERT(mcnemar(b + 1, c).chi2_p <= mcnemar(b, c).chi2_p);
}

}  // namespace
}  // namespace pav::stats
