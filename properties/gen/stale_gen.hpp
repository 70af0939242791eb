// SPDX-License-Identifier: Apache-2.0
#pragma once
// Scenarios for the stale-plan properties: a captured forward over live
// lengths, then one mutation a serving engine can make to those lengths or to
// what the call is paired with. The cache holds real tokens up to the longest
// length a scenario reaches, and every token a mutation adds is a sentinel
// (docs/numerics.md, "Verification practice"): attending over a stale range is a gross error.
#include <rapidcheck.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "kernels/dispatch/metadata.hpp"
#include "kernels/dispatch/plan_cache.hpp"
#include "properties/case/host_case.hpp"

namespace pav::props {

enum class Mutation : uint8_t {
  draft_steps,            // lengths advanced by 1 per step, in place, `steps` times
  shrink,                 // some lengths shorter
  zero,                   // one length set to 0
  batch_changed,          // the call has one sequence fewer than the plan
  hkv_changed,            // a plan made for another KV-head count
  swapped_micro_batches,  // micro-batch 0's call meets micro-batch 1's plan
  dummy_run,              // a dummy forward with synthetic lengths in between
  grow_one,               // one length longer, the others as they were (often a row that was empty)
};
std::string_view to_string(Mutation m);
inline constexpr int kMutationCount = 8;

struct StaleScenario {
  CaseSpec spec;                 // lens: the longest each sequence gets; sentinels on added tokens
  std::vector<int32_t> live;     // lengths at capture and at the first forward
  Mutation mutation = Mutation::draft_steps;
  int steps = 1;                 // draft_steps: how many
  std::vector<int32_t> other;    // shrink / zero / grow_one / swapped: the other lengths; dummy: synthetic ones
};
std::string to_string(const StaleScenario& s);
std::ostream& operator<<(std::ostream& os, const StaleScenario& s);

// Lengths sit near tile boundaries so that one more token often needs one more
// tile; B 1..4, Hkv 1..2, G 1..4, head_dim 64/128, q_len 1..2.
rc::Gen<StaleScenario> gen_stale_scenario();
rc::Gen<StaleScenario> gen_stale_scenario(Mutation m);

// The plan cache geometry a scenario's forwards need.
kernels::dispatch::PlanCacheConfig cache_config(const CaseSpec& spec);

// A forward's batch over `host`'s sequences: their live lengths, or `lens`
// in their place.
kernels::dispatch::BatchSpec batch_of(HostCase& host, int32_t* lens = nullptr, int micro_batch = 0);

}  // namespace pav::props
