// SPDX-License-Identifier: Apache-2.0
// The math, per (sequence, KV head, query row r = p*G + g), pos = len - q_len + p, in T = fp32 or fp64:
//   scores   s_t = softmax_scale * (q_r . k_t) * k_scale_t in double, q_r as the profile says; then the variant's
//            s_t = cap * tanh(s_t / cap) and s_t -= slope * (pos - t)
//   masking  t visible iff first_key(pos) <= t <= pos; any other t gets weight exactly 0, never 0 * exp(...)
//   segment  m = max s_t, l = sum exp(s_t - m), acc = sum exp(s_t - m) * v_scale_t * v_t (online over chunks)
//   merge    M = max(m_a, m_b), l = l_a e^(m_a - M) + l_b e^(m_b - M), acc likewise; out = acc / (l + e^(sink - m)),
//            lse = m + log(l + e^(sink - m)), the sink term absent without sinks
#include "reference/decode.hpp"

#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>

#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <tuple>
#include <utility>

#include "kernels/cache_format.hpp"
#include "kernels/codecs.hpp"

namespace pav::reference {
namespace {

using kernels::DecodeCall;
using kernels::DType;
using kernels::TensorView;
using kernels::VLayout;

[[noreturn]] void reject(const std::string& what) {
  throw std::invalid_argument("reference::decode: " + what);
}

int64_t count_of(const TensorView& t) {
  if (t.rank == 0) return 0;
  int64_t n = 1;
  for (int i = 0; i < t.rank; ++i) n *= t.shape[i];
  return n;
}

// A K or V scale: absent (1), per tensor ([1]) or per token ([nb, Hkv, bs]).
struct ScaleRef {
  const float* p = nullptr;
  bool per_token = false;
  float tensor = 1.0f;
  int64_t s0 = 0, s1 = 0, s2 = 0;
  float at(int64_t blk, int64_t h, int64_t off) const { return p[blk * s0 + h * s1 + off * s2]; }
};

struct Geometry {
  int64_t num_seqs = 0, q_len = 1, hq = 0, hkv = 0, D = 0, G = 0, rows = 0;
  int64_t Dv = 0;  // V's and out's head dim: D but for an MLA cache (D_v < D)
  int64_t bs = 0, num_blocks = 0;
  VLayout layout = VLayout::unknown;
  DType cache = DType::none;
  ScaleRef ks, vs;
  // The cache format; `packed_fp8` marks the packed e4m3 caches that the
  // vectorized gather reads (any other format is read element by element).
  kernels::CacheShape shape;
  kernels::ScaleKind k_kind = kernels::ScaleKind::none, v_kind = kernels::ScaleKind::none;
  bool packed_fp8 = false;
  std::vector<double> sinks, slopes;  // per query head; empty when the variant has none
};

// A [Hq] f32 tensor of the attention variant, read into doubles (finite values only).
std::vector<double> per_head(const TensorView& t, const Geometry& g, const char* name) {
  std::vector<double> v;
  if (!t.present()) return v;
  if (t.dtype != DType::f32 || t.data == nullptr || t.rank != 1 || t.shape[0] != g.hq || t.stride[0] < 0)
    reject(std::string(name) + " must be [Hq] f32 with data");
  for (int64_t i = 0; i < g.hq; ++i) {
    const float x = t.as<const float>()[i * t.stride[0]];
    if (!std::isfinite(x)) reject(std::string(name) + "[" + std::to_string(i) + "] is not finite");
    v.push_back(double(x));
  }
  return v;
}

ScaleRef scale_of(const TensorView& s, const Geometry& g, const char* name) {
  ScaleRef r;
  if (!s.present()) return r;
  if (s.dtype != DType::f32 || s.data == nullptr) reject(std::string(name) + " is not f32");
  r.p = s.as<const float>();
  if (count_of(s) == 1) {
    r.tensor = r.p[0];
    return r;
  }
  if (s.rank != 3 || s.shape[0] < g.num_blocks || s.shape[1] != g.hkv || s.shape[2] != g.bs)
    reject(std::string(name) + " is neither [1] nor [num_blocks, Hkv, block_size]");
  r.per_token = true;
  r.s0 = s.stride[0];
  r.s1 = s.stride[1];
  r.s2 = s.stride[2];
  return r;
}

void require_strides(const TensorView& t, const char* name) {
  for (int i = 0; i < t.rank; ++i)
    if (t.stride[i] < 0)
      reject(std::string(name) + ".stride[" + std::to_string(i) + "] = " + std::to_string(t.stride[i]) +
             " is negative");
}

void require_data(const TensorView& t, const char* name) {
  if (t.data == nullptr) reject(std::string(name) + " has no data");
}

// Options the call's views do not carry enough to compute (no ALiBi slopes, no
// sink logits, no Q scale) or that the kernels' contract leaves undefined (the
// window's edge convention): refused by name rather than ignored.
void reject_unsupported_options(const kernels::DecodeOptions& o) {
  if (o.alibi) reject("opt.alibi is set: ALiBi slopes are not part of the call, so the reference cannot compute it");
  if (o.sinks) reject("opt.sinks is set: sink logits are not part of the call, so the reference cannot compute them");
  if (o.sliding_window != 0)
    reject("opt.sliding_window = " + std::to_string(o.sliding_window) +
           ": the reference computes full causal attention only");
  if (o.q_prequantized)
    reject("opt.q_prequantized is set: the call carries no Q scale, so the reference cannot dequantize Q");
  if (!std::isfinite(o.softmax_scale)) reject("opt.softmax_scale is not finite");
}

Geometry geometry_of(const DecodeCall& c) {
  Geometry g;
  reject_unsupported_options(c.opt);
  if (c.q.rank != 3) reject("q must be rank 3");
  require_data(c.q, "q");
  if (c.q.dtype != DType::bf16 && c.q.dtype != DType::f16) reject("q must be bf16 or f16");
  if (c.out.present() && c.out.dtype != DType::bf16 && c.out.dtype != DType::f16 && c.out.dtype != DType::f32)
    reject("out must be bf16, f16 or f32");
  if (c.context_lens.rank != 1 || c.context_lens.dtype != DType::i32) reject("context_lens must be [num_seqs] i32");
  require_data(c.context_lens, "context_lens");
  require_strides(c.q, "q");
  g.num_seqs = c.context_lens.shape[0];
  g.q_len = c.q_len;
  g.hq = c.q.shape[1];
  g.D = c.q.shape[2];
  if (g.q_len < 1) reject("q_len must be >= 1");
  if (g.D <= 0 || g.D % 16 != 0) reject("head_dim must be a positive multiple of 16");
  require_data(c.k_cache, "k_cache");
  require_data(c.v_cache, "v_cache");
  require_strides(c.k_cache, "k_cache");
  require_strides(c.v_cache, "v_cache");
  require_strides(c.context_lens, "context_lens");
  require_strides(c.k_scale, "k_scale");
  require_strides(c.v_scale, "v_scale");
  // The cache format's rules (kernels/cache_format.hpp), strides allowed.
  if (const std::string why = kernels::cache_views_problem(c, g.D, kernels::StrideRule::any, g.shape); !why.empty()) reject(why);
  g.hkv = g.shape.hkv;
  g.Dv = g.shape.v_head_dim;
  g.bs = g.shape.page_size;
  g.num_blocks = g.shape.pages;
  g.cache = g.shape.dtype;
  g.layout = g.shape.v_layout;
  if (g.hkv <= 0 || g.hq % g.hkv != 0) reject("Hq must be a multiple of Hkv");
  if (c.q.shape[0] != g.num_seqs * g.q_len) reject("q.shape[0] must be num_seqs*q_len");
  if (c.page_table == kernels::PageTable::block_table) {
    require_data(c.block_tables, "block_tables");
    require_strides(c.block_tables, "block_tables");
    if (c.block_tables.rank != 2 || c.block_tables.dtype != DType::i32)
      reject("block_tables must be [num_seqs, max_blocks] i32");
    if (c.block_tables.shape[0] < g.num_seqs) reject("block_tables has fewer rows than num_seqs");
  }
  if (const std::string why = kernels::page_table_problem(c, g.num_blocks, g.bs, {.negative_empty = true, .any_strides = true}); !why.empty()) reject(why);
  g.G = g.hq / g.hkv;
  g.rows = g.q_len * g.G;
  for (const auto& [t, kind, name] : {std::tuple{&c.k_scale, &g.k_kind, "k_scale"}, std::tuple{&c.v_scale, &g.v_kind, "v_scale"}})
    if (const std::string why = kernels::scale_view_problem(*t, g.shape, *kind, name); !why.empty()) reject(why);
  g.packed_fp8 = g.shape.layout == kernels::CacheLayout::packed && kernels::is_fp8(g.cache) &&
                 g.k_kind != kernels::ScaleKind::per_head && g.v_kind != kernels::ScaleKind::per_head;
  if (g.packed_fp8) {
    g.ks = scale_of(c.k_scale, g, "k_scale");
    g.vs = scale_of(c.v_scale, g, "v_scale");
  }
  const kernels::AttentionVariant& av = c.variant;
  if (!av.window_valid()) reject("variant.window_left = " + std::to_string(av.window_left) + " (expected -1 or >= 0)");
  if (!av.soft_cap_valid()) reject("variant.soft_cap must be 0 (off) or finite and positive");
  g.sinks = per_head(av.sinks, g, "variant.sinks");
  g.slopes = per_head(av.alibi_slopes, g, "variant.alibi_slopes");
  return g;
}

float load_half(const TensorView& t, int64_t off) {
  const uint16_t h = t.as<const uint16_t>()[off];
  return t.dtype == DType::bf16 ? kernels::bf16_to_f32(h) : kernels::f16_to_f32(h);
}

// fp8 code -> float by arithmetic, branch-free so the 16-byte loops vectorize
// (a table lookup per byte cost more than the GEMMs). Checked against the
// codec for all 256 codes when constructed, decoded in one call as the
// reference's loops decode a row.
class Fp8Decoder {
 public:
  explicit Fp8Decoder(DType flavour) {
    const kernels::Fp8Format f = kernels::fp8_format(flavour);
    exp_bits_ = uint32_t(127 - f.bias) << 23;
    sub_scale_ = std::ldexp(1.0f, 1 - f.bias - 3);
    fnuz_ = f.fnuz;
    std::array<uint8_t, 256> codes;
    for (size_t i = 0; i < codes.size(); ++i) codes[i] = uint8_t(i);
    std::array<float, codes.size()> got;
    decode(codes.data(), int64_t(codes.size()), 1.0f, got.data());
    for (size_t i = 0; i < codes.size(); ++i) {
      const float want = kernels::fp8_to_f32(uint8_t(i), flavour);
      if (!(got[i] == want || (std::isnan(got[i]) && std::isnan(want))) || std::signbit(got[i]) != std::signbit(want))
        throw std::logic_error("reference: fp8 decoder disagrees with the codec at code " + std::to_string(i));
    }
  }
  // dst[j] = value(src[j]) * scale.
  void decode(const uint8_t* src, int64_t n, float scale, float* dst) const {
    if (fnuz_) {
      for (int64_t j = 0; j < n; ++j) dst[j] = value<true>(src[j]) * scale;
    } else {
      for (int64_t j = 0; j < n; ++j) dst[j] = value<false>(src[j]) * scale;
    }
  }

