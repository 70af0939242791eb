// SPDX-License-Identifier: Apache-2.0
// The math, per (sequence, KV head h, query row r = p*G + g), len the context length (docs/numerics.md):
//   scores   s_t = (q8_r . k8_t) * q_scale_r * softmax_scale * k_scale_t, visible for t < len - q_len + 1 + p only
//   partial  tiles [t0, t1): m = max s_t, l = sum exp(s_t - m), O = sum e^(m_t - m) P8_t v_scale_t v8_t / (FP8_MAX l),
//            P8_t = fp8(exp(s_t - m_t) * FP8_MAX), m_t the running max after t's tile (the online softmax)
//   merge    M = max m_p, w_p = l_p * exp(m_p - M), out = sum_p (w_p / sum w) * O_p; one partition: out = O
// (bf16 compute: q8 = q, q_scale = 1, P8_t = exp(s_t - m_t), FP8_MAX = 1. A row that sees no token outputs 0.)
#include "kernels/cpu/decode_cpu.hpp"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/codecs.hpp"
#include "kernels/split_rules.hpp"

namespace pav::kernels::cpu {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Per-call constants shared by every task.
struct Ctx {
  const DecodeCall& c;
  CallDims d;
  bool fp8_compute;
  DType fp8;     // cache flavour (== compute flavour under fp8 compute)
  float fp8_max; // of the compute flavour
  std::array<float, 256> lut;  // fp8 code -> f32 for the cache flavour

  explicit Ctx(const DecodeCall& call)
      : c(call), d(dims_of(call)), fp8_compute(is_fp8(call.opt.compute)), fp8(call.k_cache.dtype),
        fp8_max(is_fp8(call.opt.compute) ? fp8_max_of(call.opt.compute) : 0.0f) {
    for (int i = 0; i < 256; ++i) lut[i] = fp8_to_f32(uint8_t(i), fp8);
  }
  static float fp8_max_of(DType t) { return ::pav::kernels::fp8_max(t); }

