// SPDX-License-Identifier: Apache-2.0
#include "stats/percentile.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace pav::stats {

namespace {

void check_q(double q) {
  if (!(q >= 0.0 && q <= 1.0)) throw std::invalid_argument("percentile: q must lie in [0, 1]");
}

}  // namespace

double percentile_sorted(std::span<const double> sorted, double q) {
  check_q(q);
  if (sorted.empty()) return std::numeric_limits<double>::quiet_NaN();
  const double h = static_cast<double>(sorted.size() - 1) * q;
  const auto lo = static_cast<std::size_t>(std::floor(h));
  if (lo + 1 >= sorted.size()) return sorted[lo];
  return sorted[lo] + (h - static_cast<double>(lo)) * (sorted[lo + 1] - sorted[lo]);
}

double percentile_select(std::span<double> values, double q) {
  check_q(q);
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  const double h = static_cast<double>(values.size() - 1) * q;
  const auto lo = static_cast<std::size_t>(std::floor(h));
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(lo), values.end());
  const double x_lo = values[lo];
  if (lo + 1 >= values.size()) return x_lo;
  // After nth_element everything right of lo is >= x_lo, so its minimum is x[lo + 1].
  const double x_hi = *std::min_element(values.begin() + static_cast<std::ptrdiff_t>(lo) + 1, values.end());
  return x_lo + (h - static_cast<double>(lo)) * (x_hi - x_lo);
}

double percentile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  return percentile_sorted(values, q);
}

}  // namespace pav::stats