 private:
  // Bit selects only: a data-dependent branch per byte mispredicts on the sign.
  template <bool kFnuz>
  float value(uint32_t b) const {
    const uint32_t mag = b & 0x7fu;
    // Normal: exponent field and 3 mantissa bits moved into a float's fields, rebiased.
    const uint32_t normal = (mag << 20) + exp_bits_;
    const uint32_t sub = kernels::f32_bits(float(int32_t(mag & 7u)) * sub_scale_);
    const uint32_t is_normal = 0u - uint32_t(mag > 7u);
    uint32_t bits = ((normal & is_normal) | (sub & ~is_normal)) | ((b & 0x80u) << 24);
    const uint32_t is_nan = 0u - uint32_t(kFnuz ? b == 0x80u : mag == 0x7fu);
    bits = (bits & ~is_nan) | (0x7fc00000u & is_nan);
    return kernels::f32_from_bits(bits);
  }
  uint32_t exp_bits_;
  float sub_scale_;
  bool fnuz_;
};

template <class T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;  // column-major
template <class T>
using Vec = Eigen::Matrix<T, Eigen::Dynamic, 1>;

// Running sums of one (sequence, KV head) over a token range, in units of the
// running max m: l = sum p, acc = sum p v, l1 = sum p|v|, l2 = sum p^2 v^2,
// sub >= sum min(p, c)|v| (see the rescale in attend_chunk).
template <class T>
struct State {
  Vec<T> m, l;
  Vec<double> smax;  // the largest |scaled logit| seen per row (error terms)
  Mat<T> acc, l1, l2, sub;
  void reset(int64_t rows, int64_t D, bool terms) {
    m.setConstant(rows, -std::numeric_limits<T>::infinity());
    l.setZero(rows);
    acc.setZero(rows, D);
    if (terms) {
      smax.setZero(rows);
      l1.setZero(rows, D);
      l2.setZero(rows, D);
      sub.setZero(rows, D);
    }
  }
};

// Scores are computed in double whatever T is. An fp32 score carries an error
// of a few ulps of its magnitude that depends on the GEMM's summation order
// (Eigen blocks columns unevenly), and exp() turns it into a relative weight
// error: at a logit of 4000 (a sentinel key against a D = 512 query) two ulps
// are 1e-3, which moved the mean of two exactly tied tokens by 0.6%. In double
// the same error is 1e-12; the softmax itself stays in T.
using Score = double;

// Chunk buffers of one worker; sized once for the largest chunk of the call.
template <class T>
struct Buffers {
  Mat<Score> k;       // [D, chunk]: token columns
  Mat<Score> scores;  // [rows, chunk] Q.K
  Mat<T> v;     // [chunk, D]
  Mat<T> vabs, v2;
  Mat<T> s;     // [rows, chunk] scores minus the running max, then P
  Mat<T> pp;    // [2*rows, chunk]: P over min(P, c)
  Mat<T> p2;    // [rows, chunk]
  Mat<T> tmp;   // [2*rows, D] (terms), else [rows, D]: products
  std::vector<float> ktok, vtok;  // per-token scales of the chunk
  std::vector<float> stage;       // decoded fp8 values of one block, before their scale
  std::vector<uint8_t> strided;   // strided cache bytes gathered before decoding
  Vec<T> alpha, m_new;
  Mat<Score> q;  // [rows, D] the (transformed, pre-scaled) query rows
  int64_t cap = 0;

