// SPDX-License-Identifier: Apache-2.0
// The decode kernels: one attention body fed by two work sources (uniform
// splits or a plan's tasks), the reduce (bounded variant for ceilings <= 64,
// vectorized for head_dim 128 with 16-bit partials; general variant above),
// and the plan freshness check. Numerics mirror kernels/cpu/decode_cpu.cpp.
// device_common.hpp first: on AMD the runtime header must precede <cstring>.
#include "kernels/hip/device_common.hpp"
#include <atomic>
#include <stdexcept>
#if defined(PAV_HIP_NVIDIA)
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#endif

#include "kernels/hip/gpu_backend.hpp"
#include "kernels/split_rules.hpp"

namespace pav::kernels::gpu {
namespace {

constexpr int kThreads = 256;             // attention and reduce blocks
constexpr int kWarps = kThreads / kWarpSize;
constexpr int kStageBytes = 8192;         // K or V bytes staged in shared memory at once
constexpr int kAccElems = 4096;           // rows * D accumulated per row chunk
constexpr int kAccPerThread = kAccElems / kThreads;
constexpr int kMaxRowChunk = 16;
constexpr int kMaxRowsPerThread = 8;      // score rows per thread (D >= 64)
constexpr int kMinHeadDim = 64, kMaxHeadDim = 1024;
constexpr int kMaxReduceCeiling = 1024;   // general reduce: partitions per (seq, head)
constexpr int kCheckThreads = 1024;
static_assert(kThreads == 256, "the fp8 table is filled one code per thread");
static_assert(kThreads % kWarpSize == 0, "blocks hold whole warps");

enum ScaleKind : int { kScaleNone = 0, kScaleTensor = 1, kScaleToken = 2 };

// Everything a decode launch needs, by value (device pointers and geometry).
struct Params {
  const uint16_t* q;
  int64_t q_s0, q_s1;
  uint16_t* out;
  int64_t out_s0, out_s1;
  bool half_bf16;  // q/out dtype: bf16 (else f16)
  const uint8_t* k;
  const uint8_t* v;
  bool v_trans;
  const int32_t* tables;
  int64_t tables_s0;
  const int32_t* lens;
  const float* k_scale;
  const float* v_scale;
  int k_scale_kind, v_scale_kind;
  int num_seqs, q_len, hkv, group, head_dim, block_size, rows;
  int block_shift;  // log2(block_size) when it is a power of two, else -1
  float softmax_scale;
  bool fp8_compute;
  DType compute_fp8;  // flavour Q and P are quantized to (fp8 compute)
  DType cache_fp8;    // flavour of the cache codes
  float fp8_max;
  void* partial;
  PartialKind partial_kind;
  float* m;
  float* l;
  // Work source: a plan (planned) or fixed splits (uniform).
  bool planned;
  int splits;
  bool direct;  // uniform with one split: write the output, no scratch
  const int32_t* work;
  const int32_t* reduce_info;
  int64_t capacity;
  int64_t ceiling;  // largest partition count the reduce may see
};

__device__ inline float scale_at(const float* s, int kind, int64_t blk, int h, int64_t off,
                                 const Params& p) {
  if (kind == kScaleNone) return 1.0f;
  if (kind == kScaleTensor) return s[0];
  return s[(blk * p.hkv + h) * p.block_size + off];
}

// Token t (< 2^31: lengths are int32) as (block-table column, offset in the
// page) in 32-bit arithmetic: a shift for power-of-two pages. A 64-bit
// division per page lookup cost more than the attention's arithmetic.
[[maybe_unused]] __device__ inline void page_of(const Params& p, uint32_t t, uint32_t& col, uint32_t& off) {
  if (p.block_shift >= 0) {
    col = t >> p.block_shift;
    off = t & uint32_t(p.block_size - 1);
  } else {
    col = t / uint32_t(p.block_size);
    off = t - col * uint32_t(p.block_size);
  }
}

// True when sequence `seq`'s own task range holds a task recorded for another
// length than the live one, or it has no task but a positive live length.
// Called by every thread of the block; returns the same value to all.
__device__ bool sequence_stale(const Params& p, int seq, int* flag) {
  const int32_t live = p.lens[seq];
  const int64_t first = p.reduce_info[2 * seq], count = p.reduce_info[2 * seq + 1];
  if (threadIdx.x == 0) *flag = (count == 0 && live > 0) ? 1 : 0;
  __syncthreads();
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
    const int64_t i = first + j;
    if (i < 0 || i >= p.capacity || p.work[4 * i + 3] != live) atomicOr(flag, 1);
  }
  __syncthreads();
  const bool stale = *flag != 0;
  __syncthreads();
  return stale;
}

// ---- attention: pieces both bodies share -----------------------------------------------
// Which partition block `slot` attends: uniform (seq*Hkv + h)*splits + k, planned
// h*capacity + i. False (for the whole block) when the slot is padding, not a
// task of its sequence's range, or its sequence is stale (not attended).
__device__ bool resolve_work(const Params& p, int64_t slot, int& seq, int& h, int64_t& tile0, int64_t& tile1,
                             int* flag) {
  if (p.planned) {
    h = int(slot / p.capacity);
    const int64_t i = slot % p.capacity;
    const int32_t* row = p.work + 4 * i;
    if (row[1] >= row[2]) return false;  // padding
    seq = row[0];
    if (seq < 0 || seq >= p.num_seqs) return false;
    const int64_t first = p.reduce_info[2 * seq], count = p.reduce_info[2 * seq + 1];
    if (i < first || i >= first + count) return false;  // not a task of its sequence's range
    if (sequence_stale(p, seq, flag)) return false;     // stale: not attended
    tile0 = row[1];
    tile1 = row[2];
    return true;
  }
  const int k = int(slot % p.splits);
  const int64_t sh = slot / p.splits;
  seq = int(sh / p.hkv);
  h = int(sh % p.hkv);
  const int64_t tiles = plan_tiles(p.lens[seq]);
  const int64_t per = ceil_div64(max64(tiles, 1), p.splits);
  tile0 = min64(k * per, tiles);
  tile1 = min64((k + 1) * per, tiles);
  return true;
}

// Q rows r0..r0+nr-1 of (seq, h), one warp per row, quantized per row to fp8
// with q_scale = max(absmax/FP8_MAX, 1e-20) under fp8 compute: store(r, d, v)
// gets each value as the product uses it; qscale = q_scale * softmax_scale;
// running max and sum reset. The one rule every attention body quantizes by.
template <class Store>
__device__ void quantize_q_rows(const Params& p, int seq, int h, int r0, int nr, float* qscale, float* row_m,
                                float* row_l, Store store) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int D = p.head_dim, G = p.group;
  for (int r = warp; r < nr; r += kWarps) {
    const int row = r0 + r, pos = row / G, g = row % G;
    const uint16_t* qrow = p.q + (int64_t(seq) * p.q_len + pos) * p.q_s0 + int64_t(h * G + g) * p.q_s1;
    float amax = 0.0f;
    for (int d = lane; d < D; d += kWarpSize) amax = fmaxf(amax, fabsf(load_half(qrow, d, p.half_bf16)));
    amax = warp_max(amax);
    const float qs = p.fp8_compute ? fmaxf(amax / p.fp8_max, 1e-20f) : 1.0f;
    for (int d = lane; d < D; d += kWarpSize) {
      const float x = load_half(qrow, d, p.half_bf16);
      store(r, d, p.fp8_compute ? fp8_to_f32(f32_to_fp8(x / qs, p.compute_fp8), p.compute_fp8) : x);
    }
    if (lane == 0) {
      qscale[r] = qs * p.softmax_scale;
      row_m[r] = neg_inf();
      row_l[r] = 0.0f;
    }
  }
}