  int32_t len(int64_t seq) const { return c.context_lens.as<const int32_t>()[seq]; }
  int32_t block(int64_t seq, int64_t i) const {
    return c.block_tables.as<const int32_t>()[seq * c.block_tables.stride[0] + i];
  }
  float load_q(int64_t qrow, int64_t head, int64_t dd) const {
    const int64_t off = qrow * c.q.stride[0] + head * c.q.stride[1] + dd;
    const uint16_t h = c.q.as<const uint16_t>()[off];
    return c.q.dtype == DType::bf16 ? bf16_to_f32(h) : f16_to_f32(h);
  }
  void store_out(int64_t qrow, int64_t head, int64_t dd, float v) const {
    const int64_t off = qrow * c.out.stride[0] + head * c.out.stride[1] + dd;
    c.out.as<uint16_t>()[off] = c.out.dtype == DType::bf16 ? f32_to_bf16(v) : f32_to_f16(v);
  }
  // Per-token or per-tensor scale; 1 when absent.
  float scale(const TensorView& s, int64_t blk, int64_t h, int64_t off) const {
    if (!s.present()) return 1.0f;
    const float* p = s.as<const float>();
    if (s.numel() == 1) return p[0];
    return p[(blk * d.hkv + h) * d.block_size + off];
  }
  bool per_token_v() const { return c.v_scale.present() && c.v_scale.numel() > 1; }
};

// Query rows of one (sequence, KV head), prepared for the QK product: under fp8
// compute each row is quantized to fp8 with q_scale = max(absmax/FP8_MAX, 1e-20).
struct QRows {
  std::vector<float> q;      // [rows, D] values the product uses (dequantized fp8 codes or q)
  std::vector<float> scale;  // [rows] q_scale (1 under bf16 compute)
};

QRows prepare_q(const Ctx& x, int64_t seq, int64_t h) {
  const int64_t D = x.d.head_dim, G = x.d.group;
  QRows r;
  r.q.resize(x.d.rows * D);
  r.scale.assign(x.d.rows, 1.0f);
  for (int64_t p = 0; p < x.d.q_len; ++p)
    for (int64_t g = 0; g < G; ++g) {
      const int64_t row = p * G + g;
      float* dst = &r.q[row * D];
      float absmax = 0.0f;
      for (int64_t dd = 0; dd < D; ++dd) {
        dst[dd] = x.load_q(seq * x.d.q_len + p, h * G + g, dd);
        absmax = std::max(absmax, std::fabs(dst[dd]));
      }
      if (x.fp8_compute) {
        const float qs = std::max(absmax / x.fp8_max, 1e-20f);
        r.scale[row] = qs;
        for (int64_t dd = 0; dd < D; ++dd)
          dst[dd] = fp8_to_f32(f32_to_fp8(dst[dd] / qs, x.c.opt.compute), x.c.opt.compute);
      }
    }
  return r;
}

// Prepared Q of every (sequence, KV head), built once per call rather than once
// per partition (a planned call has hundreds of partitions per head).
std::vector<QRows> prepare_all_q(const Ctx& x) {
  const int64_t B = x.d.num_seqs, H = x.d.hkv;
  std::vector<QRows> all(size_t(B * H));
  tbb::parallel_for(int64_t(0), B * H, [&](int64_t sh) { all[size_t(sh)] = prepare_q(x, sh / H, sh % H); });
  return all;
}

// Dot product with eight fixed lanes: vectorizes and keeps one summation order.
inline float dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t i = 0; i < n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// Running state of one partition: acc holds the unnormalized PV sum.
struct PartState {
  std::vector<float> acc;  // [rows, D]
  std::vector<float> m, l; // [rows]
};

// Attends one partition of (seq, h) over tiles [tile0, tile1): tile by tile with
// an online max; P of each tile is quantized against the running max after it.
void attend(const Ctx& x, int64_t seq, int64_t h, const QRows& qr, int64_t tile0, int64_t tile1,
            PartState& st) {
  const int64_t D = x.d.head_dim, rows = x.d.rows, G = x.d.group, bs = x.d.block_size;
  const int64_t len = x.len(seq);
  st.acc.assign(rows * D, 0.0f);
  st.m.assign(rows, kNegInf);
  st.l.assign(rows, 0.0f);
  // Tile buffers reused by every partition a thread attends: a planned call has
  // hundreds of short partitions, and fresh zeroed 128 KB buffers for each cost
  // a fifth of the call. Every element is written before it is read.
  thread_local std::vector<float> tl_k, tl_v, tl_kscale, tl_vscale, tl_s, tl_wt;
  for (auto [v, n] : {std::pair{&tl_k, kTileTokens * D}, std::pair{&tl_v, kTileTokens * D},
                      std::pair{&tl_kscale, int64_t(kTileTokens)}, std::pair{&tl_vscale, int64_t(kTileTokens)},
                      std::pair{&tl_s, rows * kTileTokens}, std::pair{&tl_wt, int64_t(kTileTokens)}})
    if (int64_t(v->size()) < n) v->resize(size_t(n));
  // Plain pointers in the loops: the compiler keeps them in registers.
  float* const ktile = tl_k.data();
  float* const vtile = tl_v.data();
  float* const kscale = tl_kscale.data();
  float* const vscale = tl_vscale.data();
  float* const s = tl_s.data();
  float* const wt = tl_wt.data();
  const bool per_token_v = x.per_token_v();
  const float vs_tensor = per_token_v ? 1.0f : x.scale(x.c.v_scale, 0, 0, 0);
  const uint8_t* kc = x.c.k_cache.as<const uint8_t>();
  const uint8_t* vc = x.c.v_cache.as<const uint8_t>();
  // Rows see tokens t < len - q_len + 1 + p; the last row sees the most.
  const int64_t row_limit_max = len;
  for (int64_t tile = tile0; tile < tile1; ++tile) {
    const int64_t t0 = tile * kTileTokens;
    const int64_t t1 = std::min<int64_t>(t0 + kTileTokens, row_limit_max);
    if (t1 <= t0) break;
    const int64_t n = t1 - t0;
    // Gather the tile: K rows are 16-byte runs per head-dim group; V is strided
    // by block_size (plain) or by 16 (trans).
    const int64_t hkv = x.d.hkv;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t t = t0 + i, blk = x.block(seq, t / bs), off = t % bs;
      float* kr = &ktile[i * D];
      float* vr = &vtile[i * D];
      const uint8_t* kb = kc + (blk * hkv + h) * D * bs + off * 16;
      for (int64_t g = 0; g < D / 16; ++g) {
        const uint8_t* src = kb + g * bs * 16;
        for (int j = 0; j < 16; ++j) kr[g * 16 + j] = x.lut[src[j]];
      }
      if (x.d.v_layout == VLayout::plain) {
        const uint8_t* vb = vc + (blk * hkv + h) * D * bs + off;
        for (int64_t dd = 0; dd < D; ++dd) vr[dd] = x.lut[vb[dd * bs]];
      } else {
        const uint8_t* vb = vc + ((blk * hkv + h) * (bs / 16) + off / 16) * D * 16 + off % 16;
        for (int64_t dd = 0; dd < D; ++dd) vr[dd] = x.lut[vb[dd * 16]];
      }
      kscale[i] = x.scale(x.c.k_scale, blk, h, off);
      vscale[i] = per_token_v ? x.scale(x.c.v_scale, blk, h, off) : 1.0f;
    }
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t p = r / G;
      const int64_t visible = std::min<int64_t>(n, len - x.d.q_len + 1 + p - t0);
      if (visible <= 0) continue;
      const float* q = &qr.q[r * D];
      const float qs = qr.scale[r] * x.d.softmax_scale;
      float* sr = &s[r * kTileTokens];
      float tmax = kNegInf;
      for (int64_t i = 0; i < visible; ++i) {
        sr[i] = dot(q, &ktile[i * D], D) * qs * kscale[i];
        tmax = std::max(tmax, sr[i]);
      }
      const float m_new = std::max(st.m[r], tmax);
      const float alpha = st.m[r] == kNegInf ? 0.0f : std::exp(st.m[r] - m_new);
      float* acc = &st.acc[r * D];
      if (alpha != 1.0f)
        for (int64_t dd = 0; dd < D; ++dd) acc[dd] *= alpha;
      float lsum = 0.0f;
      for (int64_t i = 0; i < visible; ++i) {
        const float pt = std::exp(sr[i] - m_new);
        lsum += pt;
        const float w = x.fp8_compute
                            ? fp8_to_f32(f32_to_fp8(pt * x.fp8_max, x.c.opt.compute), x.c.opt.compute)
                            : pt;
        wt[i] = w * vscale[i];
      }
      // PV: four tokens per pass over the accumulator row, still added one
      // token at a time, so the rounding sequence is the plain token order.
      int64_t i = 0;
      for (; i + 4 <= visible; i += 4) {
        const float w0 = wt[i], w1 = wt[i + 1], w2 = wt[i + 2], w3 = wt[i + 3];
        const float *v0 = &vtile[i * D], *v1 = v0 + D, *v2 = v1 + D, *v3 = v2 + D;
        for (int64_t dd = 0; dd < D; ++dd) {
          float a = acc[dd];
          a += w0 * v0[dd];
          a += w1 * v1[dd];
          a += w2 * v2[dd];
          a += w3 * v3[dd];
          acc[dd] = a;
        }
      }
      for (; i < visible; ++i) {
        const float* vr = &vtile[i * D];
        for (int64_t dd = 0; dd < D; ++dd) acc[dd] += wt[i] * vr[dd];
      }
      st.l[r] = st.l[r] * alpha + lsum;
      st.m[r] = m_new;
    }
  }
  // Epilogue: undo the P scale and the per-tensor V scale.
  const float epi = vs_tensor / (x.fp8_compute ? x.fp8_max : 1.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t dd = 0; dd < D; ++dd) st.acc[r * D + dd] *= epi;
}