  // D: Q's and K's head dim; Dv: V's.
  void ensure(int64_t rows, int64_t D, int64_t Dv, int64_t chunk, bool terms) {
    if (cap == chunk && q.rows() == rows && q.cols() == D && v.cols() == Dv) return;
    cap = chunk;
    k.resize(D, chunk);
    scores.resize(rows, chunk);
    v.resize(chunk, Dv);
    s.resize(rows, chunk);
    ktok.resize(chunk);
    vtok.resize(chunk);
    alpha.resize(rows);
    m_new.resize(rows);
    q.resize(rows, D);
    tmp.resize(terms ? 2 * rows : rows, Dv);
    if (terms) {
      vabs.resize(chunk, Dv);
      v2.resize(chunk, Dv);
      pp.resize(2 * rows, chunk);
      p2.resize(rows, chunk);
    }
  }
  int64_t bytes() const {
    const int64_t n = v.size() + vabs.size() + v2.size() + s.size() + pp.size() + p2.size() + tmp.size() +
                      alpha.size() + m_new.size();
    return n * int64_t(sizeof(T)) + (k.size() + scores.size() + q.size()) * int64_t(sizeof(Score)) +
           int64_t(sizeof(float) * (ktok.size() + vtok.size() + stage.size())) + int64_t(strided.size());
  }
};

template <class T>
struct Core {
  const DecodeCall& c;
  const Geometry& g;
  bool q_fp8;
  bool q_cast;  // Q cast to the cache's dtype, unscaled
  DType q_flavour;
  T softmax_scale;
  T sub_c;  // P's subnormal absolute error bound (units of the max)
  bool terms;
  Fp8Decoder fp8;