// quantize_q_rows into qf[r * D + d].
__device__ void load_q_rows(const Params& p, int seq, int h, int r0, int nr, float* qf, float* qscale,
                            float* row_m, float* row_l) {
  const int D = p.head_dim;
  quantize_q_rows(p, seq, h, r0, nr, qscale, row_m, row_l, [&](int r, int d, float v) { qf[r * D + d] = v; });
}

// Online softmax of one tile (one warp per row) over the scores in
// sw[r * kTileTokens + i]: the running max after this tile, P = exp(s - m)
// summed unquantized into l, and the PV weight fp8(P * FP8_MAX) times the
// per-token V scale written back into sw. Tokens a row does not see (MTP
// causality) get weight 0; tokens past the context (i >= n) are never used.
__device__ void softmax_tile(const Params& p, int h, const int32_t* table, int64_t len,
                             int64_t t0, int n, int r0, int nr, float* sw, float* row_m, float* row_l,
                             float* row_alpha) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int G = p.group, bs = p.block_size;
  for (int r = warp; r < nr; r += kWarps) {
    const int pos = (r0 + r) / G;
    const int visible = int(min64(n, len - p.q_len + 1 + pos - t0));
    float* srow = sw + r * kTileTokens;
    if (visible <= 0) {
      for (int i2 = lane; i2 < n; i2 += kWarpSize) srow[i2] = 0.0f;
      if (lane == 0) row_alpha[r] = 1.0f;
      continue;
    }
    float tmax = neg_inf();
    for (int i2 = lane; i2 < visible; i2 += kWarpSize) tmax = fmaxf(tmax, srow[i2]);
    tmax = warp_max(tmax);
    const float m_old = row_m[r];
    const float m_new = fmaxf(m_old, tmax);
    const float alpha = m_old == neg_inf() ? 0.0f : expf(m_old - m_new);
    float lsum = 0.0f;
    for (int i2 = lane; i2 < n; i2 += kWarpSize) {
      float w = 0.0f;
      if (i2 < visible) {
        const float pt = expf(srow[i2] - m_new);
        lsum += pt;
        w = p.fp8_compute ? fp8_to_f32(f32_to_fp8(pt * p.fp8_max, p.compute_fp8), p.compute_fp8) : pt;
        if (p.v_scale_kind == kScaleToken) {
          const int64_t t = t0 + i2, blk = table[t / bs], off = t % bs;
          w *= p.v_scale[(blk * p.hkv + h) * bs + off];
        }
      }
      srow[i2] = w;
    }
    lsum = warp_sum(lsum);
    PAV_SYNC_WARP();  // every lane has read row_m[r] before lane 0 rewrites it
    if (lane == 0) {
      row_l[r] = row_l[r] * alpha + lsum;
      row_m[r] = m_new;
      row_alpha[r] = alpha;
    }
  }
}

// Writes one finished row element: acc undone by the P scale and the
// per-tensor V scale (epi), normalized by l; to the output (direct) or the
// slot's partial.
__device__ inline void store_row_value(const Params& p, int seq, int h, int64_t slot, int row, int d, float acc,
                                       float l, float epi) {
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  const float val = acc * epi;
  if (p.direct) {
    const int pos = row / p.group, g = row % p.group;
    uint16_t* o = p.out + (int64_t(seq) * p.q_len + pos) * p.out_s0 + int64_t(h * p.group + g) * p.out_s1;
    o[d] = to_half(l > 0.0f ? val * inv : 0.0f, p.half_bf16);
  } else {
    store_partial(p.partial, (slot * p.rows + row) * p.head_dim + d, val * inv, p.partial_kind);
  }
}

__device__ inline float epilogue_scale(const Params& p) {
  return (p.v_scale_kind == kScaleTensor ? p.v_scale[0] : 1.0f) / (p.fp8_compute ? p.fp8_max : 1.0f);
}

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

// ---- attention: matrix-unit body (NVIDIA) -------------------------------------------------
// fp8 e4m3fn compute over an e4m3fn cache, head_dim kD in {64, 128, 256}, K and
// V 16-byte aligned, per-tensor (or no) V scale. The numerics are the other
// bodies' (the same tiles, Q and P quantization, masking, running max, partial
// store); the two products run on the tensor cores with the KV tokens on M and
// the query rows of one KV head on N ("swap AB": 8 * kNT rows per pass, so
// G 8 x q_len 4 is one pass over the KV):
//   scores^T[token, row] = K[token, :] . Q[row, :]     (M = 16 tokens, K = 16 dims)
//   out^T[dim, row]     += V^T[dim, :] . P^T[:, row]   (M = 16 dims,   K = 16 tokens)
// Operands are the fp8 codes converted to f16 in registers (every e4m3 value is
// an f16, so the products stay exact) and each instruction starts from a zero
// accumulator: its 16 exact products are summed by the unit and the result is
// added to the fp32 accumulator by an ordinary add. The k order inside an
// instruction is permuted (a sum does not depend on it) so that a lane's four
// k slots {2t, 2t+1, 2t+8, 2t+9} are four consecutive bytes of the cache.
//
// Data movement: whole 256-token tiles of K and of V are copied with cp.async
// into a ring of kSlots tile slots (K of tile 0, V of tile 0, K of tile 1, ...),
// kSlots - 1 tiles' worth in flight while one is consumed. A copy request is
// served at full width only when the eight 16-byte pieces of each quarter warp
// come from one 128-byte run of the cache and land in one 128-byte row of
// shared memory (in any order): the slot layouts below keep the cache's own
// 128-byte runs together as rows and permute 16-byte pieces only inside a
// row. The page of every 16-token chunk is looked up once per tile, two tiles
// ahead, into a small shared table. Bytes past the context are never read: the
// copy fills them with zeros (cp.async's source size), so masked V tokens are
// +0 in shared memory (0 * NaN would poison a masked product).
#if defined(PAV_HIP_NVIDIA)
namespace mma {

constexpr int kChunks = kTileTokens / 16;                  // 16-token chunks per tile (pages hold whole chunks)
constexpr int kChunkRing = 3;                              // tiles whose chunk table is kept (this one, two ahead)
constexpr int kPStride = kTileTokens + 8;                  // f16 per P row: conflict-free B loads

__device__ inline uint32_t smem_addr(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }
// Copies `bytes` (0..16) from src and fills the rest of the 16 with zeros.
__device__ inline void cp_async16(void* dst, const void* src, uint32_t bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(bytes)
               : "memory");
}
// Copies 16 bytes (all of them in the context).
__device__ inline void cp_async16_all(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}
__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most kPending committed groups are still in flight.
template <int kPending>
__device__ inline void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory"); }

// Two e4m3 codes (the low byte first) as one f16x2 register (the low half
// first), exactly.
__device__ inline uint32_t e4m3x2_to_f16x2(uint32_t two) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(two & 0xffffu), __NV_E4M3);
  return uint32_t(h.x) | (uint32_t(h.y) << 16);
}

// d += A(16x16 f16, row) * B(16x8 f16, col), the product summed from zero by
// the unit and then added in fp32.
__device__ inline void mma_add(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                               uint32_t b1) {
  float c0, c1, c2, c3;
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%10,%10,%10};\n"
      : "=f"(c0), "=f"(c1), "=f"(c2), "=f"(c3)
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(0.0f));
  d[0] += c0;
  d[1] += c1;
  d[2] += c2;
  d[3] += c3;
}

