// SPDX-License-Identifier: Apache-2.0
// Special values through every codec, both ways: NaN (several payloads,
// including ones whose high bits alone would read as infinity), +-inf, +-0,
// subnormals of the target format and of f32, and the largest finite values.
// NaN and infinity are told apart everywhere the format has both; the fp8
// encoders saturate infinities (they have none) but keep NaN a NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/codecs.hpp"

using namespace pav::kernels;

namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Quiet, signalling-looking, negative, and low-payload NaNs: 0x7f800001 keeps
// 0x7f80 (infinity) in its high half, so a codec that only truncates or rounds
// the high bits turns it into an infinity.
const uint32_t kNaNs[] = {0x7fc00000u, 0x7f800001u, 0xff800001u, 0xffc00000u, 0x7fbfffffu, 0x7f802000u};

bool is_plain_inf(float f, bool negative) { return std::isinf(f) && !std::isnan(f) && std::signbit(f) == negative; }

}  // namespace

TEST(CodecsSpecial, Bf16) {
  for (uint32_t n : kNaNs) {
    const uint16_t h = f32_to_bf16(from_bits(n));
    EXPECT_TRUE(std::isnan(bf16_to_f32(h))) << std::hex << "f32 NaN 0x" << n << " encoded as 0x" << h;
  }
  for (uint16_t h : {uint16_t(0x7fc0), uint16_t(0x7f81), uint16_t(0xff81), uint16_t(0xffff)})
    EXPECT_TRUE(std::isnan(bf16_to_f32(h))) << std::hex << h;
  EXPECT_EQ(f32_to_bf16(INFINITY), 0x7f80);
  EXPECT_EQ(f32_to_bf16(-INFINITY), 0xff80);
  EXPECT_TRUE(is_plain_inf(bf16_to_f32(0x7f80), false));
  EXPECT_TRUE(is_plain_inf(bf16_to_f32(0xff80), true));
  EXPECT_EQ(f32_to_bf16(0.0f), 0x0000);
  EXPECT_EQ(f32_to_bf16(-0.0f), 0x8000);
  EXPECT_TRUE(std::signbit(bf16_to_f32(0x8000)) && bf16_to_f32(0x8000) == 0.0f);
  // Subnormals: bf16 has f32's exponent range, so 0x0001 is 2^-133 exactly.
  EXPECT_EQ(bf16_to_f32(0x0001), std::ldexp(1.0f, -133));
  EXPECT_EQ(bf16_to_f32(0x807f), -std::ldexp(127.0f, -133));
  for (uint16_t h : {uint16_t(0x0001), uint16_t(0x007f), uint16_t(0x8001), uint16_t(0x807f), uint16_t(0x0080)})
    EXPECT_EQ(f32_to_bf16(bf16_to_f32(h)), h) << std::hex << h;
  EXPECT_EQ(f32_to_bf16(from_bits(0x00000001u)), 0x0000) << "the smallest f32 subnormal rounds to +0";
  EXPECT_EQ(f32_to_bf16(from_bits(0x80000001u)), 0x8000) << "and its negative to -0";
  // Largest finite (0x7f7f = 3.3895e38) round-trips; half an ulp above it rounds to inf.
  EXPECT_EQ(f32_to_bf16(bf16_to_f32(0x7f7f)), 0x7f7f);
  EXPECT_EQ(f32_to_bf16(from_bits(0x7f7f8000u)), 0x7f80);
  EXPECT_EQ(f32_to_bf16(from_bits(0x7f7f7fffu)), 0x7f7f);
}