  Core(const DecodeCall& call, const Geometry& geo, const NumericsProfile& profile, const ReferenceOptions& opt)
      : c(call), g(geo), fp8(geo.cache) {
    q_fp8 = profile.q_quant == QQuant::fp8_per_row;
    q_cast = profile.q_quant == QQuant::cache_dtype;
    q_flavour = quantization_flavour(call);
    softmax_scale = call.opt.softmax_scale != 0.0f ? T(call.opt.softmax_scale)
                                                   : T(1) / std::sqrt(T(g.D));
    terms = opt.error_terms;
    sub_c = T(p_subnormal_error(profile.p_round, q_flavour));
  }

  int32_t len(int64_t seq) const { return c.context_lens.as<const int32_t>()[seq * c.context_lens.stride[0]]; }
  // The i-th page of a sequence (every entry was checked by page_table_problem).
  int64_t block(int64_t seq, int64_t i) const { return kernels::page_of(c, seq, i); }

  // Query rows r = p*G + g of KV head h, quantized as the profile says, times softmax_scale.
  void load_q(int64_t seq, int64_t h, Mat<Score>& q) const {
    std::vector<float> row(g.D), codes(g.D);
    for (int64_t p = 0; p < g.q_len; ++p)
      for (int64_t gg = 0; gg < g.G; ++gg) {
        const int64_t r = p * g.G + gg;
        const int64_t base = (seq * g.q_len + p) * c.q.stride[0] + (h * g.G + gg) * c.q.stride[1];
        for (int64_t d = 0; d < g.D; ++d) row[d] = load_half(c.q, base + d * c.q.stride[2]);
        if (q_fp8) {
          const Score qs = Score(quantize_q_row(row.data(), g.D, q_flavour, codes.data()));
          for (int64_t d = 0; d < g.D; ++d) q(r, d) = Score(codes[d]) * qs * softmax_scale;
        } else if (q_cast) {
          uint8_t e[2];
          for (int64_t d = 0; d < g.D; ++d) {
            kernels::put_cache_element(g.cache, row[d], e);
            q(r, d) = Score(kernels::cache_element_value(g.cache, e)) * softmax_scale;
          }
        } else {
          for (int64_t d = 0; d < g.D; ++d) q(r, d) = Score(row[d]) * softmax_scale;
        }
      }
  }

  // dst[j] = src[j] * scale (or * scales[j]), the product taken in U:
  // the dequantized value is the fp8 value times its scale, rounded once.
  template <class U>
  static void scale_copy(const float* src, int64_t n, const float* scales, float scale, U* dst) {
    if (scales) {
      for (int64_t j = 0; j < n; ++j) dst[j] = U(src[j]) * U(scales[j]);
    } else {
      for (int64_t j = 0; j < n; ++j) dst[j] = U(src[j]) * U(scale);
    }
  }

  // n bytes from src with element stride `stride` decoded into dst (unscaled):
  // straight from the cache when they are contiguous, else through b.strided.
  void decode_strided(const uint8_t* src, int64_t n, int64_t stride, float* dst, Buffers<T>& b) const {
    if (stride == 1) return fp8.decode(src, n, 1.0f, dst);
    if (int64_t(b.strided.size()) < n) b.strided.resize(n);
    for (int64_t j = 0; j < n; ++j) b.strided[j] = src[j * stride];
    fp8.decode(b.strided.data(), n, 1.0f, dst);
  }