__device__ inline uint32_t word_of(const uint4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

// The 16 head dims (a K group) lane t feeds in pass j of the score product.
template <int kD>
__device__ inline int k_group(int t, int j) {
  if constexpr (kD == 64) return t;
  else return 2 * t + (j & 1) + 8 * (j >> 1);
}
// K slot layout: a 128-byte row per (8-token octet, group) -- the cache's own
// 128-byte runs (8 consecutive tokens of one group) -- at row (token / 8) *
// groups + group; token i of the octet at 16-byte piece i ^ k_swizzle(group).
// A quarter warp of the score reads takes tokens {2q, 2q + 1} of four groups
// whose swizzles are {0, 2, 4, 6}: eight distinct pieces, no bank conflict.
template <int kD>
__device__ inline int k_swizzle(int grp) {
  if constexpr (kD == 64) return 2 * (grp & 3);
  else return 2 * ((grp >> 1) & 3);
}
template <int kD>
__device__ inline int k_offset(int tok, int grp) {
  return (((tok >> 3) * (kD / 16) + grp) << 7) + 16 * ((tok & 7) ^ k_swizzle<kD>(grp));
}
// V slot layout: a 128-byte row per (16-token chunk, 8 dims) -- the cache's
// 128-byte runs in either V layout hold 16 tokens of 8 consecutive dims -- at
// row chunk * (kD / 8) + dim / 8; dim d's 16 tokens at piece (d & 7) ^ 2 (chunk & 3).
template <int kD>
__device__ inline int v_offset(int c, int d) {
  return ((c * (kD / 8) + (d >> 3)) << 7) + 16 * ((d & 7) ^ (2 * (c & 3)));
}

template <int kD>
constexpr int tile_bytes() { return kTileTokens * kD; }

// Ring slots per block: three tiles in flight where two blocks per SM (one at
// head_dim 256) still fit the shared memory, else two.
template <int kD, int kNT>
constexpr int ring_slots() { return kNT >= 4 ? 2 : 3; }

// Chunk c of tile `tile`: its page (block-table entry) and offset in it, or
// not `in` the context.
struct ChunkPage {
  int64_t blk;
  uint32_t off;
  bool in;
};
__device__ inline ChunkPage chunk_page(const Params& p, const int32_t* table, int64_t len, int64_t tile, int c) {
  const int64_t t = tile * kTileTokens + 16 * c;
  ChunkPage cp{0, 0, t < len};
  if (cp.in) {
    uint32_t col;
    page_of(p, uint32_t(t), col, cp.off);
    cp.blk = table[col];
  }
  return cp;
}
// The byte offsets of the chunk's first token in the K and V caches into the
// chunk table, -1 past the context.
template <int kD>
__device__ void write_chunk(const Params& p, int h, const ChunkPage& cp, int c, int64_t* kofs, int64_t* vofs) {
  int64_t ko = -1, vo = -1;
  if (cp.in) {
    const int64_t page = (cp.blk * p.hkv + h) * int64_t(kD) * p.block_size;
    ko = page + int64_t(cp.off) * 16;
    vo = page + (p.v_trans ? int64_t(cp.off) * kD : int64_t(cp.off));
  }
  kofs[c] = ko;
  vofs[c] = vo;
}

// Enqueues the K codes of a tile holding n tokens of the context into a slot:
// piece i of the 16-token chunk c of group grp; tokens past the context are
// zero-filled, never read. Consecutive threads take consecutive tokens of one
// group of one chunk. A thread's token in its chunk and its group are the same
// in every iteration (the block is a multiple of one chunk's 16 x groups
// pieces), so only the chunk's page offset changes from one copy to the next.
template <int kD>
__device__ void issue_k(const Params& p, const int64_t* kofs, int n, uint8_t* slot) {
  constexpr int kNG = kD / 16;
  constexpr int kStep = kThreads / (16 * kNG);  // chunks per round of the block
  static_assert(kStep >= 1 && kThreads % (16 * kNG) == 0, "a round of the block covers whole chunks");
  const int i = threadIdx.x & 15, grp = (threadIdx.x >> 4) % kNG, c0 = (threadIdx.x >> 4) / kNG;
  const uint8_t* const src0 = p.k + int64_t(grp) * p.block_size * 16 + i * 16;
  uint8_t* dst = slot + k_offset<kD>(16 * c0 + i, grp);
  if (n == kTileTokens) {  // a whole tile: no bounds
    uint32_t sdst = smem_addr(dst);
#pragma unroll 2
    for (int c = c0; c < kChunks; c += kStep, sdst += kStep * 2 * kNG * 128) cp_async16_all(sdst, src0 + kofs[c]);
    return;
  }
  // Not unrolled: an unrolled copy loop keeps every iteration's addresses in
  // registers across the whole tile loop. No branch: a copy past the context
  // reads nothing from its (valid) address.
#pragma unroll 1
  for (int c = c0; c < kChunks; c += kStep, dst += kStep * 2 * kNG * 128) {
    const bool in = 16 * c + i < n;
    const int64_t ofs = kofs[c];
    cp_async16(dst, src0 + (in ? ofs : 0), in ? 16u : 0u);
  }
}

// Enqueues the V codes of a tile holding n tokens of the context: dim d of
// chunk c (16 tokens, 16 contiguous bytes in either layout); the bytes of
// tokens past the context are zero-filled. Consecutive threads take
// consecutive dims of one chunk; a thread's dim is the same in every iteration.
template <int kD>
__device__ void issue_v(const Params& p, const int64_t* vofs, int n, uint8_t* slot) {
  constexpr int kStep = kThreads / kD;  // chunks per round of the block
  static_assert(kStep >= 1 && kThreads % kD == 0, "a round of the block covers whole chunks");
  const int d = threadIdx.x % kD, c0 = threadIdx.x / kD;
  const uint8_t* const src0 = p.v + int64_t(d) * (p.v_trans ? 16 : p.block_size);
  if (n == kTileTokens) {  // a whole tile: no bounds
    const uint32_t sslot = smem_addr(slot);
#pragma unroll 2
    for (int c = c0; c < kChunks; c += kStep) cp_async16_all(sslot + v_offset<kD>(c, d), src0 + vofs[c]);
    return;
  }
#pragma unroll 1
  for (int c = c0; c < kChunks; c += kStep) {
    const int rest = n - 16 * c;
    const uint32_t bytes = rest <= 0 ? 0u : rest >= 16 ? 16u : uint32_t(rest);
    const int64_t ofs = vofs[c];
    cp_async16(slot + v_offset<kD>(c, d), src0 + (bytes ? ofs : 0), bytes);
  }
}

// Dynamic shared memory of one block: the ring, P as f16 [rows][kPStride], and
// Q as B fragments [kNT][passes][2][32 lanes] x 16 bytes.
template <int kD, int kNT>
constexpr int smem_bytes() {
  return ring_slots<kD, kNT>() * tile_bytes<kD>() + 8 * kNT * kPStride * 2 + 8 * kNT * kD * 2;
}

template <int kD, int kNT>
__global__ void __launch_bounds__(kThreads, kD <= 128 ? 2 : 1) attend_mma_kernel(const Params p) {
  constexpr int kR = 8 * kNT;                      // query rows per pass
  constexpr int kNJ = kD / 64;                     // 16-byte K reads per token per lane
  constexpr int kMT = kD / 16;                     // 16-dim m tiles of the PV product
  constexpr int kMTw = kMT >= kWarps ? kMT / kWarps : 1;   // m tiles per warp
  constexpr int kSplit = kMT >= kWarps ? 1 : kWarps / kMT; // warps sharing an m tile (by chunk quarters)
  constexpr int kSlots = ring_slots<kD, kNT>();
  static_assert(kWarpSize == 32 && kWarps == 8, "fragment layouts assume 8 warps of 32 lanes");
  static_assert(kNJ >= 1 && kMTw * kWarps == kMT * kSplit, "head_dim 64, 128 or 256");
  static_assert(kSlots >= 2 && kSlots <= kChunkRing, "the chunk table runs kSlots - 1 tiles ahead at most");
  extern __shared__ uint4 smem_raw[];
  uint8_t* ring = reinterpret_cast<uint8_t*>(smem_raw);
  uint16_t* p16 = reinterpret_cast<uint16_t*>(ring + kSlots * tile_bytes<kD>());
  uint4* qfrag = reinterpret_cast<uint4*>(p16 + kR * kPStride);
  __shared__ float qscale[kR], row_m[kR], row_l[kR];
  __shared__ float redmax[kWarps][kR], redsum[kWarps][kR];
  __shared__ float kscale[kTileTokens];
  __shared__ int64_t chunk_k[kChunkRing][kChunks], chunk_v[kChunkRing][kChunks];
  __shared__ int flag;

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int g = lane >> 2, t = lane & 3;
  const int64_t slot = blockIdx.x;
  int seq, h;
  int64_t tile0, tile1;
  if (!resolve_work(p, slot, seq, h, tile0, tile1, &flag)) return;
  const int64_t len = p.lens[seq];
  const float epi = epilogue_scale(p);
  const int32_t* table = p.tables + int64_t(seq) * p.tables_s0;
  const bool token_kscale = p.k_scale_kind == kScaleToken;
  const float kscale_all = token_kscale ? 1.0f : scale_at(p.k_scale, p.k_scale_kind, 0, h, 0, p);
  // Tiles of this task that hold tokens: local tiles 0 .. ntl - 1.
  // (int: a context holds fewer than 2^31 tokens.)
  const int ntl = int(max64(0, min64(tile1, ceil_div64(max64(len, 0), kTileTokens)) - tile0));

  // Item j of the ring: K (even j) or V (odd j) of local tile j / 2, in slot j % kSlots.
  auto issue_item = [&](int j) {
    const int lt = j >> 1;
    if (lt < ntl) {
      const int n = int(min64(kTileTokens, len - (tile0 + lt) * kTileTokens));
      uint8_t* dst = ring + (j % kSlots) * tile_bytes<kD>();
      const int e = lt % kChunkRing;
      if (j & 1) issue_v<kD>(p, chunk_v[e], n, dst);
      else issue_k<kD>(p, chunk_k[e], n, dst);
    }
    cp_async_commit();  // empty past the last tile: the wait counts stay uniform
  };

  for (int r0 = 0; r0 < p.rows; r0 += kR) {
    const int nr = min(kR, p.rows - r0);
    __syncthreads();  // the previous pass is done with shared memory
    if (tid < 2 * kChunks && tid / kChunks < ntl)
      write_chunk<kD>(p, h, chunk_page(p, table, len, tile0 + tid / kChunks, tid % kChunks), tid % kChunks,
                      chunk_k[tid / kChunks], chunk_v[tid / kChunks]);
    // Q: padding rows of the last n tile stay zero.
    for (int i = tid; i < kR * kD / 8; i += kThreads) qfrag[i] = make_uint4(0, 0, 0, 0);
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kSlots; ++j) issue_item(j);
    quantize_q_rows(p, seq, h, r0, nr, qscale, row_m, row_l, [&](int r, int d, float v) {
      const int grp = d / 16, low = grp & 7;
      const int tq = kD == 64 ? grp : low >> 1;
      const int jq = kD == 64 ? 0 : (low & 1) + 2 * (grp >> 3);
      const int at = ((((r / 8) * kNJ + jq) * 2 + (d % 16) / 8) * 32 + (r % 8) * 4 + tq) * 8 + d % 8;
      reinterpret_cast<__half*>(qfrag)[at] = __float2half_rn(v);  // exact: v is an e4m3 value
    });

    float o[kMTw][kNT][4];
#pragma unroll
    for (int mi = 0; mi < kMTw; ++mi)
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[mi][nt][e] = 0.0f;

    for (int lt = 0; lt < ntl; ++lt) {
      const int64_t t0 = (tile0 + lt) * kTileTokens;
      const int n = int(min64(kTileTokens, len - t0));
      // The chunk table two tiles ahead: the block-table entries are loaded
      // here and written after this tile's V barrier (the load's latency hides
      // behind the scores); their first reader issues copies after this
      // tile's last barrier. The ring entry was last read for tile lt - 1.
      const bool ahead = tid < kChunks && lt + 2 < ntl;
      const ChunkPage ahead_page = ahead ? chunk_page(p, table, len, tile0 + lt + 2, tid) : ChunkPage{0, 0, false};
      if (token_kscale && tid < n) {
        uint32_t col, off;
        page_of(p, uint32_t(t0 + tid), col, off);
        kscale[tid] = scale_at(p.k_scale, p.k_scale_kind, table[col], h, off, p);
      }
      // This lane's rows 8nt + 2t + c: their scales and visible counts.
      float qs_r[kNT][2];
      int vis_r[kNT][2];
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const int row = 8 * nt + 2 * t + c;
          vis_r[nt][c] = row < nr ? int(min64(n, len - p.q_len + 1 + (r0 + row) / p.group - t0)) : 0;
        }
      cp_async_wait<kSlots - 1>();  // this tile's K
      __syncthreads();
      const uint8_t* kst = ring + ((2 * lt) % kSlots) * tile_bytes<kD>();
      const uint8_t* vst = ring + ((2 * lt + 1) % kSlots) * tile_bytes<kD>();

      // Scores: warp w takes tokens 32w .. 32w + 31.
      float s[2][kNT][4];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[mt][nt][e] = 0.0f;
      {
        // One pass over a lane's groups at a time: unrolling the passes would
        // hold every pass's K and Q fragments in registers at once.
#pragma unroll 1
        for (int j = 0; j < kNJ; ++j) {
          const int grp = k_group<kD>(t, j);
          uint4 ka[2][2];
#pragma unroll
          for (int mt = 0; mt < 2; ++mt)
#pragma unroll
            for (int hf = 0; hf < 2; ++hf)
              ka[mt][hf] = *reinterpret_cast<const uint4*>(kst + k_offset<kD>(32 * warp + 16 * mt + 8 * hf + g, grp));
          uint4 qb[kNT][2];
#pragma unroll
          for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
            for (int hf = 0; hf < 2; ++hf) qb[nt][hf] = qfrag[((nt * kNJ + j) * 2 + hf) * 32 + lane];
#pragma unroll
          for (int s4 = 0; s4 < 4; ++s4)
#pragma unroll
            for (int mt = 0; mt < 2; ++mt) {
              const uint32_t wlo = word_of(ka[mt][0], s4), whi = word_of(ka[mt][1], s4);
              const uint32_t a0 = e4m3x2_to_f16x2(wlo), a1 = e4m3x2_to_f16x2(whi);
              const uint32_t a2 = e4m3x2_to_f16x2(wlo >> 16), a3 = e4m3x2_to_f16x2(whi >> 16);
#pragma unroll
              for (int nt = 0; nt < kNT; ++nt)
                mma_add(s[mt][nt], a0, a1, a2, a3, word_of(qb[nt][s4 >> 1], 2 * (s4 & 1)),
                        word_of(qb[nt][s4 >> 1], 2 * (s4 & 1) + 1));
            }
        }
      }

      // Online softmax of the tile on the fragments: element e of (mt, nt) is
      // token 32w + 16mt + g + 8(e >> 1), row 8nt + 2t + (e & 1).
      float rmax[kNT][2];
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          qs_r[nt][c] = qscale[8 * nt + 2 * t + c];
          rmax[nt][c] = neg_inf();
        }
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int tok = 32 * warp + 16 * mt + g + 8 * (e >> 1);
            const float v = s[mt][nt][e] * qs_r[nt][e & 1] * (token_kscale ? kscale[tok] : kscale_all);
            s[mt][nt][e] = v;
            if (tok < vis_r[nt][e & 1]) rmax[nt][e & 1] = fmaxf(rmax[nt][e & 1], v);
          }
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          float v = rmax[nt][c];
          v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 4));
          v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 8));
          v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 16));
          if (g == 0) redmax[warp][8 * nt + 2 * t + c] = v;
        }
      __syncthreads();  // every warp is done with this tile's K slot; the maxima are in
      issue_item(2 * lt + kSlots);
      // Every lane derives its own rows' new max and rescale factor (the same
      // values in every lane: no further barrier). A row that sees no token of
      // this tile keeps its max and sum.
      float mnew_r[kNT][2], alpha_r[kNT][2], lsum[kNT][2];
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const int r = 8 * nt + 2 * t + c;
          mnew_r[nt][c] = 0.0f;
          alpha_r[nt][c] = 1.0f;
          lsum[nt][c] = 0.0f;
          if (vis_r[nt][c] > 0) {
            const float m_old = row_m[r];
            float tmax = redmax[0][r];
#pragma unroll
            for (int w2 = 1; w2 < kWarps; ++w2) tmax = fmaxf(tmax, redmax[w2][r]);
            const float m_new = fmaxf(m_old, tmax);
            mnew_r[nt][c] = m_new;
            alpha_r[nt][c] = m_old == neg_inf() ? 0.0f : expf(m_old - m_new);
          }
        }
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int tok = 32 * warp + 16 * mt + g + 8 * (e >> 1), row = 8 * nt + 2 * t + (e & 1);
            uint16_t w = 0;
            if (tok < vis_r[nt][e & 1]) {
              const float pt = expf(s[mt][nt][e] - mnew_r[nt][e & 1]);
              lsum[nt][e & 1] += pt;
              w = __nv_cvt_fp8_to_halfraw(__nv_cvt_float_to_fp8(pt * p.fp8_max, __NV_SATFINITE, __NV_E4M3), __NV_E4M3).x;
            }
            p16[row * kPStride + tok] = w;
          }
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          float v = lsum[nt][c];
          v += __shfl_xor_sync(0xffffffffu, v, 4);
          v += __shfl_xor_sync(0xffffffffu, v, 8);
          v += __shfl_xor_sync(0xffffffffu, v, 16);
          if (g == 0) redsum[warp][8 * nt + 2 * t + c] = v;
        }
      cp_async_wait<kSlots - 1>();  // this tile's V (later tiles may still fly)
      __syncthreads();
      if (ahead) write_chunk<kD>(p, h, ahead_page, tid, chunk_k[(lt + 2) % kChunkRing], chunk_v[(lt + 2) % kChunkRing]);
      // The running max and sum, written once per row (warp 0 holds every row
      // in its lanes g == 0); every lane has read row_m above.
      if (warp == 0 && g == 0) {
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            const int r = 8 * nt + 2 * t + c;
            if (vis_r[nt][c] > 0) {
              float sum = 0.0f;
              for (int w2 = 0; w2 < kWarps; ++w2) sum += redsum[w2][r];
              row_l[r] = row_l[r] * alpha_r[nt][c] + sum;
              row_m[r] = mnew_r[nt][c];
            }
          }
      }

      // PV: warp w owns dim m tiles (and, at D 64, half of the chunks).
