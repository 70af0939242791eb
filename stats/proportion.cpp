// SPDX-License-Identifier: Apache-2.0
#include "stats/proportion.hpp"

#include <boost/math/distributions/normal.hpp>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace pav::stats {

double two_sided_z(double confidence) {
  if (!(confidence > 0.0 && confidence < 1.0))
    throw std::invalid_argument("confidence must lie strictly between 0 and 1");
  const boost::math::normal_distribution<double> normal;
  return boost::math::quantile(normal, 0.5 + confidence / 2.0);
}

Interval wilson_interval(std::int64_t k, std::int64_t n, double confidence) {
  if (k < 0 || n < 0 || k > n) throw std::invalid_argument("wilson_interval: need 0 <= k <= n");
  const double z = two_sided_z(confidence);
  if (n == 0) return {0.0, 1.0};
  const double nn = static_cast<double>(n);
  const double p = static_cast<double>(k) / nn;
  const double z2n = z * z / nn;
  const double denom = 1.0 + z2n;
  const double centre = (p + z2n / 2.0) / denom;
  const double half = z / denom * std::sqrt(p * (1.0 - p) / nn + z2n / (4.0 * nn));
  // At k == 0 or k == n one end is exactly 0 or 1; the clamp removes rounding.
  Interval ci{std::max(0.0, centre - half), std::min(1.0, centre + half)};
  if (k == 0) ci.lo = 0.0;
  if (k == n) ci.hi = 1.0;
  return ci;
}

}  // namespace pav::stats