  // Dequantizes tokens [t0, t1) of (seq, h) into b.k (token columns) and b.v
  // (one column per head-dim index), block run by block run. Contiguous byte
  // spans are decoded whole into a staging buffer, then placed: long loops
  // vectorize, 16-byte ones did not pay for their setup. Views with other
  // strides (a K or V half of a combined KV tensor) take the same path with
  // their bytes gathered first where the innermost stride is not 1.
  void gather(int64_t seq, int64_t h, int64_t t0, int64_t t1, Buffers<T>& b) const {
    if (!g.packed_fp8) return gather_any(seq, h, t0, t1, b);
    const uint8_t* kc = c.k_cache.as<const uint8_t>();
    const uint8_t* vc = c.v_cache.as<const uint8_t>();
    const auto& ks = c.k_cache.stride;
    const auto& vs = c.v_cache.stride;
    const int64_t D = g.D, bs = g.bs, groups = D / 16;
    const int64_t block_elems = D * bs;  // one (block, head) of K or of V
    if (int64_t(b.stage.size()) < block_elems) b.stage.resize(block_elems);
    float* stage = b.stage.data();
    // K [blk, h, D/16, bs, 16]: a group's run of tokens is run*16 contiguous bytes when packed.
    const bool k_packed = ks[4] == 1 && ks[3] == 16;
    // V plain [blk, h, D, bs]: a whole block is one span when packed.
    const bool v_plain_packed = vs[3] == 1 && vs[2] == bs;
    // V trans [blk, h, bs/16, D, 16]: a group of 16 tokens is one span of D*16 bytes when packed.
    const bool v_trans_packed = vs[4] == 1 && vs[3] == 16;
    for (int64_t t = t0; t < t1;) {
      const int64_t off0 = t % bs, run = std::min(bs - off0, t1 - t), i0 = t - t0;
      const int64_t blk = block(seq, t / bs);
      if (g.ks.per_token)
        for (int64_t o = 0; o < run; ++o) b.ktok[i0 + o] = g.ks.at(blk, h, off0 + o);
      if (g.vs.per_token)
        for (int64_t o = 0; o < run; ++o) b.vtok[i0 + o] = g.vs.at(blk, h, off0 + o);
      const float* vts = g.vs.per_token ? b.vtok.data() + i0 : nullptr;
      const uint8_t* kb = kc + blk * ks[0] + h * ks[1];
      for (int64_t gr = 0; gr < groups; ++gr) {
        if (k_packed) {
          fp8.decode(kb + gr * ks[2] + off0 * 16, run * 16, 1.0f, stage);
        } else {
          for (int64_t o = 0; o < run; ++o)
            decode_strided(kb + gr * ks[2] + (off0 + o) * ks[3], 16, ks[4], stage + o * 16, b);
        }
        for (int64_t o = 0; o < run; ++o)
          scale_copy(stage + o * 16, 16, nullptr, g.ks.per_token ? b.ktok[i0 + o] : g.ks.tensor,
                     b.k.col(i0 + o).data() + gr * 16);
      }
      const uint8_t* vb = vc + blk * vs[0] + h * vs[1];
      if (g.layout == VLayout::plain) {
        const bool whole = run == bs && v_plain_packed;
        if (whole) fp8.decode(vb, block_elems, 1.0f, stage);
        for (int64_t d = 0; d < D; ++d) {
          const float* sp = stage + d * bs;
          if (!whole) {
            decode_strided(vb + d * vs[2] + off0 * vs[3], run, vs[3], stage, b);
            sp = stage;
          }
          scale_copy(sp, run, vts, g.vs.tensor, b.v.col(d).data() + i0);
        }
      } else {
        for (int64_t o = 0; o < run;) {
          const int64_t off = off0 + o, j0 = off % 16, n = std::min(16 - j0, run - o);
          const uint8_t* gb = vb + (off / 16) * vs[2];
          const bool whole = n == 16 && v_trans_packed;
          if (whole) fp8.decode(gb, D * 16, 1.0f, stage);
          for (int64_t d = 0; d < D; ++d) {
            const float* sp = stage + d * 16;
            if (!whole) {
              decode_strided(gb + d * vs[3] + j0 * vs[4], n, vs[4], stage, b);
              sp = stage;
            }
            scale_copy(sp, n, vts ? vts + o : nullptr, g.vs.tensor, b.v.col(d).data() + i0 + o);
          }
          o += n;
        }
      }
      t += run;
    }
  }

  // gather() for every other format (nhd, hnd, 16-bit and e5m2 caches,
  // per-head scales): each element found through the format's offset rule,
  // decoded, times its scale, the products taken as the packed path takes them.
  void gather_any(int64_t seq, int64_t h, int64_t t0, int64_t t1, Buffers<T>& b) const {
    const uint8_t* kc = c.k_cache.as<const uint8_t>();
    const uint8_t* vc = c.v_cache.as<const uint8_t>();
    const int es = kernels::dtype_size(g.cache);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t i = t - t0, page = block(seq, t / g.bs), slot = t % g.bs;
      const float ksc = kernels::scale_at(c.k_scale, g.k_kind, page, h, slot);
      const float vsc = kernels::scale_at(c.v_scale, g.v_kind, page, h, slot);
      for (int64_t d = 0; d < g.D; ++d) {
        const float kv = kernels::cache_element_value(
            g.cache, kc + kernels::cache_offset(c.k_cache, g.shape, false, page, h, slot, d) * es);
        b.k(d, i) = Score(kv) * Score(ksc);  // K's product in Score, as the packed path takes it
      }
      for (int64_t d = 0; d < g.Dv; ++d) {
        const float vv = kernels::cache_element_value(
            g.cache, vc + kernels::cache_offset(c.v_cache, g.shape, true, page, h, slot, d) * es);
        b.v(i, d) = T(vv) * T(vsc);
      }
    }
  }

  // The span [lo, hi) of chunk columns (tokens t0 .. t0+n-1) row r of a
  // sequence of length L sees: keys t <= pos = L - q_len + p, and with a window
  // also t >= pos - window_left.
  std::pair<int64_t, int64_t> visible(int64_t L, int64_t r, int64_t t0, int64_t n) const {
    const int64_t pos = L - g.q_len + r / g.G;
    const int64_t hi = std::clamp<int64_t>(pos + 1 - t0, 0, n);
    const int64_t lo = std::clamp<int64_t>(c.variant.first_key(pos) - t0, 0, hi);
    return {lo, hi};
  }