#pragma unroll
      for (int mi = 0; mi < kMTw; ++mi)
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) o[mi][nt][e] *= alpha_r[nt][e & 1];
      constexpr int kQuartersPerWarp = 4 / kSplit;  // 64-token quarters of the tile
#pragma unroll
      for (int qs = 0; qs < kQuartersPerWarp; ++qs) {
        const int q = (warp / (kWarps / kSplit)) * kQuartersPerWarp + qs;
        const int c = 4 * q + t;  // this lane's chunk: tokens 16c .. 16c + 15
        uint4 pb[kNT][2];
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int hf = 0; hf < 2; ++hf)
            pb[nt][hf] = *reinterpret_cast<const uint4*>(p16 + (8 * nt + g) * kPStride + 16 * c + 8 * hf);
#pragma unroll
        for (int mi = 0; mi < kMTw; ++mi) {
          const int mtile = kSplit == 1 ? warp * kMTw + mi : warp % kMT;
          const int d0 = 16 * mtile + g, d1 = d0 + 8;
          const uint4 va = *reinterpret_cast<const uint4*>(vst + v_offset<kD>(c, d0));
          const uint4 vb = *reinterpret_cast<const uint4*>(vst + v_offset<kD>(c, d1));
#pragma unroll
          for (int s4 = 0; s4 < 4; ++s4) {
            const uint32_t wa = word_of(va, s4), wb = word_of(vb, s4);
            const uint32_t a0 = e4m3x2_to_f16x2(wa), a1 = e4m3x2_to_f16x2(wb);
            const uint32_t a2 = e4m3x2_to_f16x2(wa >> 16), a3 = e4m3x2_to_f16x2(wb >> 16);
#pragma unroll
            for (int nt = 0; nt < kNT; ++nt)
              mma_add(o[mi][nt], a0, a1, a2, a3, word_of(pb[nt][s4 >> 1], 2 * (s4 & 1)),
                      word_of(pb[nt][s4 >> 1], 2 * (s4 & 1) + 1));
          }
        }
      }
      __syncthreads();  // the V slot and P are consumed
      issue_item(2 * lt + 1 + kSlots);
    }
    cp_async_wait<0>();
    __syncthreads();

    // Warps that shared an m tile by chunk quarters add their sums (D 64).
    if constexpr (kSplit > 1) {
      float* part = reinterpret_cast<float*>(ring);
      if (warp >= kWarps / kSplit) {
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) part[(((warp - kWarps / kSplit) * kNT + nt) * 4 + e) * 32 + lane] = o[0][nt][e];
      }
      __syncthreads();
      if (warp < kWarps / kSplit) {
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) o[0][nt][e] += part[((warp * kNT + nt) * 4 + e) * 32 + lane];
      }
    }
    if (kSplit == 1 || warp < kWarps / kSplit) {
#pragma unroll
      for (int mi = 0; mi < kMTw; ++mi)
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int row = 8 * nt + 2 * t + (e & 1);
            const int mtile = kSplit == 1 ? warp * kMTw + mi : warp % kMT;
            const int d = 16 * mtile + g + 8 * (e >> 1);
            if (row < nr) store_row_value(p, seq, h, slot, r0 + row, d, o[mi][nt][e], row_l[row], epi);
          }
    }
    if (!p.direct && tid < nr) {
      p.m[slot * p.rows + r0 + tid] = row_m[tid];
      p.l[slot * p.rows + r0 + tid] = row_l[tid];
    }
  }
}

}  // namespace mma
#endif  // PAV_HIP_NVIDIA

