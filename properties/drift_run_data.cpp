// SPDX-License-Identifier: Apache-2.0
#include "properties/drift_run_data.hpp"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>

#include "kernels/codecs.hpp"

namespace pav::props {

using kernels::DType;

namespace {

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

}  // namespace

float source_normal(uint64_t data_seed, SourceTensor t, int64_t a, int64_t b, int64_t c, int64_t d) {
  return element_normal(row_key(data_seed, t, a, b, c), d);
}
std::vector<int32_t> trace_like_lengths(int32_t context, int batch, const DriftShorter& sh, uint64_t seed) {
  std::vector<int32_t> lens(std::max(batch, 1), context);
  const double mu = std::log(sh.ratio_p50);
  const double sigma = (std::log(sh.ratio_p90) - mu) / 1.2815515655446004;  // z of the 90th percentile
  for (int i = 1; i < batch; ++i) {
    const uint64_t row = row_key(seed, SourceTensor::q, int64_t(context), i, -1);
    double r = 0.0;
    for (int64_t attempt = 0;; ++attempt) {  // truncation to r >= 1 by redrawing
      r = std::exp(mu + sigma * double(element_normal(row, attempt)));
      if (r >= 1.0) break;
    }
    const double len = std::round(double(context) / r);
    lens[i] = int32_t(std::max<double>(sh.min_len, std::min<double>(len, context)));
  }
  return lens;
}
DriftData build_drift_data(const DriftSweep& s, const DriftCell& cell, uint64_t data_seed) {
  using namespace kernels;
  DriftData dd;
  HostCase& c = dd.c;
  CaseSpec& sp = c.spec;
  sp.lens = cell.lens;
  sp.q_len = s.q_len;
  sp.hkv = cell.heads.hkv;
  sp.group = cell.heads.group;
  sp.head_dim = s.head_dim;
  sp.block_size = s.block_size;
  sp.v_layout = VLayout::plain;
  sp.q_dtype = s.q_dtype;
  sp.cache_dtype = arch_fp8(s.arch);
  sp.scales = ScaleKind::per_tensor;
  sp.opt.arch = s.arch;
  sp.opt.compute = arch_fp8(s.arch);
  sp.opt.cu = s.cu;
  sp.workgroup_budget = s.workgroup_budget;
  sp.seed = data_seed;
  const int64_t B = int64_t(cell.lens.size()), D = s.head_dim, H = sp.hkv, Hq = H * sp.group, bs = s.block_size;
  const DType fl = sp.cache_dtype;

  std::vector<int64_t> first_block(B + 1, 0);
  c.max_blocks = 1;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t nb = (std::max<int64_t>(cell.lens[b], 0) + bs - 1) / bs;
    first_block[b + 1] = first_block[b] + nb;
    c.max_blocks = std::max(c.max_blocks, nb);
  }
  const int64_t used = first_block[B];
  c.num_blocks = used + 1;  // the last block is spare: poisoned, only unused table entries point at it
  c.block_tables.assign(B * c.max_blocks, int32_t(used));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < first_block[b + 1] - first_block[b]; ++i)
      c.block_tables[b * c.max_blocks + i] = int32_t(first_block[b] + i);
  c.lens = cell.lens;
  c.k_scale = {float(s.kv_scale)};
  c.v_scale = {float(s.kv_scale)};

  const uint8_t nan8 = fl == DType::fp8_e4m3fnuz ? 0x80 : 0x7f;
  const int64_t block_elems = H * D * bs;
  c.k.resize(c.num_blocks * block_elems);
  c.v.resize(c.num_blocks * block_elems);
  const float inv_scale = float(1.0 / s.kv_scale);
  // One task per used block: its tokens from the source, the tail of a
  // sequence's last block (and the spare block) NaN.
  tbb::parallel_for(int64_t(0), c.num_blocks, [&](int64_t blk) {
    std::fill_n(c.k.begin() + blk * block_elems, block_elems, nan8);
    std::fill_n(c.v.begin() + blk * block_elems, block_elems, nan8);
    if (blk >= used) return;
    const int64_t b = std::upper_bound(first_block.begin(), first_block.end(), blk) - first_block.begin() - 1;
    const int64_t t0 = (blk - first_block[b]) * bs;
    const int64_t t1 = std::min<int64_t>(t0 + bs, cell.lens[b]);
    std::vector<float> kr(D), vr(D);
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t h = 0; h < H; ++h) {
        normal_row(row_key(data_seed, SourceTensor::k, b, h, t), D, kr.data());
        normal_row(row_key(data_seed, SourceTensor::v, b, h, t), D, vr.data());
        for (int64_t d = 0; d < D; ++d) {
          c.k[k_offset(blk, h, d, t - t0, H, D, bs)] = f32_to_fp8(kr[d] * inv_scale, fl);
          c.v[v_offset(VLayout::plain, blk, h, d, t - t0, H, D, bs)] = f32_to_fp8(vr[d] * inv_scale, fl);
        }
      }
  });

  const int64_t qrows = B * s.q_len;
  dd.q_source.resize(qrows * Hq * D);
  c.q.resize(qrows * Hq * D);
  for (int64_t r = 0; r < qrows; ++r)
    for (int64_t h = 0; h < Hq; ++h) {
      float* src = &dd.q_source[(r * Hq + h) * D];
      normal_row(row_key(data_seed, SourceTensor::q, r, h, 0), D, src);
      for (int64_t d = 0; d < D; ++d) {
        src[d] *= float(s.q_std);
        c.q[(r * Hq + h) * D + d] = s.q_dtype == DType::bf16 ? f32_to_bf16(src[d]) : f32_to_f16(src[d]);
      }
    }
  c.out.assign(qrows * Hq * D, 0);
  c.poison_output();
  return dd;
}

reference::SourceChunkFn drift_source_chunks(const DriftSweep& s, const DriftCell& cell, uint64_t data_seed) {
  const int64_t D = s.head_dim;
  (void)cell;
  return [D, data_seed](int64_t seq, int64_t h, int64_t t0, int64_t n, float* k, float* v) {
    for (int64_t i = 0; i < n; ++i) {
      normal_row(row_key(data_seed, SourceTensor::k, seq, h, t0 + i), D, k + i * D);
      normal_row(row_key(data_seed, SourceTensor::v, seq, h, t0 + i), D, v + i * D);
    }
  };
}

reference::SourceGeometry drift_source_geometry(const DriftSweep& s, const DriftCell& cell) {
  return {.lens = cell.lens, .q_len = s.q_len, .hkv = cell.heads.hkv, .group = cell.heads.group,
          .head_dim = s.head_dim, .softmax_scale = 0.0};
}

}  // namespace pav::props
