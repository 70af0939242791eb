// SPDX-License-Identifier: Apache-2.0
#pragma once
// Split and reduce rules shared by every backend (CPU, GPU), validation and the
// test generators, so each rule has one source: how many partitions a uniform
// run uses, and which reduce variant a partition ceiling selects.
#include <cstdint>

#include "kernels/call.hpp"
#include "kernels/planner.hpp"
#include "kernels/platform_hd.hpp"

namespace pav::kernels {

// The uniform split count a call runs with: call.opt.uniform_partitions when
// set (> 0), else dense_decode_splits(num_seqs, kv_heads, cu). A run with one
// split writes the output directly; with more, scratch holds
// num_seqs * kv_heads * splits partition slots.
inline int uniform_splits(const DecodeCall& call) {
  if (call.opt.uniform_partitions > 0) return call.opt.uniform_partitions;
  return dense_decode_splits(call.context_lens.shape[0], call.k_cache.shape[1], call.opt.cu);
}

// The reduce variant. `ceiling` is the largest partition count a reduce may see
// (the plan's max_partitions, or the uniform split count). Ceilings up to
// kBoundedReduceCeiling take the bounded variant, which walks all `ceiling`
// slots and gives the ones past the sequence's count zero weight; larger
// ceilings take the general variant, which walks exactly `count` slots.
inline constexpr int kBoundedReduceCeiling = 64;
PAV_HD constexpr bool reduce_uses_bounded(int64_t ceiling) { return ceiling <= kBoundedReduceCeiling; }

// The general reduce's row chunks (GPU): the `rows` query rows of one (sequence, KV head)
// pair are merged by `chunks` blocks, chunk c taking rows [c * n, min(rows, (c + 1) * n)) with
// n = reduce_chunk_rows(rows, chunks), so every row is in exactly one chunk. The count comes
// from reduce_row_chunks: about two blocks per compute unit `cu` over the call's `pairs`
// pairs, at most one chunk per row, and no chunk left empty (a batch of few pairs with long
// walks still fills the device; at Hkv 1 a batch of 32 would otherwise be 32 blocks).
PAV_HD inline int64_t reduce_chunk_rows(int64_t rows, int64_t chunks) { return ceil_div64(rows, chunks); }
inline int64_t reduce_row_chunks(int64_t rows, int64_t pairs, int64_t cu) {
  if (rows < 1 || pairs < 1) return 1;
  const int64_t want = ceil_div64(2 * max64(cu, 1), pairs);
  return ceil_div64(rows, reduce_chunk_rows(rows, min64(want, rows)));
}

}  // namespace pav::kernels