// ---- reduce -----------------------------------------------------------------------------
// The partials of one (sequence, KV head) merged per row (docs/numerics.md, "The reduce"):
// M = max m_p (0 if all are -inf), w_p = l_p exp(m_p - M) for l_p > 0,
// L = sum w_p in partition order, out = sum (w_p / L) O_p in partition order,
// or 0 when L == 0.

// kVec consecutive partial values from element e0 (16-bit partials: kVec 8,
// one 16-byte load).
template <int kVec>
__device__ inline void load_partials(const Params& p, int64_t e0, float (&x)[kVec]) {
  if constexpr (kVec == 8) {
    const uint4 v = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(p.partial) + e0);
    const uint32_t w4[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const uint16_t bits = uint16_t(w4[j / 2] >> (16 * (j % 2)));
      x[j] = p.partial_kind == PartialKind::bf16 ? bf16_to_f32(bits) : f16_to_f32(bits);
    }
  } else {
#pragma unroll
    for (int j = 0; j < kVec; ++j) x[j] = load_partial(p.partial, e0 + j, p.partial_kind);
  }
}

// Rows of the unbounded reduce whose M and L one pass holds in shared memory.
constexpr int kReduceRowBatch = 64;

// One block per (sequence, KV head); each thread owns kVec consecutive dims of
// one row.
// kBounded: walks `ceiling` (<= 64) slots per thread, computing its row's
// weights itself; reads past `count` return zero weight and never touch
// memory, so they cannot wrap into another sequence's partitions.
// Otherwise (up to 1024 partitions): a warp computes each row's M and L once
// (L summed in partition order, as one thread would), then every thread walks
// exactly `count` partitions with their loads issued ahead of the weights, so
// that a long walk waits on memory once per eight partitions.
template <bool kBounded, int kVec>
__global__ void __launch_bounds__(kThreads) reduce_kernel(const Params p) {
  __shared__ int flag;
  const int seq = int(blockIdx.x / p.hkv), h = int(blockIdx.x % p.hkv);
  const int D = p.head_dim, G = p.group;
  int64_t base, count;
  if (p.planned) {
    if (sequence_stale(p, seq, &flag)) {
      for (int idx = threadIdx.x; idx < p.rows * D; idx += kThreads) {
        const int row = idx / D, d = idx % D, pos = row / G, g = row % G;
        p.out[(int64_t(seq) * p.q_len + pos) * p.out_s0 + int64_t(h * G + g) * p.out_s1 + d] =
            to_half(quiet_nan(), p.half_bf16);
      }
      return;
    }
    base = int64_t(h) * p.capacity + p.reduce_info[2 * seq];
    count = p.reduce_info[2 * seq + 1];
  } else {
    base = (int64_t(seq) * p.hkv + h) * p.splits;
    count = p.splits;
  }
  const int groups = D / kVec;
  auto store = [&](int row, int d0, const float (&o)[kVec]) {
    const int pos = row / G, g = row % G;
    uint16_t* dst = p.out + (int64_t(seq) * p.q_len + pos) * p.out_s0 + int64_t(h * G + g) * p.out_s1 + d0;
#pragma unroll
    for (int j = 0; j < kVec; ++j) dst[j] = to_half(o[j], p.half_bf16);
  };
  if constexpr (kBounded) {
    const int64_t walk = p.ceiling;
    for (int idx = threadIdx.x; idx < p.rows * groups; idx += kThreads) {
      const int row = idx / groups, d0 = (idx % groups) * kVec;
      float M = neg_inf();
#pragma unroll 8
      for (int64_t q = 0; q < walk; ++q) {
        const bool in = q < count;
        const float mq = in ? p.m[(base + q) * p.rows + row] : neg_inf();
        M = fmaxf(M, mq);
      }
      if (M == neg_inf()) M = 0.0f;
      float L = 0.0f;
#pragma unroll 8
      for (int64_t q = 0; q < walk; ++q) {
        const bool in = q < count;
        const int64_t at = (base + q) * p.rows + row;
        const float lq = in ? p.l[at] : 0.0f;
        const float mq = in ? p.m[at] : neg_inf();
        L += lq > 0.0f ? lq * expf(mq - M) : 0.0f;
      }
      float o[kVec];
#pragma unroll
      for (int j = 0; j < kVec; ++j) o[j] = 0.0f;
      if (L > 0.0f) {
#pragma unroll 4
        for (int64_t q = 0; q < walk; ++q) {
          const bool in = q < count;
          const int64_t at = (base + q) * p.rows + row;
          const float lq = in ? p.l[at] : 0.0f;
          if (!(lq > 0.0f)) continue;
          const float wq = lq * expf(p.m[at] - M) / L;
          float x[kVec];
          load_partials<kVec>(p, at * D + d0, x);
#pragma unroll
          for (int j = 0; j < kVec; ++j) o[j] += wq * x[j];
        }
      }
      store(row, d0, o);
    }
  } else {
    __shared__ float row_M[kReduceRowBatch], row_L[kReduceRowBatch];
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    for (int rb = 0; rb < p.rows; rb += kReduceRowBatch) {
      const int nb = min(kReduceRowBatch, p.rows - rb);
      __syncthreads();  // the previous batch is done with row_M / row_L
      for (int r = warp; r < nb; r += kWarps) {
        const int row = rb + r;
        float M = neg_inf();
        for (int64_t q = lane; q < count; q += kWarpSize) M = fmaxf(M, p.m[(base + q) * p.rows + row]);
        M = warp_max(M);
        if (M == neg_inf()) M = 0.0f;
        // Each lane weighs one partition of the round; every lane then adds
        // the round's weights in partition order (slots past count weigh +0,
        // which leaves a sum of non-negative terms unchanged).
        float L = 0.0f;
        for (int64_t q0 = 0; q0 < count; q0 += kWarpSize) {
          float e = 0.0f;
          if (q0 + lane < count) {
            const int64_t at = (base + q0 + lane) * p.rows + row;
            const float lq = p.l[at];
            e = lq > 0.0f ? lq * expf(p.m[at] - M) : 0.0f;
          }
#pragma unroll
          for (int k = 0; k < kWarpSize; ++k) L += PAV_SHFL(e, k);
        }
        if (lane == 0) {
          row_M[r] = M;
          row_L[r] = L;
        }
      }
      __syncthreads();
      for (int idx = threadIdx.x; idx < nb * groups; idx += kThreads) {
        const int r = idx / groups, row = rb + r, d0 = (idx % groups) * kVec;
        const float M = row_M[r], L = row_L[r];
        float o[kVec];
#pragma unroll
        for (int j = 0; j < kVec; ++j) o[j] = 0.0f;
        if (L > 0.0f) {
#pragma unroll 8
          for (int64_t q = 0; q < count; ++q) {
            const int64_t at = (base + q) * p.rows + row;
            // Loaded whatever the weight (every slot below count is scratch
            // of this launch), so that the loads do not wait on the test.
            const float lq = p.l[at], mq = p.m[at];
            float x[kVec];
            load_partials<kVec>(p, at * D + d0, x);
            if (lq > 0.0f) {
              const float wq = lq * expf(mq - M) / L;
#pragma unroll
              for (int j = 0; j < kVec; ++j) o[j] += wq * x[j];
            }
          }
        }
        store(row, d0, o);
      }
    }
  }
}

