// SPDX-License-Identifier: Apache-2.0
#pragma once
// fp8 (e4m3fn, e4m3fnuz, e5m2), bf16 and f16 codecs, shared by host and GPU code.
// Encoders round to nearest even; the fp8 encoders saturate to the largest
// finite value (satfinite), infinities included.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/platform_hd.hpp"
#include "kernels/types.hpp"

namespace pav::kernels {

PAV_HD inline uint32_t f32_bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
PAV_HD inline float f32_from_bits(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

// ---- bf16 -------------------------------------------------------------------
PAV_HD inline float bf16_to_f32(uint16_t h) { return f32_from_bits(uint32_t(h) << 16); }
PAV_HD inline uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

// ---- f16 --------------------------------------------------------------------
PAV_HD inline float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e == 0x1f) return f32_from_bits(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    float v = float(m) * 5.9604644775390625e-08f;  // m * 2^-24
    return sign ? -v : v;
  }
  return f32_from_bits(sign | ((e + 112) << 23) | (m << 13));
}
PAV_HD inline uint16_t f32_to_f16(float f) {
  uint32_t u = f32_bits(f);
  uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u);   // NaN
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (a < 0x38800000u) {                                  // below 2^-14: subnormal
    // Value in units of 2^-24, rounded to nearest even by adding the magic 0.5.
    float v = f32_from_bits(a) * 16777216.0f;             // exact: power-of-two scale
#ifdef __CUDA_ARCH__
    float r = rintf(v);
#else
    float r = std::nearbyint(v);
#endif
    return uint16_t(sign | uint16_t(r));
  }
  uint32_t e = (a >> 23) - 112, m = a & 0x7fffffu;
  uint32_t h = (e << 10) | (m >> 13);
  uint32_t rest = m & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // carry may bump the exponent
  return uint16_t(sign | h);
}

// ---- fp8 --------------------------------------------------------------------
struct Fp8Format {
  int bias;
  float max_finite;
  uint8_t max_code;  // largest finite magnitude code
  bool fnuz;         // no negative zero, NaN is 0x80
};
PAV_HD constexpr Fp8Format fp8_format(DType d) {
  return d == DType::fp8_e4m3fnuz ? Fp8Format{8, 240.0f, 0x7f, true}
                                  : Fp8Format{7, 448.0f, 0x7e, false};
}
PAV_HD constexpr float fp8_max(DType d) { return fp8_format(d).max_finite; }

PAV_HD inline float fp8_to_f32(uint8_t b, DType flavour) {
  const Fp8Format f = fp8_format(flavour);
  if (f.fnuz) {
    if (b == 0x80) return std::numeric_limits<float>::quiet_NaN();
  } else if ((b & 0x7f) == 0x7f) {
    return std::numeric_limits<float>::quiet_NaN();
  }
  const int e = (b >> 3) & 0xf, m = b & 7;
  // Subnormal: m * 2^(1 - bias - 3); normal: (8 + m) * 2^(e - bias - 3).
  float v = e == 0 ? ldexpf(float(m), 1 - f.bias - 3) : ldexpf(float(8 + m), e - f.bias - 3);
  return (b & 0x80) ? -v : v;
}

PAV_HD inline uint8_t f32_to_fp8(float x, DType flavour) {
  // Integer rounding on the f32 bits: exact, no libm calls (this runs once per
  // P element in the decode inner loop).
  const Fp8Format f = fp8_format(flavour);
  const uint32_t u = f32_bits(x);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return f.fnuz ? uint8_t(0x80) : uint8_t(0x7f);
  const uint8_t sign = uint8_t((u >> 24) & 0x80);
  uint8_t code;
  if (a >= f32_bits(f.max_finite)) {
    code = f.max_code;
  } else if (a < 0x00800000u) {
    code = 0;  // f32 subnormals are far below the smallest fp8 subnormal
  } else {
    const int e = int(a >> 23) - 127;          // unbiased exponent
    const int emin = 1 - f.bias;
    const uint32_t mant = (a & 0x7fffffu) | 0x800000u;  // 24-bit significand with the leading 1
    // Keep 4 significant bits (1 + 3) in the normal range; fewer below emin.
    const int shift = 20 + (e < emin ? emin - e : 0);
    uint32_t units = 0;
    if (shift < 32) {
      units = mant >> shift;
      const uint32_t rest = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
      if (rest > half || (rest == half && (units & 1u))) ++units;
    }
    int biased, m;
    if (e < emin) {           // subnormal scale: units in 0..8 (8 carries into the first normal)
      biased = units >= 8 ? 1 : 0;
      m = int(units >= 8 ? units - 8 : units);
    } else {                  // normal: units in 8..16 (16 carries into the next binade)
      int ex = e;
      if (units == 16) { ex += 1; units = 8; }
      biased = ex + f.bias;
      m = int(units) - 8;
    }
    const int c = (biased << 3) | m;
    code = c > f.max_code ? f.max_code : uint8_t(c);
  }
  if (f.fnuz && code == 0) return 0;  // fnuz has no negative zero
  return uint8_t(code | sign);
}

