#pragma once
// The CPU backend: a real, multithreaded implementation of the same decode
// numerics as the GPU kernels (REFERENCE sections 4-6). It trusts its inputs:
// the launch layer (kernels/launch.hpp) validates a call before it gets here.
#include <cstdint>

#include "kernels/call.hpp"
#include "kernels/planner.hpp"

namespace pav::kernels::cpu {

// Uniform split. splits = call.opt.uniform_partitions, or dense_decode_splits()
// when that is 0. With one split the output is written directly and scratch is
// not touched; otherwise scratch holds num_seqs*Hkv*splits slots.
void uniform_decode(const DecodeCall& call, const Scratch& scratch);

// The uniform split count this call would use.
int uniform_splits(const DecodeCall& call);

// Planned split over plan.work_info, then the reduce over plan.reduce_info.
// Tasks whose recorded length differs from the live one are not attended; the
// affected sequences' outputs are set to NaN and the result says stale_plan.
DecodeResult planned_decode(const DecodeCall& call, const PlanView& plan, const Scratch& scratch);

// Reduce variants, exposed for tests. `ceiling` is the largest count the plan
// may hold (max_partitions or the uniform split count): ceilings <= 64 take the
// bounded variant, which walks all `ceiling` slots and reads zero past `count`.
inline constexpr int kBoundedReduceCeiling = 64;
bool reduce_uses_bounded(int64_t ceiling);

}  // namespace pav::kernels::cpu