// ---- freshness ----------------------------------------------------------------------------
// One block: the CPU backend's freshness rules over the whole plan, written as
// status words {stale flag, stale tasks, stale rows, stale sequences}.
__global__ void __launch_bounds__(kCheckThreads) check_kernel(const Params p, uint32_t* status) {
  __shared__ uint8_t stale[kMaxPlanBatch];
  __shared__ unsigned long long sum_counts;
  __shared__ unsigned int n_tasks, n_rows, n_seqs;
  const int t = threadIdx.x, B = p.num_seqs;
  if (t == 0) {
    sum_counts = 0;
    n_tasks = n_rows = n_seqs = 0;
  }
  for (int b = t; b < B; b += kCheckThreads) stale[b] = 0;
  __syncthreads();
  unsigned long long mine = 0;
  for (int b = t; b < B; b += kCheckThreads) mine += (unsigned long long)(int64_t(p.reduce_info[2 * b + 1]));
  atomicAdd(&sum_counts, mine);
  __syncthreads();
  const int64_t active = min64(int64_t(sum_counts), p.capacity);
  for (int64_t i = t; i < active; i += kCheckThreads) {
    const int32_t* row = p.work + 4 * i;
    if (row[1] >= row[2]) continue;  // padding
    const int s = row[0];
    if (s < 0 || s >= B || row[3] != p.lens[s]) {
      atomicAdd(&n_tasks, 1u);
      if (s >= 0 && s < B) stale[s] = 1;
    }
  }
  for (int b = t; b < B; b += kCheckThreads)
    if (p.reduce_info[2 * b + 1] == 0 && p.lens[b] > 0) {
      atomicAdd(&n_rows, 1u);
      stale[b] = 1;
    }
  __syncthreads();
  for (int b = t; b < B; b += kCheckThreads)
    if (stale[b]) atomicAdd(&n_seqs, 1u);
  __syncthreads();
  if (t == 0) {
    status[0] = (n_tasks || n_rows) ? uint32_t(DecodeStatus::stale_plan) : uint32_t(DecodeStatus::ok);
    status[1] = n_tasks;
    status[2] = n_rows;
    status[3] = n_seqs;
  }
}

