// SPDX-License-Identifier: Apache-2.0
#pragma once
// The paired growth test of the drift sweep (docs/drift.md): does an error
// measure grow from the lowest to the highest split ceiling, beyond its spread
// over fresh data seeds?
//
// For seeds r = 1..n the same data is run at both ceilings, giving low_r and
// high_r; the paired differences d_r = high_r - low_r carry the evidence (the
// data's own variation cancels in each pair). Growth is declared when all of
//   1. mean(d) > 0,
//   2. a one-sided paired test rejects "no growth" at level alpha: either the
//      paired t test (t = mean(d) / (sd(d)/sqrt(n)), p = P(T_{n-1} >= t)) or
//      the exact sign test (p = P(Bin(n+ + n-, 1/2) >= n+), ties dropped) gives
//      p < alpha/2 (Bonferroni over the two, so the level stays <= alpha),
//   3. the growth is of practical size: mean(d) / mean(low) > min_relative_growth.
// Two tests because the differences come in two shapes: near-normal (t is the
// more powerful) and all-positive but heavy-tailed, where one seed's large
// difference inflates sd(d) and hides a consistent sign from t (the sign test
// sees it: 8 of 8 positive gives p = 1/256 < 0.005).
//
// Degenerate cases: sd(d) == 0 gives t = +inf (p = 0) when mean(d) > 0, p = 1
// otherwise; fewer than two pairs give p = 1 (no evidence).
#include <boost/math/distributions/binomial.hpp>
#include <boost/math/distributions/students_t.hpp>
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>

