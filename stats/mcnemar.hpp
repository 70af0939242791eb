// SPDX-License-Identifier: Apache-2.0
#pragma once
// McNemar's test on paired binary outcomes of two variants A and B.
//
// b = items A got right and B got wrong, c = the reverse; only these discordant
// counts carry evidence. With n = b + c and k = min(b, c):
//   exact_p   = min(1, 2 * BinomCDF(k; n, 1/2))            two-sided exact test
//   mid_p     = clamp(2 * BinomCDF(k) - BinomPMF(k), 0, 1)  mid-p variant
//   chi2_cc   = (|b - c| - 1)^2 / n, chi2 = (b - c)^2 / n, p from the upper tail of chi2(1)
// n == 0 gives every statistic 0 and every p 1.
//
// Convention for b == c: the continuity correction is dropped (as R's
// mcnemar.test does), so chi2_cc = 0 and chi2_cc_p = 1, agreeing with the exact
// test that balanced discordance is no evidence. statsmodels keeps the
// correction and would report 1/n.
//
// Counts are 64-bit; tested up to n = 10^7 (Boost's binomial is evaluated via the
// incomplete beta function, so there is no factorial overflow). A p below the
// smallest double underflows to 0.
#include <cstdint>

namespace pav::stats {

struct McNemar {
  std::int64_t b = 0;
  std::int64_t c = 0;
  std::int64_t n = 0;  // b + c
  double exact_p = 1.0;
  double mid_p = 1.0;
  double chi2_cc = 0.0;
  double chi2_cc_p = 1.0;
  double chi2 = 0.0;
  double chi2_p = 1.0;
};

// Throws std::invalid_argument when b or c is negative or b + c overflows int64.
McNemar mcnemar(std::int64_t b, std::int64_t c);

// P(X >= x) for X ~ chi-square with one degree of freedom, from the complement
// so tiny tails keep their precision; 1 for x <= 0.
double chi2_1_upper_tail(double x);

}  // namespace pav::stats