// ---- host side ----------------------------------------------------------------------------
void bad(const std::string& what) { throw std::invalid_argument("gpu decode: " + what); }

PartialKind partial_kind_of(DType d) {
  switch (d) {
    case DType::f32: return PartialKind::f32;
    case DType::bf16: return PartialKind::bf16;
    case DType::f16: return PartialKind::f16;
    default: bad("partial dtype must be f32, bf16 or f16"); return PartialKind::f32;
  }
}

int scale_kind_of(const TensorView& s) {
  if (!s.present()) return kScaleNone;
  return s.numel() == 1 ? kScaleTensor : kScaleToken;
}

Params params_of(const DecodeCall& c, const Scratch& sc) {
  const CallDims d = dims_of(c);
  if (d.head_dim < kMinHeadDim || d.head_dim > kMaxHeadDim || d.head_dim % 16)
    bad("head_dim " + std::to_string(d.head_dim) + " outside 64..1024 or not a multiple of 16");
  if (d.v_layout == VLayout::unknown) bad("V cache layout matches neither form");
  if (d.v_layout == VLayout::trans && d.block_size % 16) bad("trans V layout needs block_size % 16 == 0");
  if (c.q.dtype != DType::bf16 && c.q.dtype != DType::f16) bad("q must be bf16 or f16");
  if (c.out.dtype != c.q.dtype) bad("out dtype must equal q dtype");
  if (!is_fp8(c.k_cache.dtype)) bad("cache must be fp8");
  if (c.q.stride[2] != 1 || c.out.stride[2] != 1) bad("head_dim stride of q/out must be 1");
  // K is read 16 codes at a time.
  if (reinterpret_cast<uintptr_t>(c.k_cache.data) % 16) bad("K cache must be 16-byte aligned");
  Params p{};
  p.q = c.q.as<const uint16_t>();
  p.q_s0 = c.q.stride[0];
  p.q_s1 = c.q.stride[1];
  p.out = c.out.as<uint16_t>();
  p.out_s0 = c.out.stride[0];
  p.out_s1 = c.out.stride[1];
  p.half_bf16 = c.q.dtype == DType::bf16;
  p.k = c.k_cache.as<const uint8_t>();
  p.v = c.v_cache.as<const uint8_t>();
  p.v_trans = d.v_layout == VLayout::trans;
  p.tables = c.block_tables.as<const int32_t>();
  p.tables_s0 = c.block_tables.stride[0];
  p.lens = c.context_lens.as<const int32_t>();
  p.k_scale = c.k_scale.as<const float>();
  p.v_scale = c.v_scale.as<const float>();
  p.k_scale_kind = scale_kind_of(c.k_scale);
  p.v_scale_kind = scale_kind_of(c.v_scale);
  p.num_seqs = int(d.num_seqs);
  p.q_len = int(d.q_len);
  p.hkv = int(d.hkv);
  p.group = int(d.group);
  p.head_dim = int(d.head_dim);
  p.block_size = int(d.block_size);
  p.block_shift = -1;
  for (int sh = 0; sh < 31; ++sh)
    if ((int64_t(1) << sh) == d.block_size) p.block_shift = sh;
  p.rows = int(d.rows);
  p.softmax_scale = d.softmax_scale;
  p.fp8_compute = is_fp8(c.opt.compute);
  p.compute_fp8 = p.fp8_compute ? c.opt.compute : c.k_cache.dtype;
  p.cache_fp8 = c.k_cache.dtype;
  p.fp8_max = p.fp8_compute ? fp8_max(c.opt.compute) : 0.0f;
  p.partial = sc.partial.data;
  p.partial_kind = partial_kind_of(c.opt.partial);
  p.m = sc.m.as<float>();
  p.l = sc.l.as<float>();
  return p;
}

void check_scratch(const Scratch& sc, const Params& p, int64_t slots, DType partial) {
  const int64_t need = slots * p.rows;
  if (sc.partial.dtype != partial) bad("scratch partial dtype differs from the call's partial dtype");
  if (sc.partial.numel() < need * p.head_dim || sc.m.numel() < need || sc.l.numel() < need)
    bad("scratch holds fewer than " + std::to_string(slots) + " slots");
}

// The attention over `slots` blocks: the matrix-unit body where it applies
// (NVIDIA, e4m3fn compute and cache, head_dim 64/128/256, per-tensor or no V
// scale, 16-byte aligned caches), else the fast scalar body (fp8 compute,
// head_dim 64/128/256, aligned), else the general one.
bool fast_attention_applies(const Params& p) {
  const bool aligned = reinterpret_cast<uintptr_t>(p.k) % 16 == 0 && reinterpret_cast<uintptr_t>(p.v) % 16 == 0;
  return p.fp8_compute && aligned && p.block_size % 16 == 0 &&
         (p.head_dim == 64 || p.head_dim == 128 || p.head_dim == 256);
}

#if defined(PAV_HIP_NVIDIA)
bool mma_attention_applies(const Params& p) {
  return fast_attention_applies(p) && p.compute_fp8 == DType::fp8_e4m3fn && p.cache_fp8 == DType::fp8_e4m3fn &&
         p.v_scale_kind != kScaleToken;
}
#endif

template <int kR>
void launch_fast(const Params& p, unsigned grid, hipStream_t s) {
  switch (p.head_dim) {
    case 64: attend_fast_kernel<kR, 64><<<grid, kThreads, 0, s>>>(p); break;
    case 128: attend_fast_kernel<kR, 128><<<grid, kThreads, 0, s>>>(p); break;
    default: attend_fast_kernel<kR, 256><<<grid, kThreads, 0, s>>>(p); break;
  }
}

