// SPDX-License-Identifier: Apache-2.0
#pragma once
// An independent, deliberately plain double-precision decode for the tests:
// per row, two passes over the visible tokens, no Eigen, no chunking, offsets
// from test_call.hpp. Also the exact error scales compare() uses.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/codecs.hpp"
#include "reference/test_call.hpp"

namespace pav::reference::testing {

struct Naive {
  std::vector<double> out, lse, l1, l2, sub;  // [rows, Hq, D] / [rows, Hq]
};

// q_fp8: apply the kernels' per-row fp8 quantization of Q (in the call's compute
// flavour). sub uses c = half the subnormal spacing / FP8_MAX of that flavour.
inline Naive naive_decode(const OwnedCall& c, bool q_fp8) {
  using namespace kernels;
  const CallSpec& s = c.spec;
  const int64_t B = int64_t(s.lens.size()), D = s.head_dim, G = s.group, hq = c.hq(), bs = s.block_size;
  const DType qf = is_fp8(s.compute) ? s.compute : s.cache;
  const double fmax = fp8_max(qf);
  const int bias = qf == DType::fp8_e4m3fnuz ? 8 : 7;
  const double csub = is_fp8(s.compute) ? std::ldexp(1.0, 1 - bias - 3) / 2 / fmax : 0.0;
  const double scale = s.softmax_scale != 0.0f ? double(s.softmax_scale) : 1.0 / std::sqrt(double(D));
  Naive n;
  const int64_t rows = B * s.q_len;
  n.out.assign(rows * hq * D, 0.0);
  n.l1 = n.l2 = n.sub = n.out;
  n.lse.assign(rows * hq, -std::numeric_limits<double>::infinity());
  auto kscale = [&](int64_t blk, int64_t h, int64_t off) -> double {
    if (s.scales == Scales::none) return 1.0;
    if (s.scales == Scales::tensor) return c.ks[0];
    return c.ks[c.scale_at(blk, h, off)];
  };
  auto vscale = [&](int64_t blk, int64_t h, int64_t off) -> double {
    if (s.scales == Scales::none) return 1.0;
    if (s.scales == Scales::tensor) return c.vs[0];
    return c.vs[c.scale_at(blk, h, off)];
  };
  std::vector<double> q(D), sc;
  std::vector<float> qf32(D);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t p = 0; p < s.q_len; ++p)
      for (int64_t head = 0; head < hq; ++head) {
        const int64_t h = head / G, qrow = b * s.q_len + p;
        for (int64_t d = 0; d < D; ++d) qf32[d] = c.q_value(qrow, head, d);
        if (q_fp8) {
          float amax = 0.0f;
          for (float x : qf32) amax = std::max(amax, std::fabs(x));
          const float qs = std::max(amax / float(fmax), 1e-20f);
          for (int64_t d = 0; d < D; ++d) q[d] = double(fp8_to_f32(f32_to_fp8(qf32[d] / qs, qf), qf)) * qs;
        } else {
          for (int64_t d = 0; d < D; ++d) q[d] = qf32[d];
        }
        const int64_t visible = std::max<int64_t>(0, s.lens[b] - s.q_len + 1 + p);
        if (visible == 0) continue;
        sc.assign(visible, 0.0);
        double M = -std::numeric_limits<double>::infinity();
        for (int64_t t = 0; t < visible; ++t) {
          const int64_t blk = c.block_of(b, t), off = t % bs;
          double dot = 0;
          for (int64_t d = 0; d < D; ++d)
            dot += q[d] * double(fp8_to_f32(c.k[c.k_at(blk, h, d, off)], s.cache)) * kscale(blk, h, off);
          sc[t] = dot * scale;
          M = std::max(M, sc[t]);
        }
        double L = 0;
        for (int64_t t = 0; t < visible; ++t) L += std::exp(sc[t] - M);
        n.lse[qrow * hq + head] = M + std::log(L);
        const int64_t base = (qrow * hq + head) * D;
        for (int64_t t = 0; t < visible; ++t) {
          const int64_t blk = c.block_of(b, t), off = t % bs;
          const double e = std::exp(sc[t] - M), w = e / L;
          for (int64_t d = 0; d < D; ++d) {
            const double v = double(fp8_to_f32(c.v[c.v_at(blk, h, d, off)], s.cache)) * vscale(blk, h, off);
            n.out[base + d] += w * v;
            n.l1[base + d] += w * std::fabs(v);
            n.l2[base + d] += w * w * v * v;
            n.sub[base + d] += std::min(e, csub) * std::fabs(v) / L;
          }
        }
        for (int64_t d = 0; d < D; ++d) n.l2[base + d] = std::sqrt(n.l2[base + d]);
      }
  return n;
}

}  // namespace pav::reference::testing