TEST(CodecsSpecial, F16) {
  for (uint32_t n : kNaNs) {
    const uint16_t h = f32_to_f16(from_bits(n));
    EXPECT_TRUE(std::isnan(f16_to_f32(h))) << std::hex << "f32 NaN 0x" << n << " encoded as 0x" << h;
    EXPECT_EQ(h & 0x8000, (n >> 16) & 0x8000) << std::hex << "sign of NaN 0x" << n;
  }
  for (uint16_t h : {uint16_t(0x7e00), uint16_t(0x7c01), uint16_t(0xfc01), uint16_t(0x7fff)})
    EXPECT_TRUE(std::isnan(f16_to_f32(h))) << std::hex << h;
  EXPECT_EQ(f32_to_f16(INFINITY), 0x7c00);
  EXPECT_EQ(f32_to_f16(-INFINITY), 0xfc00);
  EXPECT_TRUE(is_plain_inf(f16_to_f32(0x7c00), false));
  EXPECT_TRUE(is_plain_inf(f16_to_f32(0xfc00), true));
  EXPECT_EQ(f32_to_f16(0.0f), 0x0000);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  EXPECT_TRUE(std::signbit(f16_to_f32(0x8000)) && f16_to_f32(0x8000) == 0.0f);
  // Largest finite 65504; 65520 (half an ulp above) and more overflow to inf.
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(std::nextafter(65520.0f, 0.0f)), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);
  EXPECT_EQ(f32_to_f16(-65520.0f), 0xfc00);
  EXPECT_EQ(f32_to_f16(1e30f), 0x7c00);
  // Subnormals: 0x0001 = 2^-24, 0x03ff = 1023 * 2^-24, 0x0400 = 2^-14 the smallest normal.
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_f32(0x83ff), -std::ldexp(1023.0f, -24));
  EXPECT_EQ(f16_to_f32(0x0400), std::ldexp(1.0f, -14));
  for (uint16_t h : {uint16_t(0x0001), uint16_t(0x0002), uint16_t(0x03ff), uint16_t(0x0400), uint16_t(0x8001),
                     uint16_t(0x83ff)})
    EXPECT_EQ(f32_to_f16(f16_to_f32(h)), h) << std::hex << h;
  // Half the smallest subnormal ties to even (zero); just above it rounds up;
  // 1.5 units ties to 2 units; f32 subnormals vanish with their sign kept.
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(f32_to_f16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(f32_to_f16(-std::ldexp(3.0f, -25)), 0x8002);
  EXPECT_EQ(f32_to_f16(from_bits(0x00000001u)), 0x0000);
  EXPECT_EQ(f32_to_f16(from_bits(0x80000001u)), 0x8000);
}

TEST(CodecsSpecial, Fp8E4m3fn) {
  const DType f = DType::fp8_e4m3fn;
  for (uint32_t n : kNaNs) {
    const uint8_t c = f32_to_fp8(from_bits(n), f);
    EXPECT_EQ(c & 0x7f, 0x7f) << std::hex << "f32 NaN 0x" << n << " encoded as 0x" << int(c);
  }
  EXPECT_TRUE(std::isnan(fp8_to_f32(0x7f, f)));
  EXPECT_TRUE(std::isnan(fp8_to_f32(0xff, f)));
  // No infinity in the format: infinities saturate to +-448 (0x7e / 0xfe).
  EXPECT_EQ(f32_to_fp8(INFINITY, f), 0x7e);
  EXPECT_EQ(f32_to_fp8(-INFINITY, f), 0xfe);
  EXPECT_EQ(fp8_to_f32(0xfe, f), -448.0f);
  EXPECT_EQ(f32_to_fp8(0.0f, f), 0x00);
  EXPECT_EQ(f32_to_fp8(-0.0f, f), 0x80);
  EXPECT_TRUE(std::signbit(fp8_to_f32(0x80, f)) && fp8_to_f32(0x80, f) == 0.0f);
  // Subnormals: 0x01 = 2^-9, 0x07 = 7 * 2^-9; 0x08 = 2^-6 the smallest normal.
  EXPECT_EQ(fp8_to_f32(0x01, f), std::ldexp(1.0f, -9));
  EXPECT_EQ(fp8_to_f32(0x87, f), -std::ldexp(7.0f, -9));
  EXPECT_EQ(fp8_to_f32(0x08, f), std::ldexp(1.0f, -6));
  EXPECT_EQ(f32_to_fp8(std::ldexp(1.0f, -10), f), 0x00) << "half the smallest subnormal ties to even";
  EXPECT_EQ(f32_to_fp8(std::nextafter(std::ldexp(1.0f, -10), 1.0f), f), 0x01);
  EXPECT_EQ(f32_to_fp8(-std::ldexp(3.0f, -10), f), 0x82) << "1.5 units ties to 2";
  EXPECT_EQ(f32_to_fp8(from_bits(0x00000001u), f), 0x00);
  EXPECT_EQ(f32_to_fp8(from_bits(0x80000001u), f), 0x80) << "a negative f32 subnormal keeps its sign";
}

