// SPDX-License-Identifier: Apache-2.0
#pragma once
// A plain decode kernel for the comparison-standard tests, with selectable
// numerics: Q quantized per row to fp8 or not, P rounded to fp8 (against the
// running max), bf16, f16 or not at all, a row split into partitions whose
// normalized partials are stored in a partial dtype and merged, and the output
// stored in bf16, f16 or f32. It is written from the contract (offsets from
// test_call.hpp, f32 arithmetic like a real kernel) and shares nothing with
// the reference but the codecs, so the standard is tested against numerics it
// did not produce.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/codecs.hpp"
#include "reference/test_call.hpp"

namespace pav::reference::testing {

// fp8: scaled by FP8_MAX against the running max; fp8_unscaled: cast as it is.
enum class KernelP : uint8_t { fp8, bf16, f16, none, fp8_unscaled };

struct KernelNumerics {
  bool q_fp8 = true;
  KernelP p = KernelP::fp8;
  int64_t split_tokens = 0;                         // partition size; 0: one partition, no partials stored
  kernels::DType partial = kernels::DType::bf16;   // bf16, f16, f32 or an fp8 flavour
  kernels::DType out = kernels::DType::bf16;       // bf16, f16 or f32
  int64_t drop_last_token = 0;                      // a defect: the last n visible tokens of each row are skipped
};

// Output of the kernel: the stored bytes as a view ([rows, Hq, D], out dtype)
// plus the same values as floats.
struct KernelOutput {
  std::vector<uint16_t> half;
  std::vector<float> f32;
  kernels::DType dtype = kernels::DType::f32;
  int64_t rows = 0, hq = 0, D = 0;
  kernels::TensorView view() {
    void* p = dtype == kernels::DType::f32 ? static_cast<void*>(f32.data()) : static_cast<void*>(half.data());
    return kernels::TensorView::contiguous_of(p, dtype, {rows, hq, D});
  }
  float at(int64_t i) const {
    if (dtype == kernels::DType::f32) return f32[i];
    return dtype == kernels::DType::bf16 ? kernels::bf16_to_f32(half[i]) : kernels::f16_to_f32(half[i]);
  }
  void set(int64_t i, float v) {
    if (dtype == kernels::DType::f32) f32[i] = v;
    else half[i] = dtype == kernels::DType::bf16 ? kernels::f32_to_bf16(v) : kernels::f32_to_f16(v);
  }
};

inline float round_to(float x, kernels::DType t) {
  switch (t) {
    case kernels::DType::bf16: return kernels::bf16_to_f32(kernels::f32_to_bf16(x));
    case kernels::DType::f16: return kernels::f16_to_f32(kernels::f32_to_f16(x));
    case kernels::DType::fp8_e4m3fn:
    case kernels::DType::fp8_e4m3fnuz: return kernels::fp8_to_f32(kernels::f32_to_fp8(x, t), t);
    case kernels::DType::fp8_e5m2: return kernels::e5m2_to_f32(kernels::f32_to_e5m2(x));
    default: return x;
  }
}

inline KernelOutput run_kernel(const OwnedCall& c, const KernelNumerics& k) {
  using namespace kernels;
  const CallSpec& s = c.spec;
  const int64_t B = int64_t(s.lens.size()), D = s.head_dim, G = s.group, hq = c.hq(), bs = s.block_size;
  const DType fl = is_fp8(s.compute) ? s.compute : s.cache;  // fp8 flavour of Q and P
  const float fmax = fp8_max(fl);
  const float scale = s.softmax_scale != 0.0f ? s.softmax_scale : 1.0f / std::sqrt(float(D));
  auto kscale = [&](int64_t blk, int64_t h, int64_t off) -> float {
    if (s.scales == Scales::none) return 1.0f;
    return s.scales == Scales::tensor ? c.ks[0] : c.ks[c.scale_at(blk, h, off)];
  };
  auto vscale = [&](int64_t blk, int64_t h, int64_t off) -> float {
    if (s.scales == Scales::none) return 1.0f;
    return s.scales == Scales::tensor ? c.vs[0] : c.vs[c.scale_at(blk, h, off)];
  };
  float lut[256];  // fp8 code -> value in the cache flavour
  for (int i = 0; i < 256; ++i) lut[i] = fp8_to_f32(uint8_t(i), s.cache);
  auto round_p = [&](float p) -> float {
    switch (k.p) {
      case KernelP::fp8: return fp8_to_f32(f32_to_fp8(p * fmax, fl), fl) / fmax;
      case KernelP::fp8_unscaled: return fp8_to_f32(f32_to_fp8(p, fl), fl);
      case KernelP::bf16: return round_to(p, DType::bf16);
      case KernelP::f16: return round_to(p, DType::f16);
      case KernelP::none: return p;
    }
    return p;
  };
  KernelOutput o;
  o.dtype = k.out;
  o.rows = B * s.q_len;
  o.hq = hq;
  o.D = D;
  if (k.out == DType::f32) o.f32.assign(o.rows * hq * D, 0.0f);
  else o.half.assign(o.rows * hq * D, 0);
  std::vector<float> q(D), sc, acc(D), merged(D);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t p = 0; p < s.q_len; ++p)
      for (int64_t head = 0; head < hq; ++head) {
        const int64_t h = head / G, qrow = b * s.q_len + p, base = (qrow * hq + head) * D;
        float qs = 1.0f;
        for (int64_t d = 0; d < D; ++d) q[d] = c.q_value(qrow, head, d);
        if (k.q_fp8) {
          float amax = 0.0f;
          for (float x : q) amax = std::max(amax, std::fabs(x));
          qs = std::max(amax / fmax, 1e-20f);
          for (float& x : q) x = fp8_to_f32(f32_to_fp8(x / qs, fl), fl);
        }
        const int64_t visible = std::max<int64_t>(0, s.lens[b] - s.q_len + 1 + p - k.drop_last_token);
        if (visible <= 0) {
          for (int64_t d = 0; d < D; ++d) o.set(base + d, 0.0f);
          continue;
        }
        sc.assign(visible, 0.0f);
        for (int64_t t = 0; t < visible; ++t) {
          const int64_t blk = c.block_of(b, t), off = t % bs;
          float dot = 0.0f;
          for (int64_t d = 0; d < D; ++d) dot += q[d] * lut[c.k[c.k_at(blk, h, d, off)]];
          sc[t] = dot * qs * kscale(blk, h, off) * scale;
        }
        // Partitions of split_tokens; each stores m, l and its normalized partial.
        const int64_t part = k.split_tokens > 0 ? k.split_tokens : visible;
        float M = -std::numeric_limits<float>::infinity(), L = 0.0f;
        std::fill(merged.begin(), merged.end(), 0.0f);
        std::vector<float> ms, ls, partials;
        for (int64_t t0 = 0; t0 < visible; t0 += part) {
          const int64_t t1 = std::min(visible, t0 + part);
          float m = -std::numeric_limits<float>::infinity(), l = 0.0f;
          for (int64_t t = t0; t < t1; ++t) m = std::max(m, sc[t]);
          std::fill(acc.begin(), acc.end(), 0.0f);
          for (int64_t t = t0; t < t1; ++t) {
            const int64_t blk = c.block_of(b, t), off = t % bs;
            const float pt = std::exp(sc[t] - m);
            l += pt;
            const float w = round_p(pt) * vscale(blk, h, off);
            for (int64_t d = 0; d < D; ++d) acc[d] += w * lut[c.v[c.v_at(blk, h, d, off)]];
          }
          ms.push_back(m);
          ls.push_back(l);
          for (int64_t d = 0; d < D; ++d)
            partials.push_back(k.split_tokens > 0 ? round_to(acc[d] / l, k.partial) : acc[d] / l);
          M = std::max(M, m);
        }
        for (size_t i = 0; i < ms.size(); ++i) L += ls[i] * std::exp(ms[i] - M);
        for (size_t i = 0; i < ms.size(); ++i) {
          const float w = ls[i] * std::exp(ms[i] - M) / L;
          for (int64_t d = 0; d < D; ++d) merged[d] += w * partials[i * D + d];
        }
        for (int64_t d = 0; d < D; ++d) o.set(base + d, merged[d]);
      }
  return o;
}

}  // namespace pav::reference::testing