  // Folds tokens [t0, t1) of (seq, h) into st with the online softmax.
  void attend_chunk(int64_t seq, int64_t h, int64_t t0, int64_t t1, State<T>& st, Buffers<T>& b) const {
    const int64_t n = t1 - t0, rows = g.rows;
    const int64_t L = len(seq);
    gather(seq, h, t0, t1, b);
    auto Sc = b.scores.leftCols(n);
    Sc.noalias() = b.q * b.k.leftCols(n);
    auto S = b.s.leftCols(n);
    const kernels::AttentionVariant& av = c.variant;
    for (int64_t r = 0; r < rows; ++r) {
      const auto [lo, hi] = visible(L, r, t0, n);
      const int64_t head = h * g.G + r % g.G, pos = L - g.q_len + r / g.G;
      // The variant's logit transforms, in double, on the visible span: the
      // cap on the scaled logit, then the ALiBi bias.
      if (av.soft_cap > 0.0f && hi > lo) {
        const Score cap = Score(av.soft_cap);
        Sc.row(r).segment(lo, hi - lo) = (Sc.row(r).segment(lo, hi - lo).array() / cap).tanh() * cap;
      }
      if (!g.slopes.empty())
        for (int64_t j = lo; j < hi; ++j) Sc(r, j) -= g.slopes[size_t(head)] * Score(pos - (t0 + j));
      if (terms && hi > lo) st.smax[r] = std::max(st.smax[r], Sc.row(r).segment(lo, hi - lo).cwiseAbs().maxCoeff());
      const T cmax = hi > lo ? T(Sc.row(r).segment(lo, hi - lo).maxCoeff()) : -std::numeric_limits<T>::infinity();
      const T m_new = std::max(st.m[r], cmax);
      b.m_new[r] = std::isinf(m_new) ? T(0) : m_new;  // a row with nothing yet: P is zeroed below
      b.alpha[r] = std::isinf(st.m[r]) ? T(0) : std::exp(st.m[r] - m_new);
      st.m[r] = m_new;
      // s - m is taken in double and only then rounded to T: every token of
      // the row is measured from the same stored max, so ties stay ties.
      S.row(r) = (Sc.row(r).array() - Score(b.m_new[r])).template cast<T>();
    }
    S.array() = S.array().exp();  // contiguous block: Eigen's vectorized exp
    // Masked entries (the causal future, outside the window) get exactly zero
    // weight (never 0 * exp(...)).
    for (int64_t r = 0; r < rows; ++r) {
      const auto [lo, hi] = visible(L, r, t0, n);
      if (hi <= lo) {
        S.row(r).setZero();
        continue;
      }
      if (lo > 0) S.row(r).head(lo).setZero();
      if (hi < n) S.row(r).tail(n - hi).setZero();
    }
    const auto V = b.v.topRows(n);
    st.l = b.alpha.cwiseProduct(st.l) + S.rowwise().sum();
    // The products take P scaled up by a power of two, and their sums are
    // scaled back: a power of two moves no rounding where every value is
    // normal, so the sums are the unscaled ones there. Weights below float's
    // smallest normal (2^-126: P under extreme logits, P^2 from 2^-63 down,
    // min(P, c) for a bf16 P's c = 2^-134) then reach the GEMM as normal
    // numbers; as subnormal operands they slowed x86's float GEMM about a
    // hundredfold. The scales leave every sum below 2^120 (chunk_scales).
    const auto [up, up2] = chunk_scales(n, V);
    S *= up;
    auto prod = b.tmp.topRows(rows);
    prod.noalias() = S * V;
    st.acc = b.alpha.asDiagonal() * st.acc + prod / up;
    if (!terms) return;
    auto Va = b.vabs.topRows(n);
    auto V2 = b.v2.topRows(n);
    Va = V.cwiseAbs();
    V2 = V.cwiseAbs2();
    auto PP = b.pp.leftCols(n);
    PP.topRows(rows) = S;
    PP.bottomRows(rows) = S.cwiseMin(sub_c * up);
    auto P2 = b.p2.leftCols(n);
    P2 = (S * (up2 / up)).cwiseAbs2();  // (P * up2)^2
    st.l1 = b.alpha.asDiagonal() * st.l1;
    // sum min(p, c)|v| only shrinks when the max rises; it stays below sum p|v|.
    st.sub = st.sub.cwiseMin(st.l1);
    b.tmp.noalias() = PP * Va;
    st.l1 += b.tmp.topRows(rows) / up;
    st.sub += b.tmp.bottomRows(rows) / up;
    auto sq = b.tmp.topRows(rows);
    sq.noalias() = P2 * V2;
    st.l2 = b.alpha.cwiseAbs2().asDiagonal() * st.l2 + sq / (up2 * up2);
  }

  // attend_chunk's scales of P (up) and of P in P^2 (up2), powers of two: the
  // largest up to 2^64 (2^42) that keep n tokens' sums of P*up*|v| and
  // (P*up2)^2 v^2 below 2^120, as P <= 1. 1 for a double T (no subnormal
  // weight of interest).
  static std::pair<T, T> chunk_scales(int64_t n, const Eigen::Ref<const Mat<T>>& V) {
    if constexpr (!std::is_same_v<T, float>) {
      return {T(1), T(1)};
    } else {
      const double vmax = n > 0 && V.size() > 0 ? double(V.cwiseAbs().maxCoeff()) : 0.0;
      if (!(vmax > 0.0) || !std::isfinite(vmax)) return {T(0x1p64), T(0x1p42)};
      const int room = 120 - std::ilogb(double(n) * vmax) - 1;  // n * vmax * 2^room < 2^120
      const int e = std::clamp(room, 0, 64);
      const int e2 = std::clamp((120 - std::ilogb(double(n) * vmax * vmax) - 1) / 2, 0, 42);
      return {std::ldexp(T(1), e), std::ldexp(T(1), e2)};
    }
  }

