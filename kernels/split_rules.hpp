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

}  // namespace pav::kernels