float load_partial(const TensorView& t, int64_t i) {
  switch (t.dtype) {
    case DType::f32: return t.as<const float>()[i];
    case DType::bf16: return bf16_to_f32(t.as<const uint16_t>()[i]);
    default: return f16_to_f32(t.as<const uint16_t>()[i]);
  }
}
void store_partial(const TensorView& t, int64_t i, float v) {
  switch (t.dtype) {
    case DType::f32: t.as<float>()[i] = v; break;
    case DType::bf16: t.as<uint16_t>()[i] = f32_to_bf16(v); break;
    default: t.as<uint16_t>()[i] = f32_to_f16(v); break;
  }
}

// Writes a partition's normalized partial and its m, l into scratch slot `slot`.
void store_slot(const Ctx& x, const Scratch& sc, int64_t slot, const PartState& st) {
  const int64_t D = x.d.head_dim, rows = x.d.rows;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t row = slot * rows + r;
    const float inv = st.l[r] > 0.0f ? 1.0f / st.l[r] : 0.0f;
    for (int64_t dd = 0; dd < D; ++dd) store_partial(sc.partial, row * D + dd, st.acc[r * D + dd] * inv);
    sc.m.as<float>()[row] = st.m[r];
    sc.l.as<float>()[row] = st.l[r];
  }
}