namespace pav::stats {

struct GrowthOptions {
  double alpha = 0.01;                // one-sided level of the growth test (each of t and sign at alpha/2)
  double min_relative_growth = 0.10;  // practical threshold on mean(d) / mean(low)
};

struct GrowthTest {
  std::int64_t pairs = 0;
  double mean_low = 0.0, mean_high = 0.0;
  double mean_diff = 0.0;        // mean of d_r = high_r - low_r
  double sd_diff = 0.0;          // sample standard deviation of d (n - 1)
  double relative_growth = 0.0;  // mean_diff / mean_low; +inf when mean_low == 0 < mean_diff
  double t = 0.0;
  double t_p = 1.0;              // one-sided upper tail of Student's t with n - 1 df
  std::int64_t positive = 0, negative = 0, ties = 0;
  double sign_p = 1.0;           // one-sided exact sign test
  bool significant = false;      // min(t_p, sign_p) < alpha / 2
  bool growth = false;           // the three conditions above
  std::string verdict;           // one line: "growth: ..." or "no growth: <reason>"
};

// Header-only, so that any library (pav_props' drift runner among them) can use
// the test without a link dependency on pav_stats.

// P(T_df >= t) for Student's t, from the complement (keeps small tails); df >= 1.
inline double student_t_upper_tail(double t, double df) {
  if (!(df >= 1.0)) throw std::invalid_argument("student_t_upper_tail: df must be >= 1");
  if (std::isnan(t)) throw std::invalid_argument("student_t_upper_tail: t is NaN");
  if (t == std::numeric_limits<double>::infinity()) return 0.0;
  if (t == -std::numeric_limits<double>::infinity()) return 1.0;
  const boost::math::students_t_distribution<double> dist(df);
  return boost::math::cdf(boost::math::complement(dist, t));
}

// P(X >= k) for X ~ Bin(n, 1/2); 1 for k <= 0.
inline double binomial_half_upper_tail(std::int64_t k, std::int64_t n) {
  if (n < 0) throw std::invalid_argument("binomial_half_upper_tail: n must be >= 0");
  if (k <= 0) return 1.0;
  if (k > n) return 0.0;
  const boost::math::binomial_distribution<double> binom(static_cast<double>(n), 0.5);
  // P(X >= k) = P(X > k - 1), from the complement of the cdf.
  return boost::math::cdf(boost::math::complement(binom, static_cast<double>(k - 1)));
}

// Throws std::invalid_argument when the spans differ in length, are empty, or
// hold a non-finite value, or when the options are out of range
// (alpha in (0, 1), min_relative_growth >= 0).
inline GrowthTest paired_growth(std::span<const double> low, std::span<const double> high,
                                const GrowthOptions& o = {}) {
  if (low.size() != high.size())
    throw std::invalid_argument(fmt::format("paired_growth: {} low values but {} high values", low.size(), high.size()));
  if (low.empty()) throw std::invalid_argument("paired_growth: no pairs");
  if (!(o.alpha > 0.0 && o.alpha < 1.0)) throw std::invalid_argument("paired_growth: alpha must be in (0, 1)");
  if (!(o.min_relative_growth >= 0.0)) throw std::invalid_argument("paired_growth: min_relative_growth must be >= 0");
  for (std::size_t i = 0; i < low.size(); ++i)
    if (!std::isfinite(low[i]) || !std::isfinite(high[i]))
      throw std::invalid_argument(fmt::format("paired_growth: pair {} is not finite", i));

  GrowthTest g;
  const auto n = static_cast<std::int64_t>(low.size());
  g.pairs = n;
  double sl = 0.0, sh = 0.0, sd = 0.0;
  for (std::size_t i = 0; i < low.size(); ++i) {
    const double d = high[i] - low[i];
    sl += low[i];
    sh += high[i];
    sd += d;
    if (d > 0.0) ++g.positive;
    else if (d < 0.0) ++g.negative;
    else ++g.ties;
  }
  g.mean_low = sl / double(n);
  g.mean_high = sh / double(n);
  g.mean_diff = sd / double(n);
  double ss = 0.0;
  for (std::size_t i = 0; i < low.size(); ++i) {
    const double e = (high[i] - low[i]) - g.mean_diff;
    ss += e * e;
  }
  g.sd_diff = n > 1 ? std::sqrt(ss / double(n - 1)) : 0.0;
  if (g.mean_low > 0.0) g.relative_growth = g.mean_diff / g.mean_low;
  else g.relative_growth = g.mean_diff > 0.0 ? std::numeric_limits<double>::infinity() : 0.0;

  if (n > 1) {
    if (g.sd_diff > 0.0) {
      g.t = g.mean_diff / (g.sd_diff / std::sqrt(double(n)));
      g.t_p = student_t_upper_tail(g.t, double(n - 1));
    } else if (g.mean_diff > 0.0) {
      g.t = std::numeric_limits<double>::infinity();
      g.t_p = 0.0;
    }
  }
  g.sign_p = binomial_half_upper_tail(g.positive, g.positive + g.negative);
  g.significant = std::min(g.t_p, g.sign_p) < o.alpha / 2.0;
  g.growth = g.mean_diff > 0.0 && g.significant && g.relative_growth > o.min_relative_growth;

  const std::string figures = fmt::format("{:+.1f}% (mean d {:+.3g}, t p {:.2g}, sign p {:.2g}, {} seeds)",
                                          100.0 * g.relative_growth, g.mean_diff, g.t_p, g.sign_p, n);
  if (g.growth) g.verdict = "growth: " + figures;
  else if (g.positive == 0 && g.negative == 0) g.verdict = fmt::format("no growth: identical errors at both ceilings ({} seeds)", n);
  else if (n < 2) g.verdict = "no growth: fewer than 2 seeds, no evidence " + figures;
  else if (!(g.mean_diff > 0.0)) g.verdict = "no growth: mean difference <= 0, " + figures;
  else if (!g.significant) g.verdict = fmt::format("no growth: not significant at alpha {} (t and sign p >= {}), ", o.alpha, o.alpha / 2.0) + figures;
  else g.verdict = fmt::format("no growth: significant but below the {:.0f}% practical threshold, ",
                               100.0 * o.min_relative_growth) + figures;
  return g;
}

}  // namespace pav::stats
