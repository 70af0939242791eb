// SPDX-License-Identifier: Apache-2.0
// The reduce (decode_common.hpp lists the decode files).
#include "kernels/hip/decode_common.hpp"

namespace pav::kernels::gpu {
namespace {

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

// One block per (sequence, KV head) and chunk of its rows (gridDim.y chunks of
// reduce_chunk_rows(rows, gridDim.y) rows, kernels/split_rules.hpp; the bounded
// form always takes one chunk); each output thread owns kVec consecutive dims
// of one row.
// kBounded: walks `ceiling` (<= 64) slots per thread, computing its row's
// weights itself; reads past `count` return zero weight and never touch
// memory, so they cannot wrap into another sequence's partitions.
// Otherwise (up to 1024 partitions): a warp computes each row's M and L once
// (L summed in partition order, as one thread would), then the partitions are
// walked with their loads issued ahead of the weights, so that a long walk
// waits on memory once per eight partitions. When a batch of rows has fewer
// outputs than the block has threads, S = kThreads / outputs threads share an
// output, each walking one contiguous S-th of the partitions; their sums are
// added in walk order (the same terms in another order).
template <bool kBounded, int kVec>
__global__ void __launch_bounds__(kThreads) reduce_kernel(const Params p) {
  __shared__ int flag;
  const int seq = int(blockIdx.x / p.hkv), h = int(blockIdx.x % p.hkv);
  const int D = p.head_dim, G = p.group;
  const int chunk_rows = int(reduce_chunk_rows(p.rows, gridDim.y));
  const int row0 = int(blockIdx.y) * chunk_rows, row1 = min(p.rows, row0 + chunk_rows);
  if (row0 >= row1) return;
  int64_t base, count;
  if (p.planned) {
    if (sequence_stale(p, seq, &flag)) {
      for (int idx = threadIdx.x; idx < (row1 - row0) * D; idx += kThreads) {
        const int row = row0 + idx / D, d = idx % D, pos = row / G, g = row % G;
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
    for (int idx = threadIdx.x; idx < (row1 - row0) * groups; idx += kThreads) {
      const int row = row0 + idx / groups, d0 = (idx % groups) * kVec;
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
    __shared__ float part[kThreads * kVec];  // the shared walks' sums, [S][outputs][kVec]
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    // Output idx's sum over partitions [q0, q1), in partition order.
    auto walk = [&](int row_batch, int idx, int64_t q0, int64_t q1, float (&o)[kVec]) {
      const int r = idx / groups, row = row_batch + r, d0 = (idx % groups) * kVec;
#pragma unroll
      for (int j = 0; j < kVec; ++j) o[j] = 0.0f;
      const float M = row_M[r], L = row_L[r];
      if (!(L > 0.0f)) return;
#pragma unroll 8
      for (int64_t q = q0; q < q1; ++q) {
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
    };
    for (int row_batch = row0; row_batch < row1; row_batch += kReduceRowBatch) {
      const int nb = min(kReduceRowBatch, row1 - row_batch);
      __syncthreads();  // the previous batch is done with row_M, row_L and part
      for (int r = warp; r < nb; r += kWarps) {
        const int row = row_batch + r;
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
      const int outputs = nb * groups;
      const int shares = outputs >= kThreads ? 1 : kThreads / outputs;
      float o[kVec];
      if (shares == 1) {
        for (int idx = threadIdx.x; idx < outputs; idx += kThreads) {
          walk(row_batch, idx, 0, count, o);
          store(row_batch + idx / groups, (idx % groups) * kVec, o);
        }
        continue;
      }
      const int idx = int(threadIdx.x) % outputs, share = int(threadIdx.x) / outputs;
      if (share < shares) {
        const int64_t per = (count + shares - 1) / shares;
        walk(row_batch, idx, min64(count, share * per), min64(count, (share + 1) * per), o);
#pragma unroll
        for (int j = 0; j < kVec; ++j) part[(share * outputs + idx) * kVec + j] = o[j];
      }
      __syncthreads();
      if (int(threadIdx.x) < outputs) {
#pragma unroll
        for (int j = 0; j < kVec; ++j) o[j] = part[idx * kVec + j];
        for (int s = 1; s < shares; ++s)
#pragma unroll
          for (int j = 0; j < kVec; ++j) o[j] += part[(s * outputs + idx) * kVec + j];
        store(row_batch + idx / groups, (idx % groups) * kVec, o);
      }
    }
  }
}

}  // namespace

void launch_reduce(const Params& p, hipStream_t s) {
  const unsigned pairs = unsigned(int64_t(p.num_seqs) * p.hkv);
  if (pairs == 0) return;
  if (reduce_uses_bounded(p.ceiling)) {
    const dim3 grid(pairs, 1);
    const bool aligned = reinterpret_cast<uintptr_t>(p.partial) % 16 == 0;
    if (p.head_dim == 128 && p.partial_kind != PartialKind::f32 && aligned)
      reduce_kernel<true, 8><<<grid, kThreads, 0, s>>>(p);
    else
      reduce_kernel<true, 1><<<grid, kThreads, 0, s>>>(p);
  } else {
    if (p.ceiling > kMaxReduceCeiling) bad("partition ceiling above " + std::to_string(kMaxReduceCeiling));
    const dim3 grid(pairs, unsigned(reduce_row_chunks(p.rows, pairs, p.cu)));  // kernels/split_rules.hpp
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

}  // namespace pav::kernels::gpu