// Writes one unsplit partition straight to the output.
void store_direct(const Ctx& x, int64_t seq, int64_t h, const PartState& st) {
  const int64_t D = x.d.head_dim, G = x.d.group;
  for (int64_t r = 0; r < x.d.rows; ++r) {
    const int64_t p = r / G, g = r % G;
    const float inv = st.l[r] > 0.0f ? 1.0f / st.l[r] : 0.0f;
    for (int64_t dd = 0; dd < D; ++dd)
      x.store_out(seq * x.d.q_len + p, h * G + g, dd, st.l[r] > 0.0f ? st.acc[r * D + dd] * inv : 0.0f);
  }
}

// Merges `count` partitions at slots base..base+count-1 for (seq, h). With
// ceiling <= 64 the bounded variant walks `ceiling` slots and masks reads past
// count to zero weight, so an out-of-range slot can never wrap into valid data.
void reduce_one(const Ctx& x, const Scratch& sc, int64_t seq, int64_t h, int64_t base, int64_t count,
                int64_t ceiling) {
  const int64_t D = x.d.head_dim, G = x.d.group, rows = x.d.rows;
  const bool bounded = reduce_uses_bounded(ceiling);
  const int64_t walk = bounded ? ceiling : count;
  std::vector<float> w(walk), o(D);
  for (int64_t r = 0; r < rows; ++r) {
    float M = kNegInf;
    for (int64_t p = 0; p < walk; ++p) {
      const bool in = p < count;
      const float mp = in ? sc.m.as<const float>()[(base + p) * rows + r] : kNegInf;
      M = std::max(M, mp);
    }
    if (M == kNegInf) M = 0.0f;
    float L = 0.0f;
    for (int64_t p = 0; p < walk; ++p) {
      const bool in = p < count;
      const int64_t row = (base + p) * rows + r;
      const float lp = in ? sc.l.as<const float>()[row] : 0.0f;
      const float mp = in ? sc.m.as<const float>()[row] : kNegInf;
      w[p] = lp > 0.0f ? lp * std::exp(mp - M) : 0.0f;
      L += w[p];
    }
    std::fill(o.begin(), o.end(), 0.0f);
    if (L > 0.0f) {
      for (int64_t p = 0; p < walk; ++p) {
        if (w[p] == 0.0f) continue;
        const float wp = w[p] / L;
        const int64_t row = (base + p) * rows + r;
        for (int64_t dd = 0; dd < D; ++dd) o[dd] += wp * load_partial(sc.partial, row * D + dd);
      }
    }
    const int64_t pos = r / G, g = r % G;
    for (int64_t dd = 0; dd < D; ++dd) x.store_out(seq * x.d.q_len + pos, h * G + g, dd, o[dd]);
  }
}

