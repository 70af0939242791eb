// SPDX-License-Identifier: Apache-2.0
// Codecs against independent formulas: every fp8 code decoded by the textbook
// expression, encoding checked against a brute-force nearest-even search.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernels/codecs.hpp"

using namespace pav::kernels;

namespace {

// (-1)^s * 2^(e-bias) * (1 + m/8), subnormals 2^(1-bias) * m/8, in double.
double fp8_formula(int code, int bias) {
  const int s = code >> 7, e = (code >> 3) & 15, m = code & 7;
  const double mag = e == 0 ? std::ldexp(m / 8.0, 1 - bias) : std::ldexp(1.0 + m / 8.0, e - bias);
  return s ? -mag : mag;
}

bool fn_is_nan(int code) { return (code & 0x7f) == 0x7f; }
bool fnuz_is_nan(int code) { return code == 0x80; }

// Nearest finite code to x by exhaustive search; ties go to the even code;
// beyond the largest finite value, saturate.
int brute_encode(float x, DType flavour) {
  const bool fnuz = flavour == DType::fp8_e4m3fnuz;
  int best = -1;
  double best_err = 0;
  for (int c = 0; c < 256; ++c) {
    if (fnuz ? fnuz_is_nan(c) : fn_is_nan(c)) continue;
    const double v = fp8_formula(c, fnuz ? 8 : 7);
    if (std::signbit(v) != std::signbit(x) && v != 0.0) continue;
    if (!fnuz && v == 0.0 && std::signbit(x) != (c == 0x80)) continue;  // keep the sign of zero
    const double err = std::fabs(v - double(x));
    if (best < 0 || err < best_err || (err == best_err && (c & 1) == 0)) {
      best = c;
      best_err = err;
    }
  }
  return best;
}

}  // namespace

TEST(Codecs, Fp8E4m3fnEveryCodeMatchesFormula) {
  for (int c = 0; c < 256; ++c) {
    const float v = fp8_to_f32(uint8_t(c), DType::fp8_e4m3fn);
    if (fn_is_nan(c)) {
      EXPECT_TRUE(std::isnan(v)) << "code " << c;
      continue;
    }
    EXPECT_EQ(double(v), fp8_formula(c, 7)) << "code " << c;
  }
  EXPECT_EQ(fp8_to_f32(0x7e, DType::fp8_e4m3fn), 448.0f);
  EXPECT_TRUE(std::signbit(fp8_to_f32(0x80, DType::fp8_e4m3fn)));
}

TEST(Codecs, Fp8E4m3fnuzEveryCodeMatchesFormula) {
  for (int c = 0; c < 256; ++c) {
    const float v = fp8_to_f32(uint8_t(c), DType::fp8_e4m3fnuz);
    if (fnuz_is_nan(c)) {
      EXPECT_TRUE(std::isnan(v)) << "code " << c;
      continue;
    }
    EXPECT_EQ(double(v), fp8_formula(c, 8)) << "code " << c;
  }
  EXPECT_EQ(fp8_to_f32(0x7f, DType::fp8_e4m3fnuz), 240.0f);
}

TEST(Codecs, Fp8RoundTripsEveryFiniteCode) {
  for (DType f : {DType::fp8_e4m3fn, DType::fp8_e4m3fnuz}) {
    for (int c = 0; c < 256; ++c) {
      const float v = fp8_to_f32(uint8_t(c), f);
      if (std::isnan(v)) continue;
      EXPECT_EQ(int(f32_to_fp8(v, f)), c) << to_string(f) << " code " << c;
    }
  }
}