  // dst absorbs src (src covers the later tokens); each is in units of its own max.
  void merge_into(State<T>& dst, const State<T>& src) const {
    for (int64_t r = 0; r < g.rows; ++r) {
      const T M = std::max(dst.m[r], src.m[r]);
      if (std::isinf(M)) continue;
      const T a = std::isinf(dst.m[r]) ? T(0) : std::exp(dst.m[r] - M);
      const T bsc = std::isinf(src.m[r]) ? T(0) : std::exp(src.m[r] - M);
      dst.m[r] = M;
      dst.l[r] = a * dst.l[r] + bsc * src.l[r];
      dst.acc.row(r) = a * dst.acc.row(r) + bsc * src.acc.row(r);
      if (terms) {
        dst.smax[r] = std::max(dst.smax[r], src.smax[r]);
        dst.sub.row(r) = dst.sub.row(r).cwiseMin(a * dst.l1.row(r)) + src.sub.row(r).cwiseMin(bsc * src.l1.row(r));
        dst.l1.row(r) = a * dst.l1.row(r) + bsc * src.l1.row(r);
        dst.l2.row(r) = (a * a) * dst.l2.row(r) + (bsc * bsc) * src.l2.row(r);
      }
    }
  }

  void finalize(int64_t seq, int64_t h, const State<T>& st, ReferenceResult& res) const {
    const int64_t L = len(seq);
    for (int64_t r = 0; r < g.rows; ++r) {
      const int64_t p = r / g.G, gg = r % g.G;
      const int64_t qrow = seq * g.q_len + p, head = h * g.G + gg;
      const bool seen = st.l[r] > T(0);
      if (!g.slopes.empty() && seen) {
        // The farthest visible key's bias: the comparison standard's ALiBi term.
        const int64_t pos = L - g.q_len + p;
        res.bias_max[size_t(qrow * g.hq + head)] =
            float(std::fabs(g.slopes[size_t(head)]) * double(pos - c.variant.first_key(pos)));
      }
      if (!seen && g.sinks.empty()) continue;  // result arrays start at 0 / -inf
      res.seen[size_t(qrow * g.hq + head)] = seen;
      if (terms && seen) res.score_max[size_t(qrow * g.hq + head)] = float(st.smax[r]);
      T inv = seen ? T(1) / st.l[r] : T(0);
      double lse = seen ? double(st.m[r]) + std::log(double(st.l[r])) : -std::numeric_limits<double>::infinity();
      if (!g.sinks.empty()) {
        // The sink joins the denominator (and the lse) only: weights shrink by
        // l / (l + exp(sink - m)), taken in double against the larger of the two.
        const double sink = g.sinks[size_t(head)];
        const double M = seen ? std::max(double(st.m[r]), sink) : sink;
        const double tokens = seen ? double(st.l[r]) * std::exp(double(st.m[r]) - M) : 0.0;
        const double total = tokens + std::exp(sink - M);
        inv = seen ? T(std::exp(double(st.m[r]) - M) / total) : T(0);
        lse = M + std::log(total);
      }
      res.lse[qrow * g.hq + head] = lse;
      if (!seen) continue;
      const int64_t base = res.index(qrow, head, 0);
      for (int64_t d = 0; d < g.Dv; ++d) {
        res.out[base + d] = float(st.acc(r, d) * inv);
        if (terms) {
          res.pq_l1[base + d] = float(st.l1(r, d) * inv);
          res.pq_l2[base + d] = float(std::sqrt(st.l2(r, d)) * inv);
          res.pq_sub[base + d] = float(st.sub(r, d) * inv);
        }
      }
    }
  }
};

struct Task {
  int64_t seq, h, t0, t1;
  int64_t slot;  // -1: the whole (seq, h) in one task; else its index in the merge buffer
};

template <class T>
void run(const DecodeCall& call, const Geometry& g, const NumericsProfile& profile, const ReferenceOptions& opt,
         ReferenceResult& res) {
  const Core<T> core(call, g, profile, opt);
  const int64_t chunk = opt.chunk_tokens;
  const int64_t segment = opt.segment_tokens;
  std::vector<Task> tasks;
  struct Group { int64_t seq, h, first, count; };
  std::vector<Group> groups;  // (seq, h) split over several tasks
  int64_t slots = 0, longest = 0;
  for (int64_t seq = 0; seq < g.num_seqs; ++seq) {
    const int64_t L = core.len(seq);
    if (L <= 0) continue;
    longest = std::max(longest, L);
    const int64_t nseg = (L + segment - 1) / segment;
    for (int64_t h = 0; h < g.hkv; ++h) {
      if (nseg > 1) groups.push_back({seq, h, slots, nseg});
      for (int64_t s = 0; s < nseg; ++s)
        tasks.push_back({seq, h, s * segment, std::min(L, (s + 1) * segment), nseg > 1 ? slots++ : -1});
    }
  }
  const int64_t buf_tokens = std::min(chunk, longest);
  std::vector<State<T>> partial(slots);
  tbb::enumerable_thread_specific<Buffers<T>> buffers;
  tbb::parallel_for(tbb::blocked_range<size_t>(0, tasks.size(), 1), [&](const tbb::blocked_range<size_t>& range) {
    Buffers<T>& b = buffers.local();
    b.ensure(g.rows, g.D, g.Dv, buf_tokens, core.terms);
    for (size_t i = range.begin(); i != range.end(); ++i) {
      const Task& t = tasks[i];
      core.load_q(t.seq, t.h, b.q);
      State<T> st;
      st.reset(g.rows, g.Dv, core.terms);
      for (int64_t c0 = t.t0; c0 < t.t1; c0 += chunk)
        core.attend_chunk(t.seq, t.h, c0, std::min(t.t1, c0 + chunk), st, b);
      if (t.slot < 0)
        core.finalize(t.seq, t.h, st, res);
      else
        partial[t.slot] = std::move(st);
    }
  });
  tbb::parallel_for(size_t(0), groups.size(), [&](size_t i) {
    const Group& gr = groups[i];
    State<T>& acc = partial[gr.first];
    for (int64_t k = 1; k < gr.count; ++k) core.merge_into(acc, partial[gr.first + k]);
    core.finalize(gr.seq, gr.h, acc, res);
  });
  // A sequence of length 0 has no task: with sinks its rows' lse is the sink.
  if (!g.sinks.empty())
    for (int64_t seq = 0; seq < g.num_seqs; ++seq)
      if (core.len(seq) <= 0)
        for (int64_t row = seq * g.q_len * g.hq; row < (seq + 1) * g.q_len * g.hq; ++row)
          res.lse[size_t(row)] = g.sinks[size_t(row % g.hq)];
  for (const Buffers<T>& b : buffers) res.chunk_buffer_bytes = std::max(res.chunk_buffer_bytes, b.bytes());
  for (const State<T>& st : partial)
    res.segment_state_bytes += int64_t(sizeof(T)) * (st.m.size() + st.l.size() + st.acc.size() + st.l1.size() +
                                                     st.l2.size() + st.sub.size());
}

}  // namespace