TEST(CodecsSpecial, Fp8E4m3fnuz) {
  const DType f = DType::fp8_e4m3fnuz;
  for (uint32_t n : kNaNs) EXPECT_EQ(f32_to_fp8(from_bits(n), f), 0x80) << std::hex << "f32 NaN 0x" << n;
  EXPECT_TRUE(std::isnan(fp8_to_f32(0x80, f)));
  EXPECT_EQ(fp8_to_f32(0x7f, f), 240.0f) << "0x7f is finite in fnuz";
  EXPECT_EQ(fp8_to_f32(0xff, f), -240.0f);
  EXPECT_EQ(f32_to_fp8(INFINITY, f), 0x7f);
  EXPECT_EQ(f32_to_fp8(-INFINITY, f), 0xff);
  // No negative zero: -0 and tiny negatives encode as +0, never as 0x80 (NaN).
  EXPECT_EQ(f32_to_fp8(0.0f, f), 0x00);
  EXPECT_EQ(f32_to_fp8(-0.0f, f), 0x00);
  EXPECT_EQ(f32_to_fp8(-std::ldexp(1.0f, -11), f), 0x00);
  EXPECT_EQ(f32_to_fp8(from_bits(0x80000001u), f), 0x00);
  // Subnormals: 0x01 = 2^-10, 0x08 = 2^-7 the smallest normal.
  EXPECT_EQ(fp8_to_f32(0x01, f), std::ldexp(1.0f, -10));
  EXPECT_EQ(fp8_to_f32(0x81, f), -std::ldexp(1.0f, -10));
  EXPECT_EQ(fp8_to_f32(0x08, f), std::ldexp(1.0f, -7));
  EXPECT_EQ(f32_to_fp8(std::ldexp(1.0f, -11), f), 0x00);
  EXPECT_EQ(f32_to_fp8(std::nextafter(std::ldexp(1.0f, -11), 1.0f), f), 0x01);
  EXPECT_EQ(f32_to_fp8(-std::ldexp(3.0f, -11), f), 0x82);
}

// A NaN comes out of the 16-bit encoders quiet (the top mantissa bit set, as
// IEEE conversions do) and with its sign, whatever its payload: a signalling
// or low-payload NaN must not leave as a signalling one.
TEST(CodecsSpecial, EncodedNaNsAreQuietAndKeepTheirSign) {
  for (uint32_t n : kNaNs) {
    const bool negative = (n >> 31) != 0;
    const uint16_t b = f32_to_bf16(from_bits(n));
    EXPECT_EQ(b & 0x7fc0, 0x7fc0) << std::hex << "bf16 of f32 NaN 0x" << n << " is 0x" << b;
    EXPECT_EQ((b >> 15) != 0, negative) << std::hex << "bf16 of f32 NaN 0x" << n << " is 0x" << b;
    const uint16_t h = f32_to_f16(from_bits(n));
    EXPECT_EQ(h & 0x7e00, 0x7e00) << std::hex << "f16 of f32 NaN 0x" << n << " is 0x" << h;
    EXPECT_EQ((h >> 15) != 0, negative) << std::hex << "f16 of f32 NaN 0x" << n << " is 0x" << h;
  }
}
