// SPDX-License-Identifier: Apache-2.0
#include "stats/mcnemar.hpp"

#include <boost/math/distributions/binomial.hpp>
#include <boost/math/distributions/chi_squared.hpp>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <stdexcept>

namespace pav::stats {

double chi2_1_upper_tail(double x) {
  if (!(x > 0.0)) return 1.0;
  const boost::math::chi_squared_distribution<double> dist(1.0);
  return boost::math::cdf(boost::math::complement(dist, x));
}

McNemar mcnemar(std::int64_t b, std::int64_t c) {
  if (b < 0 || c < 0) throw std::invalid_argument("mcnemar: counts must be non-negative");
  // n = b + c must be a count too: refused before the sum, never wrapped.
  if (b > std::numeric_limits<std::int64_t>::max() - c)
    throw std::invalid_argument("mcnemar: b + c overflows a 64-bit count");
  McNemar r;
  r.b = b;
  r.c = c;
  r.n = b + c;
  if (r.n == 0) return r;

  const auto k = static_cast<double>(std::min(b, c));
  const boost::math::binomial_distribution<double> binom(static_cast<double>(r.n), 0.5);
  const double cdf = boost::math::cdf(binom, k);
  const double pmf = boost::math::pdf(binom, k);
  r.exact_p = std::min(1.0, 2.0 * cdf);
  r.mid_p = std::clamp(2.0 * cdf - pmf, 0.0, 1.0);

  // long double keeps (b - c)^2 exact for |b - c| beyond 2^26.
  const long double diff = static_cast<long double>(b > c ? b - c : c - b);
  const long double n = static_cast<long double>(r.n);
  const long double corrected = b == c ? 0.0L : diff - 1.0L;
  r.chi2 = static_cast<double>(diff * diff / n);
  r.chi2_cc = static_cast<double>(corrected * corrected / n);
  r.chi2_p = chi2_1_upper_tail(r.chi2);
  r.chi2_cc_p = chi2_1_upper_tail(r.chi2_cc);
  return r;
}

}  // namespace pav::stats
