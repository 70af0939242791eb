// SPDX-License-Identifier: Apache-2.0
#pragma once
// The launch entries of the two decode kernels. Each validates the call (the
// only place in the launch path that rejects: kernels/validate.hpp) and then
// runs the selected backend. The routing layer (kernels/dispatch) calls these;
// tests call them too, never a stand-in.
#include "kernels/call.hpp"
#include "kernels/planner.hpp"
#include "kernels/validate.hpp"

namespace pav::kernels {

enum class Backend : uint8_t { cpu, gpu };

// The planned kernel. plan == nullptr runs its uniform split count (1..256
// partitions, scratch [num_seqs*Hkv*splits, rows, D]); with a plan, the tasks of
// plan.work_info over scratch [Hkv, capacity, rows, D], then the reduce over
// plan.reduce_info. Throws RejectError (validate_planned) on any hard reject.
// A plan whose recorded lengths differ from the live ones is not attended: the
// result says stale_plan and the affected sequences' outputs are NaN.
[[nodiscard]] DecodeResult launch_planned(const DecodeCall& call, const PlanView* plan,
                                          const Scratch& scratch, Backend backend = Backend::cpu);

// The uniform kernel (the default path). Throws RejectError (validate_uniform).
void launch_uniform(const DecodeCall& call, const Scratch& scratch, Backend backend = Backend::cpu);

// The entries' function types, pinned by static_asserts in the tests: a caller
// that passes what the entry does not take fails to compile, not at run time.
using PlannedLaunchFn = DecodeResult(const DecodeCall&, const PlanView*, const Scratch&, Backend);
using UniformLaunchFn = void(const DecodeCall&, const Scratch&, Backend);

// Hook for the GPU backend (kernels/hip): it registers its entries at start-up,
// so this library has no link dependency on it. Backend::gpu without a
// registered backend throws std::runtime_error (a build configuration error,
// not a reject of the call).
struct GpuBackendEntries {
  DecodeResult (*planned)(const DecodeCall&, const PlanView*, const Scratch&) = nullptr;
  void (*uniform)(const DecodeCall&, const Scratch&) = nullptr;
};
void register_gpu_backend(const GpuBackendEntries& entries);
bool gpu_backend_available();

}  // namespace pav::kernels
