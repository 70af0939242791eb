// SPDX-License-Identifier: Apache-2.0
#pragma once
// The end-to-end reference: exact softmax attention over *given float* K, V and
// q (the unquantized source values a cache was quantized from), in fp64.
//
// reference::decode (decode.hpp) runs over the dequantized fp8 cache and so
// isolates the kernel's arithmetic; this one measures the whole pipeline
// (q rounding to bf16, fp8 Q/K/V/P quantization, partial rounding) against the
// values the model really computed with. K and V are not stored: the caller's
// `SourceChunkFn` writes them chunk by chunk, so memory stays bounded by the
// chunk size whatever the context (the drift sweep regenerates them from a
// counter-based generator).
//
// Semantics (docs/numerics.md): row p of a sequence with q_len positions
// sees tokens t < len - q_len + 1 + p; s_t = softmax_scale * q . k_t; the output
// is sum_t w_t v_t with w_t = exp(s_t - M)/L, exactly 0 in rows that see no
// token. Everything is accumulated in double; segments of one (sequence, KV
// head) are merged in double with the max rescaling.
//
// Header-only (inline): it needs no kernel code and no build change to use.
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "reference/decode.hpp"

namespace pav::reference {

// Writes the source K and V of tokens [t0, t0 + n) of (seq, kv_head) as [n, D]
// row-major floats into k and v. Called concurrently from several threads.
using SourceChunkFn =
    std::function<void(int64_t seq, int64_t kv_head, int64_t t0, int64_t n, float* k, float* v)>;

struct SourceGeometry {
  std::vector<int32_t> lens;  // context lengths (<= 0: nothing visible)
  int64_t q_len = 1, hkv = 1, group = 1, head_dim = 128;
  double softmax_scale = 0.0;  // 0 means 1/sqrt(head_dim)
  kernels::DType out_dtype = kernels::DType::bf16;  // of the kernel output compared against it
};

struct SourceOptions {
  int64_t chunk_tokens = 4096;  // tokens per SourceChunkFn call; bounds the buffers
  int64_t segment_chunks = 8;   // chunks per parallel task of one (sequence, KV head)
};

namespace source_detail {

// Online-softmax state of one segment: rows x (m, l, acc[D]).
struct SegmentState {
  std::vector<double> m, l, acc;
};

inline void attend_segment(const SourceGeometry& g, const float* q, const SourceChunkFn& chunk,
                           const SourceOptions& o, double scale, int64_t seq, int64_t h, int64_t t_begin,
                           int64_t t_end, SegmentState& st) {
  const int64_t D = g.head_dim, G = g.group, rows = g.q_len * G, Hq = g.hkv * G;
  const int64_t len = g.lens[seq];
  st.m.assign(rows, -std::numeric_limits<double>::infinity());
  st.l.assign(rows, 0.0);
  st.acc.assign(rows * D, 0.0);
  std::vector<double> qd(rows * D);
  for (int64_t p = 0; p < g.q_len; ++p)
    for (int64_t gg = 0; gg < G; ++gg)
      for (int64_t d = 0; d < D; ++d)
        qd[(p * G + gg) * D + d] = double(q[((seq * g.q_len + p) * Hq + h * G + gg) * D + d]);
  const int64_t chunk_n = std::max<int64_t>(o.chunk_tokens, 1);
  std::vector<float> k(chunk_n * D), v(chunk_n * D);
  std::vector<double> s(chunk_n);
  for (int64_t t0 = t_begin; t0 < t_end; t0 += chunk_n) {
    const int64_t n = std::min(chunk_n, t_end - t0);
    chunk(seq, h, t0, n, k.data(), v.data());
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t p = r / G;
      const int64_t visible = std::min<int64_t>(n, len - g.q_len + 1 + p - t0);
      if (visible <= 0) continue;
      const double* qr = &qd[r * D];
      double cmax = -std::numeric_limits<double>::infinity();
      for (int64_t i = 0; i < visible; ++i) {
        const float* kr = &k[i * D];
        double dot = 0.0;
        for (int64_t d = 0; d < D; ++d) dot += qr[d] * double(kr[d]);
        s[i] = dot * scale;
        cmax = std::max(cmax, s[i]);
      }
      const double m_new = std::max(st.m[r], cmax);
      const double alpha = st.l[r] > 0.0 ? std::exp(st.m[r] - m_new) : 0.0;
      double* acc = &st.acc[r * D];
      if (alpha != 1.0)
        for (int64_t d = 0; d < D; ++d) acc[d] *= alpha;
      double lsum = 0.0;
      for (int64_t i = 0; i < visible; ++i) {
        const double w = std::exp(s[i] - m_new);
        lsum += w;
        const float* vr = &v[i * D];
        for (int64_t d = 0; d < D; ++d) acc[d] += w * double(vr[d]);
      }
      st.l[r] = st.l[r] * alpha + lsum;
      st.m[r] = m_new;
    }
  }
}

}  // namespace source_detail

