// SPDX-License-Identifier: Apache-2.0
#pragma once
// The drift sweep's counter-based normals: every value a pure function of its
// coordinates, so the cache builder, the end-to-end reference and the batch's
// lengths agree without storing anything. The bottom of the drift folder: the
// sweep file and the data both read it.
#include <cmath>
#include <cstdint>

namespace pav::props {

// Which source tensor a value belongs to (part of its key).
enum class SourceTensor : uint8_t { q = 1, k = 2, v = 3 };

// ---- counter-based normals --------------------------------------------------------

// splitmix64's finalizer: a bijective 64-bit mix.
inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
// Uniform in (0, 1), never 0 (Box-Muller takes its log).
inline double unit_open(uint64_t h) { return (double(h >> 11) + 0.5) * 0x1.0p-53; }

inline uint64_t row_key(uint64_t seed, SourceTensor t, int64_t a, int64_t b, int64_t c) {
  uint64_t k = mix64(seed ^ (uint64_t(t) << 56));
  k = mix64(k ^ uint64_t(a));
  k = mix64(k ^ uint64_t(b));
  return mix64(k ^ uint64_t(c));
}
// A standard normal from one 64-bit hash: the inverse normal CDF of a uniform,
// by Acklam's rational approximation (relative error < 1.2e-9; no trig, and a
// log only in the 4.85% of draws in the tails).
inline double inverse_normal_cdf(double p) {
  static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                                 1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                                 6.680131188771972e+01,  -1.328068155288572e+01};
  static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                                 -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                                 3.754408661907416e+00};
  constexpr double low = 0.02425;
  auto tail = [&](double q) {
    return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
           ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
  };
  if (p < low) return tail(std::sqrt(-2.0 * std::log(p)));
  if (p > 1.0 - low) return -tail(std::sqrt(-2.0 * std::log(1.0 - p)));
  const double q = p - 0.5, r = q * q;
  return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
         (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0);
}
// Element j of a row.
inline float element_normal(uint64_t row, int64_t j) {
  return float(inverse_normal_cdf(unit_open(mix64(row + 0xd1342543de82ef95ull * uint64_t(j + 1)))));
}
inline void normal_row(uint64_t row, int64_t n, float* out) {
  for (int64_t j = 0; j < n; ++j) out[j] = element_normal(row, j);
}

// One source value N(0, 1) at its coordinates.
inline float source_normal(uint64_t data_seed, SourceTensor t, int64_t a, int64_t b, int64_t c, int64_t d) {
  return element_normal(row_key(data_seed, t, a, b, c), d);
}

}  // namespace pav::props
