// SPDX-License-Identifier: Apache-2.0
// The fast attention body (decode_common.hpp lists the decode files).
// Per partition (tiles [tile0, tile1) of one sequence, KV head h), query row r, visible token t:
//   s_t = (q8_r . k8_t) * q_scale_r * softmax_scale * k_scale_t   (one thread per token, fp32 sums)
//   per 256-token tile: m' = max(m, max_t s_t), a = exp(m - m'), p_t = exp(s_t - m'), l' = a l + sum_t p_t
//   O[r, d] = a O[r, d] + sum_t fp8(p_t * FP8_MAX) * v_scale_t * v8_t[d]   (one thread per dim and token group)
//   stores m, l and O * v_scale / (FP8_MAX * l), the partial (or the output when one partition covers it)
#include "kernels/hip/decode_common.hpp"
#if defined(PAV_HIP_NVIDIA)
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#endif

namespace pav::kernels::gpu {
namespace {

// ---- attention: fast body ----------------------------------------------------------------
// fp8 compute, head_dim kD in {64, 128, 256}, K and V 16-byte aligned. The
// numerics are attend_kernel's (the same tiles, Q and P quantization, masking,
// fp32 products summed in another order); the data movement differs:
// - scores: one thread per token of the tile; its K codes come 16 at a time
//   straight from the cache into registers and are decoded there (no table, no
//   staging); Q rows are read from shared memory as float4, one address for the
//   whole warp;
// - PV: one thread per (head dim, token group); 16 V codes of consecutive
//   tokens per 16-byte load (both V layouts keep 16 tokens of one dim
//   contiguous within a block), the tile's weights read as float4; the token
//   groups' sums are added at the end of the partition.
// kR query rows per pass (8 or 16).

// 16 fp8 codes (little-endian in a uint4) to f32.
__device__ inline void decode16(const uint4 w, DType flavour, float out[16]) {
  const uint32_t words[4] = {w.x, w.y, w.z, w.w};
#if defined(PAV_HIP_NVIDIA)
  if (flavour == DType::fp8_e4m3fn) {
    // The hardware's e4m3 -> f16 conversion is exact (f16 holds every e4m3
    // value, NaN included); f16 -> f32 is exact too.
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const __half2_raw lo = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(words[q] & 0xffffu), __NV_E4M3);
      const __half2_raw hi = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(words[q] >> 16), __NV_E4M3);
      const float2 a = __half22float2(__half2(lo)), b = __half22float2(__half2(hi));
      out[4 * q] = a.x;
      out[4 * q + 1] = a.y;
      out[4 * q + 2] = b.x;
      out[4 * q + 3] = b.y;
    }
    return;
  }
#endif
#pragma unroll
  for (int j = 0; j < 16; ++j) out[j] = fp8_to_f32(uint8_t(words[j / 4] >> (8 * (j % 4))), flavour);
}