// ---- fp8 e5m2 -----------------------------------------------------------------
// e5m2 (bias 15, 2 mantissa bits, max 57344, inf 0x7c, NaN 0x7d..0x7f) is the
// upper byte of an f16: every e5m2 value is an f16 value.
inline constexpr float kE5m2Max = 57344.0f;
PAV_HD inline float e5m2_to_f32(uint8_t b) { return f16_to_f32(uint16_t(uint16_t(b) << 8)); }
PAV_HD inline uint8_t f32_to_e5m2(float x) {
  const uint32_t u = f32_bits(x), a = u & 0x7fffffffu;
  const uint8_t sign = uint8_t((u >> 24) & 0x80);
  if (a > 0x7f800000u) return 0x7e;                    // NaN
  if (a >= f32_bits(kE5m2Max)) return uint8_t(sign | 0x7b);  // satfinite, infinities included
  // The quantum of |x|: 2^(e-2) in the normal range, 2^-16 below 2^-14. The
  // division and the product are by powers of two (exact); the rounding is to
  // nearest even, so the result is an e5m2 value and so an f16 one.
  const int e = int(a >> 23) - 127;
  const float q = ldexpf(1.0f, e < -14 ? -16 : e - 2);
#ifdef __CUDA_ARCH__
  const float r = rintf(f32_from_bits(a) / q) * q;
#else
  const float r = std::nearbyint(f32_from_bits(a) / q) * q;
#endif
  return uint8_t(sign | uint8_t(f32_to_f16(r) >> 8));
}

// ---- one element of a KV cache ----------------------------------------------------
// The dtypes a cache may hold (is_cache_dtype): bf16 and f16 (2 bytes, little
// endian as the host stores them), the e4m3 flavours and e5m2 (1 byte).
inline float cache_element_value(DType t, const uint8_t* p) {
  switch (t) {
    case DType::bf16: { uint16_t h; std::memcpy(&h, p, 2); return bf16_to_f32(h); }
    case DType::f16: { uint16_t h; std::memcpy(&h, p, 2); return f16_to_f32(h); }
    case DType::fp8_e4m3fn: case DType::fp8_e4m3fnuz: return fp8_to_f32(*p, t);
    case DType::fp8_e5m2: return e5m2_to_f32(*p);
    default: return std::numeric_limits<float>::quiet_NaN();
  }
}
inline void put_cache_element(DType t, float x, uint8_t* p) {
  switch (t) {
    case DType::bf16: { const uint16_t h = f32_to_bf16(x); std::memcpy(p, &h, 2); return; }
    case DType::f16: { const uint16_t h = f32_to_f16(x); std::memcpy(p, &h, 2); return; }
    case DType::fp8_e4m3fn: case DType::fp8_e4m3fnuz: *p = f32_to_fp8(x, t); return;
    case DType::fp8_e5m2: *p = f32_to_e5m2(x); return;
    default: return;
  }
}
// Writes the NaN of a cache dtype (the poison of bytes no kernel may read).
inline void put_cache_nan(DType t, uint8_t* p) {
  switch (t) {
    case DType::bf16: p[0] = 0xc0; p[1] = 0x7f; return;
    case DType::f16: p[0] = 0x00; p[1] = 0x7e; return;
    case DType::fp8_e4m3fnuz: *p = 0x80; return;
    case DType::fp8_e5m2: *p = 0x7e; return;
    default: *p = 0x7f; return;
  }
}
// The largest finite value of a cache dtype.
constexpr float cache_dtype_max(DType t) {
  return t == DType::bf16 ? 3.3895313892515355e38f : t == DType::f16 ? 65504.0f
         : t == DType::fp8_e5m2 ? kE5m2Max : t == DType::fp8_e4m3fnuz ? 240.0f : 448.0f;
}

}  // namespace pav::kernels
