// SPDX-License-Identifier: Apache-2.0
#pragma once
// Confidence intervals for a binomial proportion.
#include "stats/interval.hpp"

#include <cstdint>

namespace pav::stats {

inline constexpr double kDefaultConfidence = 0.95;

// z such that P(-z <= Z <= z) = confidence for a standard normal Z (Boost's
// normal quantile). Throws std::invalid_argument unless 0 < confidence < 1.
double two_sided_z(double confidence);

// Wilson score interval for k successes in n trials: the set of p with
// (k/n - p)^2 <= z^2 p (1 - p) / n. n == 0 gives [0, 1]. Throws
// std::invalid_argument unless 0 <= k <= n.
Interval wilson_interval(std::int64_t k, std::int64_t n, double confidence = kDefaultConfidence);

}  // namespace pav::stats
