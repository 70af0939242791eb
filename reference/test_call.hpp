// SPDX-License-Identifier: Apache-2.0
#pragma once
// Hand-built decode calls for the reference tests: owned buffers, random
// in-context values, and NaN in every cache byte, scale and output element
// outside the context. Test-only; written against docs/numerics.md, "Tensors and layouts".
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/call.hpp"
#include "kernels/codecs.hpp"

namespace pav::reference::testing {

enum class Scales : uint8_t { none, tensor, token };

struct CallSpec {
  std::vector<int32_t> lens{300};
  int64_t hkv = 1, group = 4, head_dim = 64, block_size = 16, q_len = 1;
  kernels::VLayout layout = kernels::VLayout::plain;
  kernels::DType cache = kernels::DType::fp8_e4m3fn;
  kernels::DType q_dtype = kernels::DType::bf16;
  kernels::DType compute = kernels::DType::fp8_e4m3fn;
  kernels::DType partial = kernels::DType::bf16;
  Scales scales = Scales::tensor;
  float softmax_scale = 0.0f;
  float q_amp = 1.0f, k_amp = 2.0f, v_amp = 1.0f;  // standard deviations before fp8 encoding
  int64_t spare_blocks = 3;                        // unused blocks, all poison
  bool shuffle_blocks = true;                      // hand out blocks in a random order
  uint64_t seed = 1;
};

struct OwnedCall {
  CallSpec spec;
  std::vector<uint16_t> q, out;
  std::vector<uint8_t> k, v;
  std::vector<int32_t> tables, lens;
  std::vector<float> ks, vs;
  int64_t num_blocks = 0, max_blocks = 0;
  kernels::DecodeCall call;  // views into the vectors above

  OwnedCall() = default;
  OwnedCall(const OwnedCall&) = delete;  // a copy's views would point at the original
  OwnedCall(OwnedCall&&) = default;      // moved vectors keep their buffers