#if defined(PAV_HIP_NVIDIA)
template <int kD, int kNT>
void launch_mma_shape(const Params& p, unsigned grid, hipStream_t s) {
  constexpr int bytes = mma::smem_bytes<kD, kNT>();
  // The dynamic shared-memory limit is raised once per device.
  static std::atomic<uint64_t> raised{0};
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  const uint64_t bit = uint64_t(1) << (dev & 63);
  if (!(raised.load() & bit)) {
    check(cudaFuncSetAttribute(mma::attend_mma_kernel<kD, kNT>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
          "matrix-unit attention: shared-memory limit");
    // All of the unified L1/shared storage as shared memory: two blocks of a
    // three-tile ring need nearly all of it.
    check(cudaFuncSetAttribute(mma::attend_mma_kernel<kD, kNT>, cudaFuncAttributePreferredSharedMemoryCarveout,
                               int(cudaSharedmemCarveoutMaxShared)),
          "matrix-unit attention: shared-memory carveout");
    raised.fetch_or(bit);
  }
  mma::attend_mma_kernel<kD, kNT><<<grid, kThreads, bytes, s>>>(p);
}

template <int kNT>
void launch_mma_rows(const Params& p, unsigned grid, hipStream_t s) {
  switch (p.head_dim) {
    case 64: launch_mma_shape<64, kNT>(p, grid, s); break;
    case 128: launch_mma_shape<128, kNT>(p, grid, s); break;
    default: launch_mma_shape<256, kNT>(p, grid, s); break;
  }
}
#endif

// Launches the attention and names the body that ran.
AttentionBody launch_attention(const Params& p, int64_t slots, hipStream_t s, const char* what) {
  const unsigned grid = unsigned(slots);
  AttentionBody body;
#if defined(PAV_HIP_NVIDIA)
  if (mma_attention_applies(p)) {
    // 8, 16 or 32 query rows per pass over the KV.
    if (p.rows <= 8)
      launch_mma_rows<1>(p, grid, s);
    else if (p.rows <= 16)
      launch_mma_rows<2>(p, grid, s);
    else
      launch_mma_rows<4>(p, grid, s);
    check_launch(what);
    return AttentionBody::matrix;
  }
#endif
  if (fast_attention_applies(p)) {
    if (p.rows <= 8)
      launch_fast<8>(p, grid, s);
    else
      launch_fast<16>(p, grid, s);
    body = AttentionBody::fast_scalar;
  } else {
    attend_kernel<<<grid, kThreads, 0, s>>>(p);
    body = AttentionBody::general;
  }
  check_launch(what);
  return body;
}

void launch_reduce(const Params& p, hipStream_t s) {
  const unsigned grid = unsigned(int64_t(p.num_seqs) * p.hkv);
  if (grid == 0) return;
  if (reduce_uses_bounded(p.ceiling)) {
    const bool aligned = reinterpret_cast<uintptr_t>(p.partial) % 16 == 0;
    if (p.head_dim == 128 && p.partial_kind != PartialKind::f32 && aligned)
      reduce_kernel<true, 8><<<grid, kThreads, 0, s>>>(p);
    else
      reduce_kernel<true, 1><<<grid, kThreads, 0, s>>>(p);
  } else {
    if (p.ceiling > kMaxReduceCeiling) bad("partition ceiling above " + std::to_string(kMaxReduceCeiling));
    // 16-bit partials: 8 dims per thread, so each row's walks over the
    // partitions (m, l and the merge weights) are shared by 8 outputs.
    const bool aligned = reinterpret_cast<uintptr_t>(p.partial) % 16 == 0;
    if (p.head_dim % 8 == 0 && p.partial_kind != PartialKind::f32 && aligned)
      reduce_kernel<false, 8><<<grid, kThreads, 0, s>>>(p);
    else
      reduce_kernel<false, 1><<<grid, kThreads, 0, s>>>(p);
  }
  check_launch("reduce");
}

}  // namespace

LaunchRecord uniform_decode(const DecodeCall& call, const Scratch& scratch, StreamHandle stream) {
  Params p = params_of(call, Scratch{});
  const int splits = uniform_splits(call);
  if (splits < 1 || splits > kMaxUniformPartitions) bad("uniform split count " + std::to_string(splits));
  p.planned = false;
  p.splits = splits;
  p.direct = splits == 1;
  p.ceiling = splits;
  const int64_t slots = int64_t(p.num_seqs) * p.hkv * splits;
  if (!p.direct) {
    check_scratch(scratch, p, slots, call.opt.partial);
    p.partial = scratch.partial.data;
    p.m = scratch.m.as<float>();
    p.l = scratch.l.as<float>();
  }
  const hipStream_t s = static_cast<hipStream_t>(stream);
  LaunchRecord rec;
  rec.attention_blocks = slots;
  if (slots == 0) return rec;
  rec.body = launch_attention(p, slots, s, "uniform attention");
  if (!p.direct) launch_reduce(p, s);
  rec.reduce = !p.direct && p.num_seqs > 0;
  return rec;
}

LaunchRecord planned_decode(const DecodeCall& call, const PlanView& plan, const Scratch& scratch,
                    uint32_t* dev_status, StreamHandle stream) {
  Params p = params_of(call, scratch);
  if (plan.num_seqs != p.num_seqs) bad("plan rows differ from num_seqs");
  if (plan.kv_heads != p.hkv) bad("plan kv_heads differ from the call's");
  if (plan.num_seqs > kMaxPlanBatch) bad("plan larger than kMaxPlanBatch");
  if (plan.capacity < 1 || plan.max_partitions < 1) bad("plan without capacity");
  if (!is_fp8(call.opt.compute)) bad("planned decode needs fp8 compute");
  p.planned = true;
  p.splits = 0;
  p.direct = false;
  p.work = plan.work_info;
  p.reduce_info = plan.reduce_info;
  p.capacity = plan.capacity;
  p.ceiling = plan.max_partitions;
  check_scratch(scratch, p, int64_t(p.hkv) * plan.capacity, call.opt.partial);
  const hipStream_t s = static_cast<hipStream_t>(stream);
  check_kernel<<<1, kCheckThreads, 0, s>>>(p, dev_status);
  check_launch("plan freshness check");
  LaunchRecord rec;
  rec.attention_blocks = int64_t(p.hkv) * plan.capacity;
  rec.body = launch_attention(p, rec.attention_blocks, s, "planned attention");
  launch_reduce(p, s);
  rec.reduce = p.num_seqs > 0;
  return rec;
}

const char* to_string(AttentionBody b) {
  switch (b) {
    case AttentionBody::matrix: return "matrix";
    case AttentionBody::fast_scalar: return "fast-scalar";
    case AttentionBody::general: return "general";
  }
  return "?";
}

DecodeResult status_from_words(const uint32_t w[kStatusWords]) {
  DecodeResult r;
  r.status = w[0] ? DecodeStatus::stale_plan : DecodeStatus::ok;
  r.stale_tasks = w[1];
  r.stale_rows = w[2];
  return r;
}

DecodeResult read_status(const uint32_t* dev_status, StreamHandle stream) {
  uint32_t w[kStatusWords] = {};
  copy_to_host(w, dev_status, sizeof(w), stream);
  return status_from_words(w);
}

}  // namespace pav::kernels::gpu
