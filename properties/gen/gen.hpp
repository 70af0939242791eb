// SPDX-License-Identifier: Apache-2.0
#pragma once
// RapidCheck generators of uneven decode batches and whole decode cases.
#include <rapidcheck.h>

#include <cstdint>
#include <vector>

#include "properties/case/host_case.hpp"

namespace pav::props {

// The boundary lengths of docs/numerics.md, "Verification practice".
const std::vector<int32_t>& boundary_lengths();

// One raw context length for the planner: boundaries, short, heavy-tailed
// (log-uniform up to 2^31-1), zero and negative.
rc::Gen<int32_t> gen_plan_length();
// An uneven batch of 1..max_batch planner lengths.
rc::Gen<std::vector<int32_t>> gen_plan_lengths(int max_batch = kernels::kMaxPlanBatch);

struct DecodeGenLimits {
  int max_batch = 5;
  int64_t max_total_tokens = 20000;   // keeps one CPU case in the tens of milliseconds
  bool allow_long = true;             // occasionally one 65537 / 200003-token sequence
};
// A decode length for property runs: mostly boundaries and short lengths.
rc::Gen<int32_t> gen_decode_length(bool allow_long);
// A valid decode case for the planned kernel's domain (or the uniform path):
// uneven lengths, G 1..17, head_dim 64/128/256, block size 16/64/128, both V
// layouts, q_len 1..4, scales none/per tensor/per token, partial bf16/fp32,
// sentinels at partition boundaries and last positions.
rc::Gen<CaseSpec> gen_decode_case(DecodeGenLimits limits = {});

// Sentinels at the tile boundaries and last position of every sequence.
std::vector<Sentinel> boundary_sentinels(const std::vector<int32_t>& lens);

}  // namespace pav::props

namespace pav::props {
// One value drawn from a generator outside a property (pav verify, pav fuzz):
// reproducible from (seed, size).
template <class T>
T sample(const rc::Gen<T>& gen, uint64_t seed, int size = 50) {
  return gen(rc::Random(seed), size).value();
}
}  // namespace pav::props