void fill_nan_out(const Ctx& x, int64_t seq) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t p = 0; p < x.d.q_len; ++p)
    for (int64_t hq = 0; hq < x.d.hq; ++hq)
      for (int64_t dd = 0; dd < x.d.head_dim; ++dd) x.store_out(seq * x.d.q_len + p, hq, dd, nan);
}

}  // namespace

void uniform_decode(const DecodeCall& call, const Scratch& scratch) {
  const Ctx x(call);
  const int64_t splits = uniform_splits(call);
  const int64_t B = x.d.num_seqs, H = x.d.hkv;
  const std::vector<QRows> q_all = prepare_all_q(x);
  tbb::parallel_for(int64_t(0), B * H * splits, [&](int64_t task) {
    const int64_t k = task % splits, sh = task / splits, seq = sh / H, h = sh % H;
    const int64_t tiles = plan_tiles(x.len(seq));
    const int64_t per = ceil_div64(std::max<int64_t>(tiles, 1), splits);
    const int64_t t0 = std::min(k * per, tiles), t1 = std::min((k + 1) * per, tiles);
    const QRows& qr = q_all[size_t(sh)];
    PartState st;
    attend(x, seq, h, qr, t0, t1, st);
    if (splits == 1)
      store_direct(x, seq, h, st);
    else
      store_slot(x, scratch, task, st);
  });
  if (splits == 1) return;
  tbb::parallel_for(int64_t(0), B * H, [&](int64_t sh) {
    reduce_one(x, scratch, sh / H, sh % H, sh * splits, splits, splits);
  });
}

DecodeResult planned_decode(const DecodeCall& call, const PlanView& plan, const Scratch& scratch) {
  const Ctx x(call);
  const int64_t B = x.d.num_seqs, H = x.d.hkv, cap = plan.capacity;
  const int32_t* w = plan.work_info;
  const int32_t* ri = plan.reduce_info;
  std::vector<uint8_t> stale(B, 0), attended(size_t(cap), 0);
  DecodeResult res;
  // Freshness, per sequence: every row of its range (task_row_stale), and tasks
  // for a sequence with tokens. Only the rows of fresh ranges are attended.
  for (int64_t b = 0; b < B; ++b) {
    const int64_t first = ri[2 * b], count = ri[2 * b + 1];
    if (range_stale(first, count, cap, x.len(b))) {
      ++res.stale_rows;
      stale[b] = 1;
      continue;
    }
    for (int64_t j = 0; j < count; ++j)
      if (task_row_stale(w, cap, first, count, j, int32_t(b), x.len(b))) {
        ++res.stale_tasks;
        stale[b] = 1;
      }
    if (!stale[b])
      std::fill_n(attended.begin() + first, count, uint8_t(1));  // fresh: first + count <= cap
  }
  const std::vector<QRows> q_all = prepare_all_q(x);
  tbb::parallel_for(int64_t(0), H * cap, [&](int64_t task) {
    const int64_t h = task / cap, i = task % cap;
    const int32_t* row = w + 4 * i;
    if (!attended[size_t(i)]) return;
    const QRows& qr = q_all[size_t(row[0] * H + h)];
    PartState st;
    attend(x, row[0], h, qr, row[1], row[2], st);
    store_slot(x, scratch, h * cap + i, st);
  });
  tbb::parallel_for(int64_t(0), B * H, [&](int64_t sh) {
    const int64_t seq = sh / H, h = sh % H;
    if (stale[seq]) return;
    reduce_one(x, scratch, seq, h, h * cap + ri[2 * seq], ri[2 * seq + 1], plan.max_partitions);
  });
  for (int64_t b = 0; b < B; ++b)
    if (stale[b]) fill_nan_out(x, b);
  if (res.stale_tasks || res.stale_rows) res.status = DecodeStatus::stale_plan;
  return res;
}

}  // namespace pav::kernels::cpu
