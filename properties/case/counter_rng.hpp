// SPDX-License-Identifier: Apache-2.0
#pragma once
// Counter-based random numbers for generated test data (decode cases, drift
// data). Every value is a pure function of (key, index), computed with 64-bit
// integer arithmetic and at most one floating-point multiplication, so a seed
// means the same bytes on every platform, compiler and standard library (no
// std::*_distribution, no libm), and values can be drawn in any order, in
// parallel, or one at a time.
//
// The algorithm, for anyone reimplementing it (properties/case/rng_reference.py
// does, to pin the bytes from outside this code):
//   mix64(x):   x += 0x9e3779b97f4a7c15; x = (x ^ x>>30) * 0xbf58476d1ce4e5b9;
//               x = (x ^ x>>27) * 0x94d049bb133111eb; return x ^ x>>31   (mod 2^64)
//   key(seed, tag, a, b, c) = mix64(mix64(mix64(mix64(seed ^ tag<<56) ^ a) ^ b) ^ c)
//   bits(key, i) = mix64(key + 0xd1342543de82ef95 * (i + 1))
//   normal(key, i): h = bits(key, i); S = sum of h's four 16-bit fields;
//               float(double(S - 131070) * kNormalScale)   (Irwin-Hall of 4,
//               mean 0, variance 1, |x| <= 3.47)
//   uniform(key, i) = (bits(key, i) >> 40) * 2^-24            (in [0, 1), exact)
//   below(key, i, n) = (bits(key, i) * n) >> 64               (128-bit product)
//   shuffle(v, key): for i = n-1 down to 1: swap(v[i], v[below(key, i, i+1)])
#include <cstdint>
#include <utility>
#include <vector>

namespace pav::props::rng {

// Recorded in case files as "generator". 1 is the legacy std::mt19937_64 /
// std::normal_distribution stream (bytes depend on the standard library); 2 is
// this header.
inline constexpr int kGeneratorVersion = 2;
inline constexpr int kLegacyGenerator = 1;

constexpr uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The key of one stream: a seed, a tag naming the tensor, and up to three
// coordinates (a row of the tensor); indices within the row go to bits().
constexpr uint64_t key(uint64_t seed, uint64_t tag, uint64_t a = 0, uint64_t b = 0, uint64_t c = 0) {
  return mix64(mix64(mix64(mix64(seed ^ (tag << 56)) ^ a) ^ b) ^ c);
}

constexpr uint64_t bits(uint64_t k, uint64_t i) { return mix64(k + 0xd1342543de82ef95ull * (i + 1)); }

// 1 / standard deviation of a sum of four uniform 16-bit integers:
// sqrt(3 / (2^32 - 1)), rounded to double.
inline constexpr double kNormalScale = 0x1.bb67ae86627e8p-16;

// Mean 0, variance 1, bell-shaped (a sum of four uniforms), |x| <= 3.47.
inline float normal(uint64_t k, uint64_t i) {
  const uint64_t h = bits(k, i);
  const int64_t s = int64_t(h & 0xffff) + int64_t((h >> 16) & 0xffff) + int64_t((h >> 32) & 0xffff) +
                    int64_t(h >> 48);
  return float(double(s - 131070) * kNormalScale);
}

// Uniform in [0, 1), a multiple of 2^-24.
inline float uniform(uint64_t k, uint64_t i) { return float(bits(k, i) >> 40) * 0x1p-24f; }

// Uniform integer in [0, n).
inline uint64_t below(uint64_t k, uint64_t i, uint64_t n) {
  return uint64_t((unsigned __int128)bits(k, i) * n >> 64);
}

// Fisher-Yates with below(): the same permutation everywhere.
template <class T>
void shuffle(std::vector<T>& v, uint64_t k) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[size_t(below(k, i - 1, i))]);
}

}  // namespace pav::props::rng