  int64_t hq() const { return spec.hkv * spec.group; }
  // Element offsets, written out from docs/numerics.md.
  int64_t k_at(int64_t blk, int64_t h, int64_t d, int64_t off) const {
    const int64_t D = spec.head_dim, bs = spec.block_size;
    return ((blk * spec.hkv + h) * (D / 16) + d / 16) * bs * 16 + off * 16 + d % 16;
  }
  int64_t v_at(int64_t blk, int64_t h, int64_t d, int64_t off) const {
    const int64_t D = spec.head_dim, bs = spec.block_size;
    if (spec.layout == kernels::VLayout::plain) return ((blk * spec.hkv + h) * D + d) * bs + off;
    return ((blk * spec.hkv + h) * (bs / 16) + off / 16) * D * 16 + d * 16 + off % 16;
  }
  int64_t scale_at(int64_t blk, int64_t h, int64_t off) const { return (blk * spec.hkv + h) * spec.block_size + off; }
  int32_t block_of(int64_t seq, int64_t t) const { return tables[seq * max_blocks + t / spec.block_size]; }
  float q_value(int64_t qrow, int64_t head, int64_t d) const {
    const uint16_t h = q[(qrow * hq() + head) * spec.head_dim + d];
    return spec.q_dtype == kernels::DType::bf16 ? kernels::bf16_to_f32(h) : kernels::f16_to_f32(h);
  }
};

inline uint8_t fp8_nan(kernels::DType flavour) {
  return flavour == kernels::DType::fp8_e4m3fnuz ? uint8_t(0x80) : uint8_t(0x7f);
}
inline uint16_t half_of(float x, kernels::DType t) {
  return t == kernels::DType::bf16 ? kernels::f32_to_bf16(x) : kernels::f32_to_f16(x);
}

// Builds a call; blocks are handed out in a shuffled order, table entries past
// each sequence's last block hold an out-of-range id.
inline void build(OwnedCall& c) {
  using namespace kernels;
  const CallSpec& s = c.spec;
  std::mt19937_64 rng(s.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t B = int64_t(s.lens.size()), D = s.head_dim, bs = s.block_size, H = s.hkv;
  int64_t used = 0;
  c.max_blocks = 1;
  for (int32_t L : s.lens) {
    const int64_t nb = L > 0 ? (L + bs - 1) / bs : 0;
    used += nb;
    c.max_blocks = std::max(c.max_blocks, nb + 1);
  }
  c.num_blocks = used + s.spare_blocks;
  std::vector<int32_t> order(c.num_blocks);
  std::iota(order.begin(), order.end(), 0);
  if (s.shuffle_blocks) std::shuffle(order.begin(), order.end(), rng);
  c.tables.assign(B * c.max_blocks, std::numeric_limits<int32_t>::max());
  c.lens = s.lens;
  int64_t next = 0;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t nb = s.lens[b] > 0 ? (s.lens[b] + bs - 1) / bs : 0;
    for (int64_t i = 0; i < nb; ++i) c.tables[b * c.max_blocks + i] = order[next++];
  }
  const uint8_t nan8 = fp8_nan(s.cache);
  const int64_t cache_elems = c.num_blocks * H * D * bs;
  c.k.assign(cache_elems, nan8);
  c.v.assign(cache_elems, nan8);
  const float fnan = std::numeric_limits<float>::quiet_NaN();
  std::uniform_real_distribution<float> scale_dist(0.25f, 2.0f);
  if (s.scales == Scales::tensor) {
    c.ks = {scale_dist(rng)};
    c.vs = {scale_dist(rng)};
  } else if (s.scales == Scales::token) {
    c.ks.assign(c.num_blocks * H * bs, fnan);
    c.vs.assign(c.num_blocks * H * bs, fnan);
  }
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < std::max<int32_t>(s.lens[b], 0); ++t) {
      const int64_t blk = c.block_of(b, t), off = t % bs;
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t d = 0; d < D; ++d) {
          c.k[c.k_at(blk, h, d, off)] = f32_to_fp8(normal(rng) * s.k_amp, s.cache);
          c.v[c.v_at(blk, h, d, off)] = f32_to_fp8(normal(rng) * s.v_amp, s.cache);
        }
        if (s.scales == Scales::token) {
          // Scales differ strongly between heads so a head mix-up is visible.
          c.ks[c.scale_at(blk, h, off)] = scale_dist(rng) * float(h + 1);
          c.vs[c.scale_at(blk, h, off)] = scale_dist(rng) / float(h + 1);
        }
      }
    }
  const int64_t rows = B * s.q_len, hq = c.hq();
  c.q.resize(rows * hq * D);
  for (auto& x : c.q) x = half_of(normal(rng) * s.q_amp, s.q_dtype);
  c.out.assign(rows * hq * D, half_of(fnan, s.q_dtype));

  DecodeCall& k = c.call;
  k = DecodeCall{};
  k.q = TensorView::contiguous_of(c.q.data(), s.q_dtype, {rows, hq, D});
  k.out = TensorView::contiguous_of(c.out.data(), s.q_dtype, {rows, hq, D});
  k.k_cache = TensorView::contiguous_of(c.k.data(), s.cache, {c.num_blocks, H, D / 16, bs, 16});
  if (s.layout == VLayout::plain)
    k.v_cache = TensorView::contiguous_of(c.v.data(), s.cache, {c.num_blocks, H, D, bs});
  else
    k.v_cache = TensorView::contiguous_of(c.v.data(), s.cache, {c.num_blocks, H, bs / 16, D, 16});
  k.block_tables = TensorView::contiguous_of(c.tables.data(), DType::i32, {B, c.max_blocks});
  k.context_lens = TensorView::contiguous_of(c.lens.data(), DType::i32, {B});
  if (s.scales == Scales::tensor) {
    k.k_scale = TensorView::contiguous_of(c.ks.data(), DType::f32, {1});
    k.v_scale = TensorView::contiguous_of(c.vs.data(), DType::f32, {1});
  } else if (s.scales == Scales::token) {
    k.k_scale = TensorView::contiguous_of(c.ks.data(), DType::f32, {c.num_blocks, H, bs});
    k.v_scale = TensorView::contiguous_of(c.vs.data(), DType::f32, {c.num_blocks, H, bs});
  }
  k.q_len = int(s.q_len);
  k.opt.arch = s.cache == DType::fp8_e4m3fnuz ? Arch::gfx942 : Arch::sm90;
  k.opt.compute = s.compute;
  k.opt.partial = s.partial;
  k.opt.softmax_scale = s.softmax_scale;
}

inline OwnedCall make_call(const CallSpec& spec) {
  OwnedCall c;
  c.spec = spec;
  build(c);
  return c;
}

}  // namespace pav::reference::testing