TEST(Codecs, Fp8EncodeIsNearestEvenAndSaturates) {
  for (DType f : {DType::fp8_e4m3fn, DType::fp8_e4m3fnuz}) {
    const bool fnuz = f == DType::fp8_e4m3fnuz;
    // Midpoints between neighbouring codes and points just either side.
    std::vector<float> xs;
    for (int c = 0; c < 127; ++c) {
      if (fnuz ? fnuz_is_nan(c + 1) : fn_is_nan(c + 1)) continue;
      const double a = fp8_formula(c, fnuz ? 8 : 7), b = fp8_formula(c + 1, fnuz ? 8 : 7);
      const double mid = 0.5 * (a + b);
      for (double x : {mid, std::nextafter(mid, 0.0), std::nextafter(mid, 1e9), a, b}) {
        xs.push_back(float(x));
        xs.push_back(-float(x));
      }
    }
    const uint32_t seed = 20261129;
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-600.0f, 600.0f);
    for (int i = 0; i < 20000; ++i) xs.push_back(u(rng) / float(1 << (i % 12)));
    for (float x : xs) {
      int want = brute_encode(x, f);
      if (fnuz && want == 0x80) want = 0;
      ASSERT_EQ(int(f32_to_fp8(x, f)), want) << to_string(f) << " x=" << x << " seed " << seed;
    }
    const uint8_t maxc = fnuz ? 0x7f : 0x7e;
    EXPECT_EQ(f32_to_fp8(1e30f, f), maxc);
    EXPECT_EQ(f32_to_fp8(INFINITY, f), maxc);
    EXPECT_EQ(f32_to_fp8(-INFINITY, f), uint8_t(maxc | 0x80));
    EXPECT_EQ(f32_to_fp8(fnuz ? 250.0f : 470.0f, f), maxc) << "rounds up past max: saturates";
    EXPECT_TRUE(std::isnan(fp8_to_f32(f32_to_fp8(NAN, f), f)));
  }
}

TEST(Codecs, Bf16RoundsToNearestEven) {
  const uint32_t seed = 7;
  std::mt19937 rng(seed);
  for (int i = 0; i < 200000; ++i) {
    uint32_t bits = rng();
    float x;
    std::memcpy(&x, &bits, 4);
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(x))));
      continue;
    }
    // Candidates: truncation and the next value up in magnitude.
    const uint16_t lo = uint16_t(bits >> 16), hi = uint16_t(lo + 1);
    const double dlo = bf16_to_f32(lo), dhi = bf16_to_f32(hi);
    const double elo = std::fabs(double(x) - dlo), ehi = std::fabs(double(x) - dhi);
    if (std::isinf(dhi) || std::isinf(x)) continue;  // overflow to inf is checked below
    const uint16_t want = elo < ehi ? lo : ehi < elo ? hi : (lo & 1 ? hi : lo);
    ASSERT_EQ(f32_to_bf16(x), want) << "x=" << x << " seed " << seed;
  }
  EXPECT_EQ(f32_to_bf16(INFINITY), 0x7f80);
  EXPECT_EQ(f32_to_bf16(3.4e38f), 0x7f80) << "past max + half ulp rounds to inf";
  EXPECT_EQ(f32_to_bf16(-1.0f), 0xbf80);
}

TEST(Codecs, F16MatchesCompilerConversion) {
  for (uint32_t h = 0; h < 65536; ++h) {
    _Float16 v;
    const uint16_t hb = uint16_t(h);
    std::memcpy(&v, &hb, 2);
    const float want = float(v), got = f16_to_f32(hb);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got));
      continue;
    }
    ASSERT_EQ(std::memcmp(&want, &got, 4), 0) << "bits " << h;
  }
  const uint32_t seed = 11;
  std::mt19937 rng(seed);
  for (int i = 0; i < 200000; ++i) {
    uint32_t bits = rng();
    if (i % 2) bits = (bits & 0x83ffffffu) | 0x30000000u;  // bias toward the f16 range
    float x;
    std::memcpy(&x, &bits, 4);
    if (std::isnan(x)) continue;
    const _Float16 want = _Float16(x);
    uint16_t wb;
    std::memcpy(&wb, &want, 2);
    ASSERT_EQ(f32_to_f16(x), wb) << "x=" << x << " seed " << seed;
  }
}

