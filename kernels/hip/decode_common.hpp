// SPDX-License-Identifier: Apache-2.0
#pragma once
// What the decode kernels' files share: the block constants, the call's Params,
// the device pieces every attention body uses (work resolution, Q quantization,
// the per-tile softmax, the partial store) and each body's launch entry. One
// kernel body per file:
//   decode_general.hip  attend_kernel: any head_dim of the backend, either compute type
//   decode_fast.hip     attend_fast_kernel: fp8 compute, head_dim 64, 128 or 256
//   decode_mma.hip      attend_mma_kernel: the matrix-unit body (NVIDIA builds only)
//   reduce.hip          reduce_kernel: the partials merged (bounded and general variants)
//   freshness.hip       check_kernel: the plan freshness check
//   decode.hip          the entries: a call's Params, the body chosen, the launches
// Numerics mirror kernels/cpu/decode_cpu.cpp.
// device_common.hpp first: on AMD the runtime header must precede <cstring>.
#include "kernels/hip/device_common.hpp"
#include <stdexcept>
#include <string>

#include "kernels/hip/gpu_backend.hpp"
#include "kernels/limits.hpp"
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
constexpr int kMinHeadDim = kGpuMinHeadDim, kMaxHeadDim = kGpuMaxHeadDim;
constexpr int kMaxReduceCeiling = 1024;   // general reduce: partitions per (seq, head)
constexpr int kCheckThreads = 1024;
static_assert(kThreads == 256, "the fp8 table is filled one code per thread");
static_assert(kThreads % kWarpSize == 0, "blocks hold whole warps");

enum ScaleKind : int { kScaleNone = 0, kScaleTensor = 1, kScaleToken = 2 };

}  // namespace

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
  int cu;           // compute units the call names (DecodeOptions::cu): the reduce's grid shape
};

// Each body's launch entry, defined in the body's file.
// attend_kernel, one block per slot (decode_general.hip).
void launch_general(const Params& p, unsigned grid, hipStream_t s);
// attend_fast_kernel, kR (8 or 16) query rows per pass (decode_fast.hip).
template <int kR>
void launch_fast(const Params& p, unsigned grid, hipStream_t s);
#if defined(PAV_HIP_NVIDIA)
// attend_mma_kernel, 8 * kNT (kNT 1, 2, 3 or 4) query rows per pass (decode_mma.hip).
template <int kNT>
void launch_mma_rows(const Params& p, unsigned grid, hipStream_t s);
#endif
// The reduce, one block per (sequence, KV head) (reduce.hip).
void launch_reduce(const Params& p, hipStream_t s);
// The plan freshness check, writing the status words (freshness.hip).
void launch_check(const Params& p, uint32_t* status, hipStream_t s);

namespace {

inline void bad(const std::string& what) { throw std::invalid_argument("gpu decode: " + what); }

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

// True when sequence `seq`'s range or any row of it is stale for the live
// length (range_stale, task_row_stale: the CPU backend's rule).
// Called by every thread of the block; returns the same value to all.
__device__ bool sequence_stale(const Params& p, int seq, int* flag) {
  const int32_t live = p.lens[seq];
  const int64_t first = p.reduce_info[2 * seq], count = p.reduce_info[2 * seq + 1];
  const bool whole = range_stale(first, count, p.capacity, live);
  if (threadIdx.x == 0) *flag = whole ? 1 : 0;
  __syncthreads();
  for (int64_t j = threadIdx.x; !whole && j < count; j += blockDim.x)
    if (task_row_stale(p.work, p.capacity, first, count, j, seq, live)) atomicOr(flag, 1);
  __syncthreads();
  const bool stale = *flag != 0;
  __syncthreads();
  return stale;
}

// ---- attention: pieces both bodies share -----------------------------------------------
// ([[maybe_unused]]: the files without an attention body include them too.)
// Which partition block `slot` attends: uniform (seq*Hkv + h)*splits + k, planned
// h*capacity + i. False (for the whole block) when the slot is padding, not a
// task of its sequence's range, or its sequence is stale (not attended).
[[maybe_unused]]
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
[[maybe_unused]]
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
[[maybe_unused]]
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

}  // namespace
}  // namespace pav::kernels::gpu
