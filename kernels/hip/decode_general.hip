// SPDX-License-Identifier: Apache-2.0
// The general attention body (decode_common.hpp lists the decode files).
// Per partition (tiles [tile0, tile1) of one sequence, KV head h), query row r, visible token t:
//   s_t = (q_r . k_t) * softmax_scale * k_scale_t, with q_r = q8_r * q_scale_r under fp8 compute
//   per 256-token tile: m' = max(m, max_t s_t), a = exp(m - m'), p_t = exp(s_t - m'), l' = a l + sum_t p_t
//   O[r, :] = a O[r, :] + sum_t w_t * v_scale_t * v_t, w_t = fp8(p_t * FP8_MAX) under fp8 compute, else p_t
//   stores m, l and O * v_scale / (FP8_MAX * l) (FP8_MAX 1 under bf16 compute), the partial or the output
#include "kernels/hip/decode_common.hpp"

namespace pav::kernels::gpu {
namespace {

// ---- attention: general body -----------------------------------------------------------
// Any head_dim of the backend, either compute type. One block per (task, KV
// head); the block index is the scratch slot. K and V codes are staged in
// shared memory and decoded through a table.
__global__ void __launch_bounds__(kThreads) attend_kernel(const Params p) {
  __shared__ float lut[256];                       // cache fp8 code -> f32
  __shared__ float qf[kAccElems];                  // Q rows of the chunk, as the product uses them
  __shared__ float qscale[kMaxRowChunk];           // q_scale * softmax_scale
  __shared__ float sw[kMaxRowChunk * kTileTokens]; // scores, then P weights, of one tile
  __shared__ uint8_t stage[kStageBytes];                 // K [D][T] or V [T][D] codes
  __shared__ float kscale[kTileTokens];
  __shared__ float row_m[kMaxRowChunk], row_l[kMaxRowChunk], row_alpha[kMaxRowChunk];
  __shared__ int flag;

  const int tid = threadIdx.x;
  const int64_t slot = blockIdx.x;
  const int D = p.head_dim, bs = p.block_size;

  int seq, h;
  int64_t tile0, tile1;
  if (!resolve_work(p, slot, seq, h, tile0, tile1, &flag)) return;
  const int64_t len = p.lens[seq];

  lut[tid] = fp8_to_f32(uint8_t(tid), p.cache_fp8);  // kThreads == 256
  // Stage geometry: T tokens of D codes fill the stage; RG row groups share a token.
  int T = kTileTokens;
  while (T * D > kStageBytes) T >>= 1;
  const int RG = kThreads / T;
  const int RC = min(kMaxRowChunk, kAccElems / D);
  const float epi = epilogue_scale(p);
  const int32_t* table = p.tables + int64_t(seq) * p.tables_s0;

  for (int r0 = 0; r0 < p.rows; r0 += RC) {
    const int nr = min(RC, p.rows - r0);
    __syncthreads();
    load_q_rows(p, seq, h, r0, nr, qf, qscale, row_m, row_l);
    float acc[kAccPerThread];
#pragma unroll
    for (int e = 0; e < kAccPerThread; ++e) acc[e] = 0.0f;

    for (int64_t tile = tile0; tile < tile1; ++tile) {
      const int64_t t0 = tile * kTileTokens;
      const int n = int(min64(kTileTokens, len - t0));
      if (n <= 0) break;

      // Pass 1: scores of the tile, T tokens at a time.
      for (int c0 = 0; c0 < n; c0 += T) {
        const int nc = min(T, n - c0);
        __syncthreads();
        // K codes of token i, dims 16g..16g+15, are 16 contiguous bytes; stored
        // transposed [d][T] so the score loop reads consecutive bytes.
        for (int idx = tid; idx < T * (D / 16); idx += kThreads) {
          const int i = idx % T, grp = idx / T;
          if (i >= nc) continue;  // past the context: never read
          const int64_t t = t0 + c0 + i, blk = table[t / bs], off = t % bs;
          const uint4 v16 = *reinterpret_cast<const uint4*>(
              p.k + ((blk * p.hkv + h) * (D / 16) + grp) * int64_t(bs) * 16 + off * 16);
          const uint32_t w4[4] = {v16.x, v16.y, v16.z, v16.w};
#pragma unroll
          for (int j = 0; j < 16; ++j) stage[(grp * 16 + j) * T + i] = uint8_t(w4[j / 4] >> (8 * (j % 4)));
        }
        if (tid < nc) {
          const int64_t t = t0 + c0 + tid, blk = table[t / bs], off = t % bs;
          kscale[tid] = scale_at(p.k_scale, p.k_scale_kind, blk, h, off, p);
        }
        __syncthreads();
        const int i = tid % T, rg = tid / T;
        if (i < nc) {
          float dot[kMaxRowsPerThread];
#pragma unroll
          for (int j = 0; j < kMaxRowsPerThread; ++j) dot[j] = 0.0f;
          for (int d = 0; d < D; ++d) {
            const float kv = lut[stage[d * T + i]];
#pragma unroll
            for (int j = 0; j < kMaxRowsPerThread; ++j) {
              const int r = rg + j * RG;
              if (r < nr) dot[j] += qf[r * D + d] * kv;
            }
          }
#pragma unroll
          for (int j = 0; j < kMaxRowsPerThread; ++j) {
            const int r = rg + j * RG;
            if (r < nr) sw[r * kTileTokens + c0 + i] = dot[j] * qscale[r] * kscale[i];
          }
        }
      }
      __syncthreads();
      softmax_tile(p, h, table, len, t0, n, r0, nr, sw, row_m, row_l, row_alpha);
      __syncthreads();

      // Pass 2: acc = acc * alpha + sum_i w_i v_i, T tokens at a time.
#pragma unroll
      for (int e = 0; e < kAccPerThread; ++e) {
        const int f = tid + e * kThreads, r = f / D;
        if (r < nr) acc[e] *= row_alpha[r];
      }
      for (int c0 = 0; c0 < n; c0 += T) {
        const int nc = min(T, n - c0);
        __syncthreads();
        for (int idx = tid; idx < T * D; idx += kThreads) {
          const int i = idx % T, d = idx / T;
          if (i >= nc) continue;  // past the context: never read
          const int64_t t = t0 + c0 + i, blk = table[t / bs], off = t % bs;
          const int64_t at = p.v_trans
              ? ((blk * p.hkv + h) * (bs / 16) + off / 16) * int64_t(D) * 16 + d * 16 + off % 16
              : ((blk * p.hkv + h) * D + d) * int64_t(bs) + off;
          stage[i * D + d] = p.v[at];
        }
        __syncthreads();
#pragma unroll
        for (int e = 0; e < kAccPerThread; ++e) {
          const int f = tid + e * kThreads, r = f / D, d = f % D;
          if (r >= nr) continue;
          const float* wrow = sw + r * kTileTokens + c0;
          float a = acc[e];
          for (int i = 0; i < nc; ++i) a += wrow[i] * lut[stage[i * D + d]];
          acc[e] = a;
        }
      }
    }
    __syncthreads();

#pragma unroll
    for (int e = 0; e < kAccPerThread; ++e) {
      const int f = tid + e * kThreads, r = f / D, d = f % D;
      if (r < nr) store_row_value(p, seq, h, slot, r0 + r, d, acc[e], row_l[r], epi);
    }
    if (!p.direct && tid < nr) {
      p.m[slot * p.rows + r0 + tid] = row_m[tid];
      p.l[slot * p.rows + r0 + tid] = row_l[tid];
    }
  }
}

}  // namespace

void launch_general(const Params& p, unsigned grid, hipStream_t s) {
  attend_kernel<<<grid, kThreads, 0, s>>>(p);
}

}  // namespace pav::kernels::gpu
