// SPDX-License-Identifier: Apache-2.0
#pragma once
// The CPU backend: a real, multithreaded implementation of the same decode
// numerics as the GPU kernels (docs/numerics.md). It trusts its inputs:
// the launch layer (kernels/launch.hpp) validates a call before it gets here.
#include <cstdint>

#include "kernels/call.hpp"
#include "kernels/planner.hpp"

namespace pav::kernels::cpu {

// Uniform split over uniform_splits(call) partitions (kernels/split_rules.hpp).
// With one split the output is written directly and scratch is not touched;
// otherwise scratch holds num_seqs*Hkv*splits slots.
void uniform_decode(const DecodeCall& call, const Scratch& scratch);

// Planned split over plan.work_info, then the reduce over plan.reduce_info.
// Tasks whose recorded length differs from the live one are not attended; the
// affected sequences' outputs are set to NaN and the result says stale_plan.
DecodeResult planned_decode(const DecodeCall& call, const PlanView& plan, const Scratch& scratch);

}  // namespace pav::kernels::cpu