bool ReferenceResult::row_empty(int64_t qrow, int64_t head) const {
  if (!seen.empty()) return !seen[size_t(qrow * hq + head)];
  return std::isinf(lse[qrow * hq + head]) && lse[qrow * hq + head] < 0;
}

double p_subnormal_error(DType flavour) {
  const kernels::Fp8Format f = kernels::fp8_format(flavour);
  // Subnormal spacing 2^(1 - bias - 3); rounding to nearest errs by half of it.
  return std::ldexp(1.0, 1 - f.bias - 3) / 2.0 / double(f.max_finite);
}

double p_subnormal_error(PRound rounding, DType flavour) {
  switch (rounding) {
    case PRound::fp8_running_max: return p_subnormal_error(flavour);
    // Unscaled fp8: half the subnormal spacing 2^(1 - bias - 3) itself
    // (2^-10 for e4m3fn), FP8_MAX times the scaled rounding's.
    case PRound::fp8: return p_subnormal_error(flavour) * double(kernels::fp8_max(flavour));
    // p = exp(s - m) <= 1 is rounded as it is: half the smallest subnormal,
    // 2^-133 / 2 for bf16 (f32's exponent range, 7 mantissa bits) and
    // 2^-24 / 2 for f16.
    case PRound::bf16: return std::ldexp(1.0, -134);
    case PRound::f16: return std::ldexp(1.0, -25);
    case PRound::none: return 0.0;
  }
  return 0.0;
}

double p_unit_roundoff(PRound rounding) {
  switch (rounding) {
    case PRound::fp8_running_max: return std::ldexp(1.0, -4);  // e4m3: 3 mantissa bits
    case PRound::fp8: return std::ldexp(1.0, -4);              // the same 3 bits, unscaled
    case PRound::bf16: return std::ldexp(1.0, -8);             // 7 mantissa bits
    case PRound::f16: return std::ldexp(1.0, -11);             // 10 mantissa bits
    case PRound::none: return 0.0;
  }
  return 0.0;
}

DType quantization_flavour(const DecodeCall& call) {
  return kernels::is_fp8(call.opt.compute) ? call.opt.compute : call.k_cache.dtype;
}

float quantize_q_row(const float* q, int64_t n, DType flavour, float* codes) {
  float absmax = 0.0f;
  for (int64_t i = 0; i < n; ++i) absmax = std::max(absmax, std::fabs(q[i]));
  const float qs = std::max(absmax / kernels::fp8_max(flavour), 1e-20f);
  for (int64_t i = 0; i < n; ++i) codes[i] = kernels::fp8_to_f32(kernels::f32_to_fp8(q[i] / qs, flavour), flavour);
  return qs;
}

ReferenceResult decode(const DecodeCall& call, const NumericsProfile& profile, const ReferenceOptions& options) {
  if (options.chunk_tokens < 1 || options.segment_tokens < 1) reject("chunk_tokens and segment_tokens must be >= 1");
  if (const auto e = profile_error(profile)) reject(*e);
  const Geometry g = geometry_of(call);
  ReferenceResult res;
  res.num_seqs = g.num_seqs;
  res.q_len = g.q_len;
  res.hq = g.hq;
  res.head_dim = g.Dv;  // out's head dim
  res.profile = profile;
  res.fp8_flavour = quantization_flavour(call);
  res.out_dtype = call.out.present() ? call.out.dtype : call.q.dtype;
  const int64_t elems = g.num_seqs * g.q_len * g.hq * g.Dv;
  res.out.assign(elems, 0.0f);
  res.lse.assign(g.num_seqs * g.q_len * g.hq, -std::numeric_limits<double>::infinity());
  res.seen.assign(res.lse.size(), 0);
  if (!g.slopes.empty()) res.bias_max.assign(res.lse.size(), 0.0f);
  if (options.error_terms) {
    res.score_max.assign(res.lse.size(), 0.0f);
    res.pq_l1.assign(elems, 0.0f);
    res.pq_l2.assign(elems, 0.0f);
    res.pq_sub.assign(elems, 0.0f);
  }
  if (options.precision == Precision::fp64)
    run<double>(call, g, profile, options, res);
  else
    run<float>(call, g, profile, options, res);
  return res;
}

ReferenceResult decode(const DecodeCall& call, const ReferenceOptions& options) {
  return decode(call, pav_profile(call.opt), options);
}

}  // namespace pav::reference