template <int kR, int kD>
__global__ void __launch_bounds__(kThreads) attend_fast_kernel(const Params p) {
  static_assert(kThreads % kD == 0 && kD % 16 == 0, "token groups split the block evenly");
  constexpr int kGroups = kThreads / kD;   // token groups of the PV pass
  constexpr int kKVec = kD / 16;           // 16-code vectors per K row
  constexpr int kKBatch = kKVec < 8 ? kKVec : 8;  // K vectors in registers at once
  alignas(16) __shared__ float qf[kR * kD];
  alignas(16) __shared__ float sw[kR * kTileTokens];  // scores, then P weights; last, group sums
  __shared__ float qscale[kR], row_m[kR], row_l[kR], row_alpha[kR];
  __shared__ int flag;
  static_assert((kGroups - 1) * kD <= kTileTokens, "group sums fit in sw");

  const int tid = threadIdx.x;
  const int64_t slot = blockIdx.x;
  const int bs = p.block_size, hkv = p.hkv;
  int seq, h;
  int64_t tile0, tile1;
  if (!resolve_work(p, slot, seq, h, tile0, tile1, &flag)) return;
  const int64_t len = p.lens[seq];
  const float epi = epilogue_scale(p);
  const int32_t* table = p.tables + int64_t(seq) * p.tables_s0;
  const int dv = tid % kD, grp = tid / kD;

  for (int r0 = 0; r0 < p.rows; r0 += kR) {
    const int nr = min(kR, p.rows - r0);
    __syncthreads();
    load_q_rows(p, seq, h, r0, nr, qf, qscale, row_m, row_l);
    float acc[kR];
#pragma unroll
    for (int r = 0; r < kR; ++r) acc[r] = 0.0f;

    for (int64_t tile = tile0; tile < tile1; ++tile) {
      const int64_t t0 = tile * kTileTokens;
      const int n = int(min64(kTileTokens, len - t0));
      if (n <= 0) break;
      __syncthreads();  // Q ready; the previous tile's weights consumed

      // Scores: thread tid <-> token t0 + tid.
      if (tid < n) {
        const int64_t t = t0 + tid, blk = table[t / bs], off = t % bs;
        const uint8_t* kp = p.k + (blk * hkv + h) * int64_t(kKVec) * bs * 16 + off * 16;
        float dot[kR];
#pragma unroll
        for (int r = 0; r < kR; ++r) dot[r] = 0.0f;
#pragma unroll
        for (int v0 = 0; v0 < kKVec; v0 += kKBatch) {
          uint4 kw[kKBatch];
#pragma unroll
          for (int v = 0; v < kKBatch; ++v)
            kw[v] = *reinterpret_cast<const uint4*>(kp + int64_t(v0 + v) * bs * 16);
#pragma unroll
          for (int v = 0; v < kKBatch; ++v) {
            float kf[16];
            decode16(kw[v], p.cache_fp8, kf);
#pragma unroll
            for (int r = 0; r < kR; ++r) {
              if (r >= nr) continue;
              const float4* q4 = reinterpret_cast<const float4*>(qf + r * kD + (v0 + v) * 16);
              float a = dot[r];
#pragma unroll
              for (int j = 0; j < 4; ++j) {
                const float4 q = q4[j];
                a = fmaf(q.x, kf[4 * j], a);
                a = fmaf(q.y, kf[4 * j + 1], a);
                a = fmaf(q.z, kf[4 * j + 2], a);
                a = fmaf(q.w, kf[4 * j + 3], a);
              }
              dot[r] = a;
            }
          }
        }
        const float ks = scale_at(p.k_scale, p.k_scale_kind, blk, h, off, p);
#pragma unroll
        for (int r = 0; r < kR; ++r)
          if (r < nr) sw[r * kTileTokens + tid] = dot[r] * qscale[r] * ks;
      }
      __syncthreads();
      softmax_tile(p, h, table, len, t0, n, r0, nr, sw, row_m, row_l, row_alpha);
      __syncthreads();

      // PV: thread (dv, grp) <-> dim dv of the 16-token chunks grp, grp + kGroups, ...
#pragma unroll
      for (int r = 0; r < kR; ++r)
        if (r < nr) acc[r] *= row_alpha[r];
      for (int c = grp; c * 16 < n; c += kGroups) {
        const int64_t t = t0 + int64_t(c) * 16, blk = table[t / bs], off = t % bs;
        const uint8_t* vp = p.v_trans
            ? p.v + ((blk * hkv + h) * (bs / 16) + off / 16) * int64_t(kD) * 16 + dv * 16
            : p.v + ((blk * hkv + h) * kD + dv) * int64_t(bs) + off;
        // A chunk is 16-aligned within one block, so the load stays inside the
        // block even when the context ends inside the chunk; codes past the
        // context are decoded but never used.
        float vf[16];
        decode16(*reinterpret_cast<const uint4*>(vp), p.cache_fp8, vf);
        const int valid = n - c * 16;
        if (valid >= 16) {
#pragma unroll
          for (int r = 0; r < kR; ++r) {
            if (r >= nr) continue;
            const float4* w4 = reinterpret_cast<const float4*>(sw + r * kTileTokens + c * 16);
            float a = acc[r];
#pragma unroll
            for (int j = 0; j < 4; ++j) {
              const float4 w = w4[j];
              a = fmaf(w.x, vf[4 * j], a);
              a = fmaf(w.y, vf[4 * j + 1], a);
              a = fmaf(w.z, vf[4 * j + 2], a);
              a = fmaf(w.w, vf[4 * j + 3], a);
            }
            acc[r] = a;
          }
        } else {
#pragma unroll
          for (int r = 0; r < kR; ++r) {
            if (r >= nr) continue;
            const float* wr = sw + r * kTileTokens + c * 16;
            float a = acc[r];
#pragma unroll
            for (int j = 0; j < 16; ++j)
              if (j < valid) a = fmaf(wr[j], vf[j], a);
            acc[r] = a;
          }
        }
      }
    }

    // Sum the token groups into group 0, then store.
    __syncthreads();
    if (grp > 0) {
#pragma unroll
      for (int r = 0; r < kR; ++r)
        if (r < nr) sw[((grp - 1) * kR + r) * kD + dv] = acc[r];
    }
    __syncthreads();
    if (grp == 0) {
      for (int g2 = 1; g2 < kGroups; ++g2) {
#pragma unroll
        for (int r = 0; r < kR; ++r)
          if (r < nr) acc[r] += sw[((g2 - 1) * kR + r) * kD + dv];
      }
#pragma unroll
      for (int r = 0; r < kR; ++r)
        if (r < nr) store_row_value(p, seq, h, slot, r0 + r, dv, acc[r], row_l[r], epi);
    }
    if (!p.direct && tid < nr) {
      p.m[slot * p.rows + r0 + tid] = row_m[tid];
      p.l[slot * p.rows + r0 + tid] = row_l[tid];
    }
  }
}

}  // namespace

template <int kR>
void launch_fast(const Params& p, unsigned grid, hipStream_t s) {
  switch (p.head_dim) {
    case 64: attend_fast_kernel<kR, 64><<<grid, kThreads, 0, s>>>(p); break;
    case 128: attend_fast_kernel<kR, 128><<<grid, kThreads, 0, s>>>(p); break;
    default: attend_fast_kernel<kR, 256><<<grid, kThreads, 0, s>>>(p); break;
  }
}

template void launch_fast<8>(const Params& p, unsigned grid, hipStream_t s);
template void launch_fast<16>(const Params& p, unsigned grid, hipStream_t s);

}  // namespace pav::kernels::gpu
