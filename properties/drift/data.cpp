// SPDX-License-Identifier: Apache-2.0
#include "properties/drift/data.hpp"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>

#include "kernels/codecs.hpp"

namespace pav::props {

using kernels::DType;

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