namespace {

// e5m2 against its definition: each code's value written out (bias 15, two
// mantissa bits, 0x7c infinity, 0x7d..0x7f NaN), and rounding by search: the
// nearest of all finite codes, ties to the even code, saturating past the max.
double e5m2_value(int b) {
  const int e = (b >> 2) & 31, m = b & 3;
  const double v = e == 0 ? std::ldexp(double(m), -16) : std::ldexp(double(4 + m), e - 17);
  return (b & 0x80) ? -v : v;
}

uint8_t e5m2_nearest(float x) {
  const double a = std::fabs(double(x));
  int best = 0;
  for (int c = 1; c <= 0x7b; ++c) {
    const double dc = std::fabs(e5m2_value(c) - a), db = std::fabs(e5m2_value(best) - a);
    if (dc < db || (dc == db && (c & 1) == 0 && (best & 1) == 1)) best = c;
  }
  return uint8_t(best | (std::signbit(x) ? 0x80 : 0));
}

TEST(Codecs, E5m2AgainstItsDefinition) {
  for (int b = 0; b < 256; ++b) {
    const float got = e5m2_to_f32(uint8_t(b));
    const int mag = b & 0x7f;
    if (mag > 0x7c) {
      EXPECT_TRUE(std::isnan(got)) << b;
      continue;
    }
    if (mag == 0x7c) {
      EXPECT_TRUE(std::isinf(got) && std::signbit(got) == bool(b & 0x80)) << b;
      continue;
    }
    ASSERT_EQ(double(got), e5m2_value(b)) << "code " << b;
    EXPECT_EQ(std::signbit(got), bool(b & 0x80)) << b;
    EXPECT_EQ(f32_to_e5m2(got), uint8_t(b)) << "round trip of code " << b;
    // The midpoint to the next code rounds to the even one of the two.
    if (mag < 0x7b) {
      const float mid = float((e5m2_value(b) + e5m2_value(b + 1)) / 2);
      const uint8_t even = (b & 1) ? uint8_t(b + 1) : uint8_t(b);
      EXPECT_EQ(f32_to_e5m2(mid), even) << "midpoint above code " << b;
      EXPECT_EQ(f32_to_e5m2(std::nextafter(mid, 0.0f)), uint8_t(b)) << b;
      EXPECT_EQ(f32_to_e5m2(std::nextafter(mid, mid * 2)), uint8_t(b + 1)) << b;
    }
  }
  EXPECT_EQ(f32_to_e5m2(57344.0f), 0x7b);
  EXPECT_EQ(f32_to_e5m2(61439.0f), 0x7b);  // past the max: saturated, never infinity
  EXPECT_EQ(f32_to_e5m2(1e30f), 0x7b);
  EXPECT_EQ(f32_to_e5m2(-INFINITY), 0xfb);
  EXPECT_EQ(f32_to_e5m2(NAN) & 0x7f, 0x7e);
  const uint32_t seed = 13;
  std::mt19937 rng(seed);
  for (int i = 0; i < 100000; ++i) {
    uint32_t bits = rng();
    bits = (bits & 0x80ffffffu) | (uint32_t(0x60 + rng() % 0x30) << 23);  // 2^-31 .. 2^17
    float x;
    std::memcpy(&x, &bits, 4);
    ASSERT_EQ(f32_to_e5m2(x), e5m2_nearest(x)) << "x=" << x << " seed " << seed;
  }
}

// Every cache dtype's element codec: value, NaN poison, and the largest finite value.
TEST(Codecs, CacheElementsOfEveryCacheDtype) {
  for (DType t : {DType::bf16, DType::f16, DType::fp8_e4m3fn, DType::fp8_e4m3fnuz, DType::fp8_e5m2}) {
    ASSERT_TRUE(is_cache_dtype(t));
    uint8_t b[2] = {0, 0};
    put_cache_nan(t, b);
    EXPECT_TRUE(std::isnan(cache_element_value(t, b))) << to_string(t);
    for (float x : {0.0f, 1.0f, -1.5f, 3.5f, cache_dtype_max(t), -cache_dtype_max(t)}) {
      put_cache_element(t, x, b);
      EXPECT_EQ(cache_element_value(t, b), x) << to_string(t) << " " << x;
    }
    put_cache_element(t, cache_dtype_max(t) * 2.0f, b);  // 16-bit types round to infinity, fp8 saturates
    const float big = cache_element_value(t, b);
    EXPECT_TRUE(big == cache_dtype_max(t) || std::isinf(big)) << to_string(t);
  }
  for (DType t : {DType::f32, DType::i32, DType::none}) EXPECT_FALSE(is_cache_dtype(t));
}

}  // namespace