// q: [num_seqs * q_len, hkv * group, head_dim] floats, contiguous. Returns out
// and lse (fp64 computed, out rounded to float); the error-term arrays stay
// empty and the profile rounds nothing (Q as given, P unrounded, no partials),
// so reference::compare() applies the 16-bit-output floor |out - ref| <= atol +
// rtol*|ref| (g.out_dtype, bf16 or f16) against it. Throws
// std::invalid_argument on a geometry that is not a decode call.
inline ReferenceResult source_decode(const SourceGeometry& g, const float* q, const SourceChunkFn& chunk,
                                     const SourceOptions& o = {}) {
  if (g.lens.empty()) throw std::invalid_argument("reference::source_decode: no sequences");
  if (g.q_len < 1 || g.hkv < 1 || g.group < 1 || g.head_dim < 1)
    throw std::invalid_argument("reference::source_decode: q_len, hkv, group and head_dim must be >= 1");
  if (q == nullptr || !chunk) throw std::invalid_argument("reference::source_decode: q and chunk are required");
  if (g.out_dtype != kernels::DType::bf16 && g.out_dtype != kernels::DType::f16)
    throw std::invalid_argument("reference::source_decode: out_dtype must be bf16 or f16 (no error terms for f32)");
  if (o.chunk_tokens < 1 || o.segment_chunks < 1)
    throw std::invalid_argument("reference::source_decode: chunk_tokens and segment_chunks must be >= 1");
  const int64_t B = int64_t(g.lens.size()), D = g.head_dim, G = g.group, H = g.hkv, rows = g.q_len * G;
  const double scale = g.softmax_scale != 0.0 ? g.softmax_scale : 1.0 / std::sqrt(double(D));
  const int64_t seg_tokens = o.chunk_tokens * o.segment_chunks;

  // Tasks: (seq, h, segment). A sequence with no tokens has none: its rows see
  // no token and keep out 0 and lse -inf below.
  struct Task {
    int64_t seq, h, t0, t1;
  };
  std::vector<Task> tasks;
  std::vector<int64_t> first_task(B * H);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      first_task[b * H + h] = int64_t(tasks.size());
      const int64_t len = std::max<int64_t>(g.lens[b], 0);
      for (int64_t t0 = 0; t0 < len; t0 += seg_tokens) tasks.push_back({b, h, t0, std::min(len, t0 + seg_tokens)});
    }
  std::vector<source_detail::SegmentState> states(tasks.size());
  tbb::parallel_for(int64_t(0), int64_t(tasks.size()), [&](int64_t i) {
    const Task& t = tasks[i];
    source_detail::attend_segment(g, q, chunk, o, scale, t.seq, t.h, t.t0, t.t1, states[i]);
  });

  ReferenceResult r;
  r.num_seqs = B;
  r.q_len = g.q_len;
  r.hq = H * G;
  r.head_dim = D;
  r.out.assign(B * g.q_len * H * G * D, 0.0f);
  r.lse.assign(B * g.q_len * H * G, -std::numeric_limits<double>::infinity());
  r.profile = NumericsProfile{QQuant::none, PRound::none, kernels::DType::none};
  r.out_dtype = g.out_dtype;
  r.chunk_buffer_bytes = int64_t(2 * sizeof(float) * o.chunk_tokens * D + sizeof(double) * o.chunk_tokens);
  tbb::parallel_for(int64_t(0), B * H, [&](int64_t bh) {
    const int64_t b = bh / H, h = bh % H;
    const int64_t t_first = first_task[bh];
    const int64_t t_last = bh + 1 < B * H ? first_task[bh + 1] : int64_t(tasks.size());
    std::vector<double> o_row(D);
    for (int64_t row = 0; row < rows; ++row) {
      double M = -std::numeric_limits<double>::infinity();
      for (int64_t i = t_first; i < t_last; ++i)
        if (states[i].l[row] > 0.0) M = std::max(M, states[i].m[row]);
      if (M == -std::numeric_limits<double>::infinity()) continue;  // no visible token: 0, lse -inf
      double L = 0.0;
      std::fill(o_row.begin(), o_row.end(), 0.0);
      for (int64_t i = t_first; i < t_last; ++i) {
        if (!(states[i].l[row] > 0.0)) continue;
        const double w = std::exp(states[i].m[row] - M);
        L += w * states[i].l[row];
        for (int64_t d = 0; d < D; ++d) o_row[d] += w * states[i].acc[row * D + d];
      }
      const int64_t p = row / G, gg = row % G;
      const int64_t qrow = b * g.q_len + p, head = h * G + gg;
      for (int64_t d = 0; d < D; ++d) r.out[r.index(qrow, head, d)] = float(o_row[d] / L);
      r.lse[qrow * r.hq + head] = M + std::log(L);
    }
  });
  return r;
}

}  // namespace pav::reference
